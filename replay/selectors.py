"""Reads for the rounds pages and the charts (semantics §9, §10, §18): a fixed number of
queries each."""

from dataclasses import dataclass

from django.core.paginator import Paginator
from django.db.models import Count, Max, QuerySet
from django.db.models.fields.json import KT

from lifecycle.journal import EventType
from lifecycle.metrics import load_registry
from lifecycle.models import JournalEvent

from .engine import lower_is_better
from .models import ReplaySample, RoundStatus, ValidationRound

# The charts look at recent history: enough to see a distribution, bounded so the page stays
# fast on a journal of millions of events.
CHART_CASE_LIMIT = 5000
CHART_ROUND_LIMIT = 50


def round_list() -> QuerySet[ValidationRound]:
    return ValidationRound.objects.order_by("-id")


@dataclass
class QueueRow:
    position: int
    rule_id: str
    validator: str
    replay_attempts: int | None
    budget_exhausted: bool
    outcome: str
    reason: str
    pending_reason: str


def queue_rows(queue: list[str], events: list[JournalEvent], *, start: int = 1) -> list[QueueRow]:
    """One row per queued candidate in the round's order (semantics §9.2), with the validator it got
    and its verdict (semantics §10); a candidate not reached yet has neither."""
    started = {
        e.rule_id: e.evidence for e in events if e.type == EventType.VALIDATION_CANDIDATE_STARTED
    }
    verdicts = {e.rule_id: e.evidence for e in events if e.type == EventType.VALIDATION_VERDICT}
    rows = []
    for position, rule_id in enumerate(queue, start=start):
        begun = started.get(rule_id, {})
        verdict = verdicts.get(rule_id, {})
        rows.append(
            QueueRow(
                position=position,
                rule_id=rule_id,
                validator=verdict.get("validator") or begun.get("validator", ""),
                replay_attempts=begun.get("replay_attempts"),
                budget_exhausted=bool(
                    verdict.get("round_budget_exhausted") or begun.get("round_budget_exhausted")
                ),
                outcome=verdict.get("outcome", ""),
                reason=verdict.get("reason", ""),
                pending_reason=verdict.get("pending_reason") or "",
            )
        )
    return rows


QUEUE_PAGE_SIZE = 100


def round_detail(vround: ValidationRound, *, page: str | int | None = None) -> dict:
    """A round's bookkeeping and one page of its queue with each candidate's validator and
    verdict, read from the journal events of that page's candidates only."""
    queue_page = Paginator(vround.queue, QUEUE_PAGE_SIZE).get_page(page)
    events = list(
        JournalEvent.objects.filter(
            round_id=vround.id,
            type__in=(EventType.VALIDATION_CANDIDATE_STARTED, EventType.VALIDATION_VERDICT),
            rule_id__in=list(queue_page.object_list),
        ).only("type", "rule_id", "evidence")
    )
    previous = (
        ValidationRound.objects.filter(id__lt=vround.id).order_by("-id").only("id", "queue").first()
    )
    return {
        "round": vround,
        "page": queue_page,
        "queue": queue_rows(list(queue_page.object_list), events, start=queue_page.start_index()),
        "previous": previous,
        "previous_first": previous.queue[0] if previous and previous.queue else None,
        "running": vround.status == RoundStatus.RUNNING,
    }


def round_progress(vround: ValidationRound) -> dict:
    """What a live page polls (semantics §18): candidates in the queue, verdicts written,
    candidates not reached yet, replays dispatched, and replays queued / running / done per
    candidate in flight — as of the round's latest write, refreshed at least every second
    while it waits on replays."""
    progress = vround.progress or {}
    return {
        "round": vround.pk,
        "running": vround.status == RoundStatus.RUNNING,
        "candidates": progress.get("candidates", len(vround.queue)),
        "written": progress.get("written", 0),
        "waiting": progress.get("waiting", len(vround.queue)),
        "replays": progress.get("replays", 0),
        "in_flight": progress.get("in_flight", {}),
    }


def last_rounds(*, limit: int = 5) -> list[ValidationRound]:
    return list(ValidationRound.objects.order_by("-id")[:limit])


def replay_case_evidence(*, limit: int = CHART_CASE_LIMIT) -> list[dict]:
    """The evidence of the latest `validation_replay_case` events (semantics §10)."""
    return list(
        JournalEvent.objects.filter(type=EventType.VALIDATION_REPLAY_CASE)
        .order_by("-at", "-id")
        .values_list("evidence", flat=True)[:limit]
    )


def verdict_counts(*, rounds: int = CHART_ROUND_LIMIT) -> list[tuple[int, str, int]]:
    """(round id, outcome, count) of the `validation_verdict` events of the latest rounds."""
    newest = JournalEvent.objects.filter(type=EventType.VALIDATION_VERDICT).aggregate(
        m=Max("round_id")
    )["m"]
    if newest is None:
        return []
    return list(
        JournalEvent.objects.filter(type=EventType.VALIDATION_VERDICT, round_id__gt=newest - rounds)
        .values_list("round_id", KT("evidence__outcome"))
        .annotate(n=Count("id"))
        .order_by("round_id")
    )


@dataclass
class PairedEvidence:
    """A rule's stored paired replays and the newest verdict that weighed them (semantics §17.5)."""

    samples: list[dict]
    verdict: dict | None  # the `validation_verdict` evidence; its replay's paired figures inside
    round_id: int | None
    lower_is_better: frozenset[str]


SAMPLE_FIELDS = (
    "case_id",
    "case__kind",
    "arm",
    "repeat",
    "round_id",
    "outcome",
    "metrics",
    "active_set",
    "rule_id",
)


