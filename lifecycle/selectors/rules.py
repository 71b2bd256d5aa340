"""Reads for the dashboard and the API. Every function here runs a fixed number of
queries whatever the data size: lists are filtered, counted and paginated in the database, and a
rule's page reads a bounded slice of its journal."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.paginator import Page, Paginator
from django.db.models import Count, Exists, Min, OuterRef, Q, QuerySet
from django.db.models.functions import Trunc
from django.utils import timezone

from .. import cursor
from ..journal import DECISION_TYPES, TRANSITION_TYPES, EventType
from ..metrics import load_registry
from ..models import (
    Exposure,
    JournalEvent,
    PendingReason,
    Rule,
    RuleState,
    Trajectory,
    TrialArm,
    TrialEnrolment,
)
from ..scopes import rule_as_dict
from ..validation import FilterError, InvalidRule, check_metric
from .journal import JournalPage, journal_page

# The rule-list filter vocabulary. Every key is optional; an empty value means "any".
#   state            candidate | active | retired
#   scope            a scope name, exact (e.g. "git", "repo:payments")
#   validator        replay | forward_trial (the validator of the rule's last attempt) | none
#   pending_reason   one of semantics §10's pending reasons, or not_attempted
#   metric           a registered metric name or alias; matches the whole family (semantics §1)
#   has_ground_truth yes | no: the rule's source case carries an expected_rule (semantics §12)
#   q                words searched in id, trigger and directive (case-insensitive)
#   sort             one of RULE_SORTS, "-" prefix for descending; default -recorded
RULE_FILTER_KEYS = (
    "state",
    "scope",
    "validator",
    "pending_reason",
    "metric",
    "has_ground_truth",
    "q",
    "sort",
)
RULE_SORTS = {
    "id": ("id",),
    "recorded": ("recorded_at", "id"),
    "decided": ("decided_at", "id"),
    "state": ("state", "id"),
    "scope": ("scope", "id"),
    "attempts": ("replay_attempts", "id"),
}
DEFAULT_RULE_SORT = "-recorded"
NOT_ATTEMPTED = "not_attempted"
VALIDATORS = ("replay", "forward_trial")
_YES = {"yes", "true", "1"}
_NO = {"no", "false", "0"}
MAX_QUERY_LENGTH = 200


def _check_choice(filters: dict, key: str, allowed) -> None:
    value = filters[key]
    if value and value not in allowed:
        raise FilterError(
            f"{key} must be one of {', '.join(sorted(allowed))} (got {value!r})", field=key
        )


def _order_by(sort: str) -> list[str]:
    name = sort.removeprefix("-")
    if name not in RULE_SORTS:
        allowed = ", ".join(sorted(RULE_SORTS))
        raise FilterError(
            f"sort must be one of {allowed}, optionally with '-' (got {sort!r})", field="sort"
        )
    columns = RULE_SORTS[name]
    if sort.startswith("-"):
        return [f"-{c}" for c in columns]
    return list(columns)


# What the rules table shows: a page reads these columns only, not every rule's JSON fields.
RULE_TABLE_FIELDS = (
    "id",
    "state",
    "scope",
    "metric",
    "trigger",
    "directive",
    "pending_reason",
    "first_attempted_at",
    "verdict_reason",
    "last_validator",
    "replay_attempts",
    "recorded_at",
)


def clean_rule_filters(filters: dict) -> dict:
    """The filters a caller gave, stripped and checked; unknown keys are ignored (a page URL
    also carries `page`). Raises FilterError naming the first bad value."""
    cleaned = {key: (filters.get(key) or "").strip() for key in RULE_FILTER_KEYS}
    _check_choice(cleaned, "state", set(RuleState.values))
    _check_choice(cleaned, "validator", {*VALIDATORS, "none"})
    _check_choice(cleaned, "pending_reason", {*PendingReason.values, NOT_ATTEMPTED})
    _check_choice(cleaned, "has_ground_truth", _YES | _NO)
    if len(cleaned["q"]) > MAX_QUERY_LENGTH:
        raise FilterError(f"q is longer than {MAX_QUERY_LENGTH} characters", field="q")
    _order_by(cleaned["sort"] or DEFAULT_RULE_SORT)
    return cleaned


def _has_ground_truth():
    return Exists(
        Trajectory.objects.filter(pk=OuterRef("source_case"), expected_rule__isnull=False)
    )


def rule_list(*, filters: dict) -> QuerySet[Rule]:
    """Rules matching `filters` (vocabulary above), sorted, each annotated with
    `has_ground_truth`. Raises FilterError for a value outside the vocabulary."""
    f = clean_rule_filters(filters)
    rules = Rule.objects.annotate(has_ground_truth=_has_ground_truth())
    if f["state"]:
        rules = rules.filter(state=f["state"])
    if f["scope"]:
        rules = rules.filter(scope=f["scope"])
    if f["validator"] == "none":
        rules = rules.filter(last_validator="")
    elif f["validator"]:
        rules = rules.filter(last_validator=f["validator"])
    if f["pending_reason"] == NOT_ATTEMPTED:
        rules = rules.filter(
            state=RuleState.CANDIDATE, pending_reason="", first_attempted_at__isnull=True
        )
    elif f["pending_reason"]:
        rules = rules.filter(state=RuleState.CANDIDATE, pending_reason=f["pending_reason"])
    if f["metric"]:
        registry = load_registry()
        try:
            check_metric(f["metric"], registry)
        except InvalidRule as exc:
            raise FilterError(str(exc), field="metric") from None
        rules = rules.filter(metric__in=registry.family(f["metric"]))
    if f["has_ground_truth"]:
        rules = rules.filter(has_ground_truth=f["has_ground_truth"] in _YES)
    for word in f["q"].split():
        rules = rules.filter(
            Q(id__icontains=word) | Q(trigger__icontains=word) | Q(directive__icontains=word)
        )
    return rules.order_by(*_order_by(f["sort"] or DEFAULT_RULE_SORT))


def replay_counts(rule_ids: list[str]) -> dict[str, int]:
    """How many replays the engine ran for each of these rules, whatever the design (their
    `validation_replay_case` events, semantics §10): one query for a page of rules, on the
    journal's (rule, at) index. A count in the page's own query would be computed for every
    row an OFFSET skips, too (2 s at page 40 of 10,000 rules)."""
    rows = (
        JournalEvent.objects.filter(rule_id__in=rule_ids, type=EventType.VALIDATION_REPLAY_CASE)
        .values_list("rule_id")
        .annotate(n=Count("id"))
        .order_by()
    )
    return dict(rows)


class RuleNotFound(Exception):
    """No rule has this id (the API answers 404)."""


def rule_get(rule_id: str) -> Rule:
    """The rule with this id; raises RuleNotFound."""
    rule = Rule.objects.filter(pk=rule_id).first()
    if rule is None:
        raise RuleNotFound(rule_id)
    return rule


def rules_page(
    *, filters: dict, order: str, position: str | None, limit: int
) -> tuple[list[Rule], str | None]:
    """(rules, next cursor) of the rules list, keyset-paged on (recorded_at, id); `order` is
    `recorded` or `-recorded`. Raises FilterError or InvalidCursor."""
    rules = rule_list(filters={**filters, "sort": order})
    if position:
        rules = cursor.after(
            rules,
            fields=("recorded_at", "id"),
            position=cursor.decode_cursor(position, (datetime, str)),
            descending=order.startswith("-"),
        )
    return cursor.page(list(rules[: limit + 1]), limit, lambda r: (r.recorded_at, r.id))


def rule_filter_choices() -> dict:
    """What the filter form offers: the scopes and metrics in use, and the closed sets (the
    dashboard words them)."""
    return {
        "states": RuleState.values,
        "scopes": list(Rule.objects.order_by("scope").values_list("scope", flat=True).distinct()),
        "metrics": list(load_registry()),
        "validators": VALIDATORS,
    }


# --- Overview ----------------------------------------------------------------------------------

LIFECYCLE_EVENT_TYPES = TRANSITION_TYPES


def state_counts() -> dict[str, int]:
    counts = dict(Rule.objects.values_list("state").annotate(n=Count("id")).order_by())
    return {state: counts.get(state, 0) for state in RuleState.values}


def pending_counts() -> list[tuple[str, int]]:
    """(reason, count) for every candidate, most first: a semantics §10 pending reason,
    NOT_ATTEMPTED for a candidate never attempted, or "" for one attempted with no reason
    ("no verdict yet")."""
    rows = (
        Rule.objects.filter(state=RuleState.CANDIDATE)
        .annotate(attempted=Q(first_attempted_at__isnull=False))
        .values_list("pending_reason", "attempted")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts: Counter = Counter()
    for reason, attempted, n in rows:
        counts[reason or ("" if attempted else NOT_ATTEMPTED)] += n
    return counts.most_common()


def latest_transitions(*, limit: int = 10) -> list[JournalEvent]:
    return list(
        JournalEvent.objects.filter(type__in=LIFECYCLE_EVENT_TYPES).order_by("-at", "-id")[:limit]
    )


BUCKETS = (
    ("second", timedelta(seconds=1)),
    ("minute", timedelta(minutes=1)),
    ("hour", timedelta(hours=1)),
    ("day", timedelta(days=1)),
    ("week", timedelta(weeks=1)),
)


def bucket_for(span: timedelta) -> tuple[str, timedelta]:
    """The bucket (a `Trunc` kind and its size) that gives at most ~200 points for a history
    of this span."""
    for kind, size in BUCKETS[:-1]:
        if span <= size * 200:
            return kind, size
    return BUCKETS[-1]


def truncate(at: datetime, kind: str) -> datetime:
    """`at` truncated like the database's `Trunc(kind)` in the current time zone."""
    at = timezone.localtime(at).replace(microsecond=0)
    if kind != "second":
        at = at.replace(second=0)
    if kind in ("hour", "day", "week"):
        at = at.replace(minute=0)
    if kind in ("day", "week"):
        at = at.replace(hour=0)
    if kind == "week":
        at -= timedelta(days=at.weekday())
    return at


