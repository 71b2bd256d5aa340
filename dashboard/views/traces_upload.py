"""Trace upload on the Corpus page (semantics §19): a reviewer uploads an agent trace file
(OTLP JSON or protobuf, OpenInference, Langfuse, Inspect AI) or a coding agent's session logs
(Claude Code, Codex CLI, OpenHands, SWE-agent: one file, or a .tar.gz/.zip of many); each
session becomes a trajectory with a derived signature, secrets redacted, through the same
import as the command line and the API."""

from pathlib import Path

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render

from lifecycle.services.traces import import_logs, import_traces, is_agent_log
from lifecycle.states import Actor
from traces.logs import FORMATS as LOG_FORMATS
from traces.model import FORMATS, TraceRejected
from traces.sources import REQUEST_LIMITS

from . import reviewer_required

MAX_UPLOAD_BYTES = 50 * 1024 * 1024
SHOWN_ERRORS = 20


class TraceUploadForm(forms.Form):
    trace_file = forms.FileField(label="Trace file")
    format = forms.ChoiceField(
        choices=[("", "detect it")] + [(f, f) for f in FORMATS + LOG_FORMATS], required=False
    )
    replace = forms.BooleanField(
        required=False, label="Overwrite sessions already imported with other content"
    )

    def clean_trace_file(self):
        upload = self.cleaned_data["trace_file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError("the file is larger than 50 MB")
        return upload


def _import(upload, data: dict, actor: Actor):
    """One call into the domain: the logs import for coding-agent logs (streamed from the
    uploaded file on disk when Django spooled it there), the trace import otherwise."""
    fmt = data["format"] or None
    on_disk = Path(upload.temporary_file_path()) if hasattr(upload, "temporary_file_path") else None
    source = on_disk or upload.read()
    if is_agent_log(source, fmt=fmt, name=upload.name):
        return import_logs(
            source,
            fmt=fmt,
            name=upload.name,
            replace=data["replace"],
            actor=actor,
            limits=REQUEST_LIMITS,
        ).result
    protobuf = upload.name.endswith((".pb", ".binpb", ".protobuf"))
    body = source.read_bytes() if on_disk else source
    return import_traces(
        body,
        fmt=fmt,
        content_type="application/x-protobuf" if protobuf else "",
        replace=data["replace"],
        actor=actor,
    )


@reviewer_required
def trace_upload(request):
    form = TraceUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["trace_file"]
        try:
            result = _import(upload, form.cleaned_data, Actor.reviewer(request.user.get_username()))
        except TraceRejected as exc:
            shown = [str(e) for e in exc.errors[:SHOWN_ERRORS]]
            return render(
                request,
                "dashboard/traces/upload.html",
                {"form": form, "errors": shown, "more": len(exc.errors) - len(shown)},
                status=422,
            )
        messages.success(
            request,
            f"{upload.name}: {result.created} created, {result.unchanged} unchanged, "
            f"{result.updated} updated.",
        )
        return redirect("corpus")
    status = 400 if request.method == "POST" else 200
    return render(request, "dashboard/traces/upload.html", {"form": form}, status=status)
