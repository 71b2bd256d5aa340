"""Callbacks of the HTTP replay backend (semantics §14.4): the rule tool and the started signal
of one replay, authorised by the replay's own token in the path."""

from django.http import HttpRequest
from ninja import Router
from ninja.errors import HttpError

from replay.harness import UnknownReplay, harness_rules, harness_started

router = Router(tags=["replay"])


@router.get("/{token}/rules", auth=None, operation_id="replay_api_replay_rules")
def replay_rules(
    request: HttpRequest, token: str, scope: str | None = None, query: str | None = None
):
    """The rule tool as this replay sees it (semantics §7.3, §17.1); reads are recorded."""
    try:
        return harness_rules(token=token, scope=scope, query=query)
    except UnknownReplay as exc:
        raise HttpError(401, str(exc)) from exc


@router.post("/{token}/started", auth=None, operation_id="replay_api_replay_started")
def replay_started(request: HttpRequest, token: str):
    """The harness's `mark_execution_started()` (semantics §9.3): idempotent."""
    try:
        harness_started(token=token)
    except UnknownReplay as exc:
        raise HttpError(401, str(exc)) from exc
    return {"started": True}