def funnel_counts(*, now: datetime) -> dict | None:
    """Rules recorded and decided per time bucket, counted in the database (three queries
    whatever the number of rules), for the lifecycle funnel; None with no rules."""
    first = Rule.objects.aggregate(first=Min("recorded_at"))["first"]
    if first is None:
        return None
    kind, size = bucket_for(now - first)
    recorded = (
        Rule.objects.annotate(bucket=Trunc("recorded_at", kind))
        .values_list("bucket")
        .annotate(n=Count("id"))
        .order_by()
    )
    decided = (
        Rule.objects.filter(decided_at__isnull=False)
        .annotate(bucket=Trunc("decided_at", kind))
        .values_list("bucket", "state")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {
        "recorded": list(recorded),
        "decided": list(decided),
        "start": truncate(first, kind),
        "size": size,
    }


# --- Rule detail -------------------------------------------------------------------------------
# Data only: the dashboard words and colours it (dashboard/presenters.py), the API shapes it.


@dataclass
class CaseRow:
    """One replayed case as the journal recorded it (semantics §10 `validation_replay_case`):
    its metrics as measured and its attribution decisions as decided."""

    case: str
    kind: str
    outcome: str
    candidate_read: bool | None
    replay_session: str
    # {name, original, replayed, delta, deciding}, by name; a paired replay (semantics §17.5)
    # keeps its metrics as measured, with no original and no delta.
    metrics: list[dict]
    deciding_metric: str | None
    attribution: list[dict]
    regressed: bool
    improved: bool
    error: str | None
    arm: str = ""
    repeat: int | None = None


@dataclass
class ReplayRound:
    round_id: int | None
    at: datetime
    cases: list[CaseRow] = field(default_factory=list)
    verdict: dict | None = None
    retire_on: list[str] = field(default_factory=list)


def case_row(evidence: dict) -> CaseRow:
    metrics = []
    for name, values in sorted((evidence.get("metrics") or {}).items()):
        if not isinstance(values, dict):
            values = {"replayed": values}
        metrics.append(
            {
                "name": name,
                "original": values.get("original"),
                "replayed": values.get("replayed"),
                "delta": values.get("delta"),
                "deciding": name == evidence.get("deciding_metric"),
            }
        )
    return CaseRow(
        case=evidence.get("case", ""),
        kind=evidence.get("kind", ""),
        outcome=evidence.get("outcome", ""),
        candidate_read=evidence.get("candidate_read"),
        replay_session=evidence.get("replay_session") or "",
        metrics=metrics,
        deciding_metric=evidence.get("deciding_metric"),
        attribution=list(evidence.get("attribution") or []),
        regressed=bool(evidence.get("regressed")),
        improved=bool(evidence.get("improved")),
        error=evidence.get("error"),
        arm=evidence.get("arm") or "",
        repeat=evidence.get("repeat"),
    )


def replay_rounds(events: list[JournalEvent]) -> list[ReplayRound]:
    """Group a rule's `validation_replay_case` events by round, in the order given, each with
    the round's `validation_verdict` for the rule."""
    rounds: dict[int | None, ReplayRound] = {}
    for event in events:
        if event.type == EventType.VALIDATION_REPLAY_CASE:
            entry = rounds.setdefault(event.round_id, ReplayRound(event.round_id, event.at))
            entry.cases.append(case_row(event.evidence))
            entry.retire_on = event.evidence.get("retire_on") or entry.retire_on
    for event in events:
        if event.type == EventType.VALIDATION_VERDICT and event.round_id in rounds:
            rounds[event.round_id].verdict = event.evidence
    return list(rounds.values())


@dataclass
class TrialPanel:
    enrolled: int
    breached: int
    read_candidate: int
    needed: int
    baseline_rate: float
    baseline_sessions: int
    trial_rate: float | None
    # The trial figures of the verdict that decided the rule, when a forward trial did.
    verdict: dict | None


def trial_panel(rule: Rule, decided_by: JournalEvent | None) -> TrialPanel:
    totals = TrialEnrolment.objects.filter(rule=rule).aggregate(
        enrolled=Count("id"),
        breached=Count("id", filter=Q(breached=True)),
        read=Count("id", filter=Q(read_candidate=True)),
    )
    enrolled = totals["enrolled"]
    verdict = None
    if decided_by is not None and decided_by.evidence.get("trial"):
        verdict = decided_by.evidence["trial"]
    return TrialPanel(
        enrolled=enrolled,
        breached=totals["breached"],
        read_candidate=totals["read"],
        needed=settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS,
        baseline_rate=rule.baseline_rate,
        baseline_sessions=rule.baseline_sessions,
        trial_rate=totals["breached"] / enrolled if enrolled else None,
        verdict=verdict,
    )


# The components of an extraction score as the page and the API label them, in this order.
EXTRACTION_COMPONENTS = (
    ("semantic", "semantic similarity"),
    ("signature_agreement", "signature agreement"),
    ("token_f1", "token-F1"),
)


def extraction_report(stored: dict | None) -> dict | None:
    """A rule's stored comparison as the page and the API show it (semantics §12): led by the
    `score` (the probability of "same rule") and the `verdict` read from it, then `why`; the
    semantic similarity, signature agreement and token-F1 follow as labelled components, each
    with its one-line meaning. None when the rule has no stored comparison."""
    if not stored:
        return None
    # The comparator's own meanings. A comparison stored by the earlier, hand-weighted
    # comparator carries none, and its score was no probability: `calibrated` says so.
    from comparison.compare import COMPONENTS

    stored_meanings = stored.get("components")
    calibrated = isinstance(stored_meanings, dict)
    meanings = {**COMPONENTS, **(stored_meanings if calibrated else {})}
    return {
        "score": stored.get("score"),
        "verdict": stored.get("verdict"),
        "why": stored.get("why", ""),
        "score_meaning": meanings["score"],
        "calibrated": calibrated,
        "components": {
            name: {"label": label, "value": stored.get(name), "meaning": meanings[name]}
            for name, label in EXTRACTION_COMPONENTS
        },
        "conflicts": stored.get("conflicts", []),
        "doubts": stored.get("doubts", []),
        "source_case": stored.get("source_case"),
        "expected": stored.get("expected"),
        "extracted": stored.get("extracted"),
        "trigger": stored.get("trigger"),
        "directive": stored.get("directive"),
    }


def extraction_parts(extraction: dict | None) -> list[dict]:
    """Trigger and directive rows of the extraction diff (semantics §12): the part, expected,
    extracted, the word diff and that part's scores."""
    if not extraction:
        return []
    return [
        {
            "part": part,
            "expected": (extraction.get("expected") or {}).get(part, ""),
            "extracted": (extraction.get("extracted") or {}).get(part, ""),
            **(extraction.get(part) or {}),
        }
        for part in ("trigger", "directive")
    ]


# A rule page shows the newest slice of a rule's history, so its cost stays flat however long
# the rule has been pending; the journal page holds the rest.
TIMELINE_LIMIT = 50
REPLAYS_PER_PAGE = 20


def rule_events(rule: Rule, *, limit: int = TIMELINE_LIMIT) -> tuple[list[JournalEvent], bool]:
    """The rule's newest `limit` journal events, oldest first (semantics §10), and whether older
    ones exist."""
    newest = list(JournalEvent.objects.filter(rule=rule).order_by("-at", "-id")[: limit + 1])
    return newest[:limit][::-1], len(newest) > limit


def rule_replay_page(rule: Rule, *, page: str | int | None) -> tuple[Page, list[ReplayRound]]:
    """One page of the rule's replays, newest first, grouped by round, each round with its
    verdict for the rule (semantics §10): three queries whatever the number of replays."""
    cases = JournalEvent.objects.filter(rule=rule, type=EventType.VALIDATION_REPLAY_CASE)
    paged = Paginator(cases.order_by("-at", "-id"), REPLAYS_PER_PAGE).get_page(page)
    events = list(paged.object_list)
    rounds = {e.round_id for e in events if e.round_id is not None}
    verdicts = (
        JournalEvent.objects.filter(
            rule=rule, type=EventType.VALIDATION_VERDICT, round_id__in=rounds
        ).order_by("at", "id")
        if rounds
        else []
    )
    return paged, replay_rounds([*events, *verdicts])


def rule_timeline_page(rule: Rule, *, before: str = "", after: str = "") -> JournalPage:
    """One page of the rule's journal, newest first, paged by keyset like the journal page
    (semantics §10). Raises FilterError for a position that is not one."""
    events = JournalEvent.objects.filter(rule=rule)
    return journal_page(events, before=before, after=after, size=TIMELINE_LIMIT)


def rule_decision_event(rule: Rule) -> JournalEvent | None:
    """The event that took the rule out of `candidate`: its promotion or retirement, by the
    engine or by a reviewer (semantics §10). None for a candidate."""
    if rule.state == RuleState.CANDIDATE:
        return None
    return (
        JournalEvent.objects.filter(rule=rule, type__in=DECISION_TYPES)
        .order_by("-at", "-id")
        .first()
    )


def rule_latest_verdict(rule: Rule) -> JournalEvent | None:
    """The newest `validation_verdict` of the rule (semantics §10): what the engine last said
    of a candidate, pending or not."""
    return (
        JournalEvent.objects.filter(rule=rule, type=EventType.VALIDATION_VERDICT)
        .order_by("-at", "-id")
        .only("evidence", "round_id", "at")
        .first()
    )


def rule_replay_counts(rule: Rule) -> dict[str, int]:
    """Replays run for the rule, and how many of them scored (semantics §7.5): one query."""
    return JournalEvent.objects.filter(rule=rule, type=EventType.VALIDATION_REPLAY_CASE).aggregate(
        replays=Count("id"),
        scored=Count("id", filter=Q(evidence__outcome="scored")),
    )


def rule_detail(rule: Rule) -> dict:
    """What the rule page shows above its folds (the replays and the timeline are read by
    their own fragments). The corpus gate (semantics §11) and the extraction diff
    (semantics §12) come from their own modules and are kept apart from replay evidence."""
    # Imported here, not at start-up: the extraction module also holds the comparator's
    # scoring, and the rule-list API that shares this module needs neither. The page reads the
    # stored extraction scores; the comparator does not run here.
    from .extraction import extraction_for_rule
    from .gate import gate_both

    decided_by = rule_decision_event(rule)
    extraction = extraction_report(extraction_for_rule(rule))
    related = Rule.objects.filter(
        Q(replaces=rule) | Q(pk__in=[rule.replaces_id, rule.duplicate_of_id])
    )
    return {
        "rule": rule,
        "decided_by": decided_by,
        "latest_verdict": rule_latest_verdict(rule) if rule.is_candidate else None,
        "counts": rule_replay_counts(rule),
        "trial": trial_panel(rule, decided_by),
        "source_case": Trajectory.objects.filter(pk=rule.source_case)
        .only("id", "kind", "task")
        .first()
        if rule.source_case
        else None,
        "versions": list(related.only("id", "state", "replaces_id", "duplicate_of_id")),
        "gate": gate_both(rule),
        "extraction": extraction,
        "extraction_parts": extraction_parts(extraction),
        "promote_margin": settings.CAUTERWEB_RULE_PROMOTE_MARGIN,
        "regress_margin": settings.CAUTERWEB_RULE_REGRESS_MARGIN,
        "max_replay_attempts": settings.CAUTERWEB_MAX_REPLAY_ATTEMPTS,
    }


def rule_evidence(rule: Rule) -> dict:
    """What the API shows beside a rule: its trial, the event that decided it, and its newest
    journal events (`older_events` says whether there are more)."""
    events, older_events = rule_events(rule)
    decided_by = rule_decision_event(rule)
    return {
        "trial": trial_panel(rule, decided_by),
        "decided_by": decided_by,
        "events": events,
        "older_events": older_events,
    }


def exposure_arms(rule: Rule) -> dict:
    """The randomized trial's arms (semantics §20): per arm the exposed sessions with an outcome,
    how many breached, and those exposed with no report yet; one grouped query."""
    arms = {arm: {"sessions": 0, "breached": 0, "unreported": 0} for arm in TrialArm.values}
    reported = Q(reported_at__isnull=False)
    for arm, n, b, waiting in (
        Exposure.objects.filter(rule=rule)
        .values("arm")
        .annotate(
            n=Count("id", filter=reported),
            b=Count("id", filter=reported & Q(breached=True)),
            w=Count("id", filter=Q(reported_at__isnull=True)),
        )
        .values_list("arm", "n", "b", "w")
    ):
        arms[arm] = {"sessions": n, "breached": b, "unreported": waiting}
    return arms


def rule_status(rule_id: str) -> dict | None:
    """What `show_rule` shows (semantics §15): the rule, its pending reason, its trial so far,
    its replay attempts and its latest evidence event; None when there is no such rule."""
    rule = Rule.objects.filter(pk=rule_id).first()
    if rule is None:
        return None
    trial = TrialEnrolment.objects.filter(rule=rule).aggregate(
        enrolled=Count("id"),
        breached=Count("id", filter=Q(breached=True)),
        read_candidate=Count("id", filter=Q(read_candidate=True)),
    )
    latest = (
        JournalEvent.objects.filter(
            rule=rule, type__in=(*DECISION_TYPES, EventType.VALIDATION_VERDICT)
        )
        .order_by("-at", "-id")
        .first()
    )
    return {
        **rule_as_dict(rule),
        "pending_reason": rule.pending_reason or None,
        "pending_text": rule.pending_text or None,
        "replay_attempts": rule.replay_attempts,
        "validator": rule.last_validator or None,
        "reason": rule.verdict_reason,
        "trial": {"baseline_rate": rule.baseline_rate, **trial, "arms": exposure_arms(rule)},
        "latest_evidence": None
        if latest is None
        else {
            "type": latest.type,
            "at": latest.at.isoformat(),
            "round": latest.round_id,
            "evidence": latest.evidence,
        },
    }
