"""Trace upload on the Corpus page (semantics §19): a reviewer uploads an agent trace file
(OTLP JSON or protobuf, OpenInference, Langfuse, Inspect AI); each session becomes a trajectory
with a derived signature, through the same import as the command line and the API."""

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render

from lifecycle.services.traces import import_traces
from lifecycle.states import Actor
from traces.model import FORMATS, TraceRejected

from . import reviewer_required

MAX_UPLOAD_BYTES = 50 * 1024 * 1024
SHOWN_ERRORS = 20


class TraceUploadForm(forms.Form):
    trace_file = forms.FileField(label="Trace file")
    format = forms.ChoiceField(
        choices=[("", "detect it")] + [(f, f) for f in FORMATS], required=False
    )
    replace = forms.BooleanField(
        required=False, label="Overwrite sessions already imported with other content"
    )

    def clean_trace_file(self):
        upload = self.cleaned_data["trace_file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError("the file is larger than 50 MB")
        return upload


@reviewer_required
def trace_upload(request):
    form = TraceUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["trace_file"]
        protobuf = upload.name.endswith((".pb", ".binpb", ".protobuf"))
        try:
            result = import_traces(
                upload.read(),
                fmt=form.cleaned_data["format"] or None,
                content_type="application/x-protobuf" if protobuf else "",
                replace=form.cleaned_data["replace"],
                actor=Actor.reviewer(request.user.get_username()),
            )
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
