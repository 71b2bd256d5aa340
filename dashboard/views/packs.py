"""Packs page (semantics §13): export by scope, state and format; import in two steps — upload,
then a validation preview that writes nothing, then an explicit confirmation. Moving packs
either way is for reviewers only, as in the API; viewers see the page and that rule. The pack
logic is lifecycle.services.packs; these views only parse the request and render."""

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboard.forms import PackExportForm
from lifecycle.selectors import corpus as selectors_corpus
from lifecycle.services import packs
from lifecycle.states import Actor

from . import is_reviewer, reviewer_required

FORMATS = {
    # value: (label, content type)
    "yaml": ("Pack (YAML)", "application/yaml; charset=utf-8"),
    "json": ("Pack (JSON)", "application/json; charset=utf-8"),
    "agents_md": ("AGENTS.md (one scope, active rules)", "text/markdown; charset=utf-8"),
    "claude_md": ("CLAUDE.md (one scope, active rules)", "text/markdown; charset=utf-8"),
    "cursor_mdc": ("Cursor rule .mdc (one scope, active rules)", "text/markdown; charset=utf-8"),
}
_FILE_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _page(request, *, status: int = 200, export_form: PackExportForm | None = None, **context):
    scopes = [c.scope for c in selectors_corpus.scope_counts()]
    formats = [(value, label) for value, (label, _) in FORMATS.items()]
    context = {
        "scopes": scopes,
        "formats": formats,
        "export_form": export_form or PackExportForm(scopes=scopes, formats=formats),
        "can_move_packs": is_reviewer(request.user),
        **context,
    }
    return render(request, "dashboard/packs/packs.html", context, status=status)


@login_required
def pack_page(request):
    return _page(request)


def _file_name(*, scopes: list[str], fmt: str) -> str:
    if fmt in packs.PACK_FORMATS:
        return f"cauterweb-pack-{timezone.now().strftime('%Y%m%dT%H%M%SZ')}.{fmt}"
    name = {"agents_md": "AGENTS.md", "claude_md": "CLAUDE.md"}.get(fmt)
    return name or f"{_FILE_SAFE.sub('-', scopes[0]).strip('-') or 'scope'}.mdc"


@reviewer_required
def pack_export(request):
    """The export as a download (GET: it writes nothing). A bad selection re-renders the form
    with the message and a 400."""
    formats = [(value, label) for value, (label, _) in FORMATS.items()]
    scopes = [c.scope for c in selectors_corpus.scope_counts()]
    form = PackExportForm(request.GET, scopes=scopes, formats=formats)
    selection = form.selection()
    try:
        text = packs.pack_text(**selection)
    except packs.InvalidSelection as exc:
        messages.error(request, f"Cannot export ({exc.field}): {exc}")
        return _page(request, status=400, export_form=form)
    response = HttpResponse(text, content_type=FORMATS[selection["fmt"]][1])
    name = _file_name(scopes=selection["scopes"], fmt=selection["fmt"])
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def _uploaded_text(request) -> str:
    """The pack from the file field, else the text area; raises UnicodeDecodeError."""
    upload = request.FILES.get("pack_file")
    if upload is not None:
        return upload.read().decode("utf-8-sig")
    return request.POST.get("pack_text", "")


@require_POST
@reviewer_required
def pack_import(request):
    """Step one: validate the uploaded pack and show what importing it would do. Nothing is
    written here, whatever the pack holds."""
    try:
        text = _uploaded_text(request)
    except UnicodeDecodeError:
        messages.error(request, "The pack file is not UTF-8 text.")
        return _page(request, status=400)
    return _preview_page(request, packs.preview_pack(text), text)


def _preview_page(request, preview: packs.PackPreview, text: str):
    new = sum(1 for p in preview.rules if p.action == "create")
    return _page(
        request,
        status=200 if preview.ok else 400,
        preview=preview,
        pack_text=text,
        new_rules=new,
        unchanged_rules=len(preview.rules) - new,
    )


@require_POST
@reviewer_required
def pack_import_confirm(request):
    """Step two: import the previewed pack as candidates, all or nothing (semantics §13). The text
    is validated again: the preview is advice, never a licence."""
    text = request.POST.get("pack_text", "")
    try:
        result = packs.import_pack(text, actor=Actor.reviewer(request.user.get_username()))
    except packs.PackRejected as exc:
        messages.error(request, f"Nothing imported: {len(exc.errors)} error(s).")
        return _preview_page(request, packs.preview_pack(text), text)
    created = ", ".join(result["rules"]) or "none"
    messages.success(
        request,
        f"Imported {result['created']} rule(s) as candidates ({created}); "
        f"{result['unchanged']} already here unchanged.",
    )
    return redirect("packs")


@require_POST
@reviewer_required
def pack_stage(request):
    """Send the previewed pack to the review queue instead of importing it now: it waits there
    for a reviewer (another one, or later)."""
    text = request.POST.get("pack_text", "")
    try:
        staged = packs.pack_stage(text, actor=Actor.reviewer(request.user.get_username()))
    except packs.PackRejected as exc:
        messages.error(request, f"Not sent for review: {len(exc.errors)} error(s).")
        return _preview_page(request, packs.preview_pack(text), text)
    messages.success(request, f"{staged.name} @ {staged.version} waits in the review queue.")
    return redirect("staged-pack", pack_id=staged.pk)