def rule_samples(rule_id: str) -> list[dict]:
    """The paired samples a rule's verdicts use: its own rows, and the control replays of
    other candidates it shares (docs/semantics.md#s21-2) — per case and active set, as many
    as its treatment replays there, the first by repeat. Two queries; `rule_id` on a row
    says whose replay it was."""
    own = list(
        ReplaySample.objects.filter(rule_id=rule_id)
        .order_by("case_id", "active_set", "arm", "repeat")
        .values(*SAMPLE_FIELDS)
    )
    used: dict[tuple[str, str], int] = {}
    for s in own:
        if s["arm"] == "treatment":
            key = (s["case_id"], s["active_set"])
            used[key] = used.get(key, 0) + 1
    if not used:
        return own
    shared = (
        ReplaySample.objects.filter(
            arm="control",
            case_id__in=sorted({c for c, _ in used}),
            active_set__in=sorted({v for _, v in used}),
        )
        .exclude(rule_id=rule_id)
        .order_by("case_id", "active_set", "repeat")
        .values(*SAMPLE_FIELDS)
    )
    borrowed = [s for s in shared if s["repeat"] < used.get((s["case_id"], s["active_set"]), 0)]
    return sorted(
        own + borrowed, key=lambda s: (s["case_id"], s["active_set"], s["arm"], s["repeat"])
    )


def rule_paired_evidence(rule_id: str) -> PairedEvidence:
    """Four queries whatever the number of samples: the samples (with their case's kind, the
    rule's own and the controls it shares), the newest verdict carrying paired evidence, and
    the metrics' orientation."""
    samples = rule_samples(rule_id)
    event = (
        JournalEvent.objects.filter(
            rule_id=rule_id,
            type=EventType.VALIDATION_VERDICT,
            evidence__details__replay__has_key="paired",
        )
        .order_by("-at", "-id")
        .only("evidence", "round_id")
        .first()
    )
    return PairedEvidence(
        samples=samples,
        verdict=event.evidence if event else None,
        round_id=event.round_id if event else None,
        lower_is_better=lower_is_better(load_registry()) if samples else frozenset(),
    )


def active_set_changes(rule_id: str, *, scope: str) -> list[dict]:
    """The rules of `scope` promoted or retired between the start of the first round that
    replayed this rule and the start of the last: each moved the control arm's baseline for
    the replays that came after it (semantics §21.1). Three queries; at most ten changes,
    oldest first."""
    from django.db.models import Max, Min

    from lifecycle.models import Rule

    span = ReplaySample.objects.filter(rule_id=rule_id).aggregate(
        first=Min("round_id"), last=Max("round_id")
    )
    # The same three queries whatever the span (one round, several): a page's cost is flat.
    starts = dict(
        ValidationRound.objects.filter(pk__in=[span["first"], span["last"]]).values_list(
            "pk", "started_at"
        )
    )
    if span["first"] not in starts or span["last"] not in starts:
        return []
    changed = (
        Rule.objects.filter(
            scope=scope,
            decided_at__gt=starts[span["first"]],
            decided_at__lt=starts[span["last"]],
        )
        .exclude(pk=rule_id)
        .order_by("decided_at", "id")
        .values("id", "state", "decided_at")[:10]
    )
    return [{"rule": r["id"], "state": r["state"], "at": r["decided_at"]} for r in changed]


def scopes_read_on_cases(rule_id: str) -> list[dict]:
    """Other rules whose treatment replays of this rule's cases did read their candidate, with
    their scopes: where the replayed agent looks for rules on those tasks (semantics §5, §7.3).
    Two queries; at most ten rules."""
    cases = ReplaySample.objects.filter(rule_id=rule_id).values("case_id")
    rows = (
        ReplaySample.objects.filter(case_id__in=cases, arm="treatment", candidate_read=True)
        .exclude(rule_id=rule_id)
        .order_by("rule__scope", "rule_id")
        .values_list("rule_id", "rule__scope")
        .distinct()[:10]
    )
    return [{"rule": rule, "scope": scope} for rule, scope in rows]


CHART_VERDICT_LIMIT = 500


def paired_case_effects(*, limit: int = CHART_VERDICT_LIMIT) -> list[dict]:
    """Per rule, case and metric, treatment − control (oriented so that positive is better) as
    the rule's newest paired verdict weighed it (semantics §17.5): the replays' evidence when
    no replay has a recorded original to be compared with. One query over the newest `limit`
    paired verdicts, reading only their per-case figures."""
    rows = (
        JournalEvent.objects.filter(
            type=EventType.VALIDATION_VERDICT, evidence__details__replay__has_key="paired"
        )
        .order_by("-at", "-id")
        .values_list("rule_id", "evidence__details__replay__paired__cases")[:limit]
    )
    lower = lower_is_better(load_registry())
    seen, out = set(), []
    for rule_id, cases in rows:
        if rule_id in seen or not isinstance(cases, dict):
            continue
        seen.add(rule_id)
        for case_id, body in sorted(cases.items()):
            arms = body.get("arms") or {}
            treatment = (arms.get("treatment") or {}).get("metrics") or {}
            control = (arms.get("control") or {}).get("metrics") or {}
            for metric in sorted(set(treatment) & set(control)):
                effect = treatment[metric]["mean"] - control[metric]["mean"]
                out.append(
                    {
                        "rule": rule_id,
                        "case": case_id,
                        "kind": body.get("kind", ""),
                        "metric": metric,
                        "effect": round(-effect if metric in lower else effect, 6),
                    }
                )
    return out
