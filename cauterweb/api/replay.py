"""Callbacks of the HTTP replay backend (semantics §14): the rule tool and the started signal
of one replay, reached only through that replay's own token — random, unguessable, stored with
the replay and valid while it runs. Reads recorded here are the only reads of a remote replay
that count (semantics §7.5): a read under the same session id by any other route (the public
rule tool, a report) is not this replay's."""

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router
from ninja.errors import HttpError

from lifecycle.scopes import record_reads
from replay.cases import TREATMENT, Actives, rule_tool
from replay.models import ReplaySession, ReplayStatus

router = Router(tags=["replay"])


def _replay_of(token: str) -> ReplaySession:
    replay = (
        ReplaySession.objects.select_related("rule")
        .filter(token=token)
        .exclude(status=ReplayStatus.DONE)
        .first()
        if token
        else None
    )
    if replay is None:
        raise HttpError(401, "unknown or finished replay")
    return replay


@router.get("/{token}/rules", auth=None)
def replay_rules(
    request: HttpRequest, token: str, scope: str | None = None, query: str | None = None
):
    """The rule tool as this replay sees it: the active rules as its round started and, in
    the treatment arm, the candidate under test (semantics §7.3, §17.1); every rule returned
    is recorded as read by this replay."""
    replay = _replay_of(token)
    tool = rule_tool(
        Actives.at_round_start(replay.round_id), replay.rule, arm=replay.arm or TREATMENT
    )
    returned = tool(scope or None, query)
    record_reads(session_id=replay.id, rule_ids=[r["id"] for r in returned], via="replay")
    return returned


@router.post("/{token}/started", auth=None)
def replay_started(request: HttpRequest, token: str):
    """The harness's `mark_execution_started()` (semantics §9.3): idempotent."""
    replay = _replay_of(token)
    ReplaySession.objects.filter(pk=replay.pk, started_at__isnull=True).update(
        started_at=timezone.now()
    )
    return {"started": True}
