"""Callbacks of the HTTP replay backend (semantics §14): the rule tool and the started signal for
one replay, authorised by the per-replay token the engine sent with the case."""

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router
from ninja.errors import HttpError

from lifecycle.scopes import record_reads, rule_as_dict, scope_rules
from replay.backends.http import TOKEN_HEADER, BadReplayToken, read_token
from replay.models import ReplaySession

router = Router(tags=["replay"])


def _replay_of(request: HttpRequest) -> tuple[str, str]:
    token = request.headers.get(TOKEN_HEADER) or request.GET.get("token", "")
    try:
        return read_token(token)
    except BadReplayToken as exc:
        raise HttpError(401, str(exc)) from None


# The operation ids are the ones the schema has always published.
@router.get("/rules", auth=None, operation_id="replay_api_replay_rules")
def replay_rules(request: HttpRequest, scope: str | None = None, query: str | None = None):
    """The rule tool as the replay sees it: active rules and the one candidate under test;
    every rule returned is recorded as read by this replay session (semantics §7.3, §7.5)."""
    session_id, rule_id = _replay_of(request)
    active, candidates = scope_rules(scope or None, query=query, visible_candidates=[rule_id])
    returned = active + candidates
    record_reads(session_id=session_id, rule_ids=[r.id for r in returned], via="replay")
    return [rule_as_dict(r) for r in returned]


@router.post("/started", auth=None, operation_id="replay_api_replay_started")
def replay_started(request: HttpRequest):
    """The harness's `mark_execution_started()` (semantics §9.3): idempotent."""
    session_id, _ = _replay_of(request)
    updated = ReplaySession.objects.filter(pk=session_id, started_at__isnull=True).update(
        started_at=timezone.now()
    )
    if not updated and not ReplaySession.objects.filter(pk=session_id).exists():
        raise HttpError(404, "no such replay")
    return {"started": True}
