"""Rule packs and agent files (semantics §13). Moving packs either way is for reviewers only,
here and on the dashboard alike."""

from django.http import HttpResponse
from ninja import Query, Router, Schema
from pydantic import Field

from lifecycle.services.packs import import_pack, pack_text, preview_pack

from . import protocol
from .protocol import ERRORS, REVIEW, ApiError, request_actor
from .schemas import PackImportOut, PackPreviewOut, Text

router = Router(tags=["packs"])
PACK_CONTENT_TYPES = {
    "yaml": "application/yaml",
    "json": "application/json",
    "agents_md": "text/markdown",
    "claude_md": "text/markdown",
    "cursor_mdc": "text/markdown",
}


class PackQuery(Schema):
    scope: list[Text] | None = Field(None, description="repeatable; default: every scope")
    state: list[Text] | None = Field(None, description="repeatable; default: active")
    format: Text = Field("yaml", description="yaml, json, agents_md, claude_md or cursor_mdc")


@router.get(
    "/packs",
    operation_id="exportPack",
    auth=REVIEW,
    response=ERRORS,
    summary="Export a rule pack, or one scope's active rules as an agent file (reviewer)",
    openapi_extra={
        "responses": {
            "200": {
                "description": "the pack (YAML/JSON) or the agent file (Markdown)",
                "content": {
                    # A pack is a document (pack_version, rules, checksum); an agent file is text.
                    "application/yaml": {"schema": {"type": "object"}},
                    "application/json": {"schema": {"type": "object"}},
                    "text/markdown": {"schema": {"type": "string"}},
                },
            }
        }
    },
)
def get_pack(request, params: Query[PackQuery]):
    text = pack_text(scopes=params.scope, states=params.state, fmt=params.format)
    return HttpResponse(text, content_type=f"{PACK_CONTENT_TYPES[params.format]}; charset=utf-8")


@router.post(
    "/packs",
    operation_id="importPack",
    auth=REVIEW,
    response={200: PackImportOut | PackPreviewOut, **ERRORS},
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "a pack as exported (YAML or JSON), sent as is",
            "content": {
                "application/yaml": {"schema": {"type": "string"}},
                "application/json": {"schema": {"type": "object"}},
            },
        }
    },
    summary="Import a rule pack as candidates (reviewer); dry_run=true only previews",
)
def post_pack(request, dry_run: bool = False):
    try:
        text = protocol.raw_body(request).decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the pack is not valid UTF-8") from None
    if dry_run:
        return preview_pack(text).as_dict()
    return import_pack(text, actor=request_actor(request))
