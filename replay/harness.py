"""The remote harness's side of one replay (semantics §14.4): the rule tool and the started
signal, reached only through the replay's own token — random, unguessable, stored with the
replay and valid while it runs. Reads recorded here are the only reads of a remote replay that
count (semantics §7.5): a read under the same session id by any other route is not this
replay's."""

from django.utils import timezone

from lifecycle.scopes import record_reads

from .cases import TREATMENT, Actives, rule_tool
from .models import ReplaySession, ReplayStatus, RoundStatus, ValidationRound


class UnknownReplay(Exception):
    """No running replay holds this token."""


def _running(token: str) -> ReplaySession:
    """The replay this token belongs to, while it runs: a replay that finished, or whose round
    ended (finished, failed, or reaped as dead), has a dead token (docs/semantics.md#s14-5)."""
    ended = ValidationRound.objects.exclude(status=RoundStatus.RUNNING).values("pk")
    replay = (
        ReplaySession.objects.select_related("rule")
        .filter(token=token)
        .exclude(status=ReplayStatus.DONE)
        .exclude(round_id__in=ended)
        .first()
        if token
        else None
    )
    if replay is None:
        raise UnknownReplay("unknown or finished replay")
    return replay


def harness_rules(*, token: str, scope: str | None, query: str | None) -> list[dict]:
    """The rule tool as this replay sees it: the active rules as its round started and, in the
    treatment arm, the candidate under test (semantics §7.3, §17.1); every rule returned is
    recorded as read by this replay."""
    replay = _running(token)
    tool = rule_tool(
        Actives.at_round_start(replay.round_id), replay.rule, arm=replay.arm or TREATMENT
    )
    returned = tool(scope or None, query)
    record_reads(session_id=replay.id, rule_ids=[r["id"] for r in returned], via="replay")
    return returned


def harness_started(*, token: str) -> None:
    """The harness's `mark_execution_started()` (semantics §9.3): idempotent."""
    replay = _running(token)
    ReplaySession.objects.filter(pk=replay.pk, started_at__isnull=True).update(
        started_at=timezone.now()
    )
