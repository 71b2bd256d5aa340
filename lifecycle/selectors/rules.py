"""Reads for the dashboard and the API. Every function here runs a fixed number of
queries whatever the data size: lists are filtered, counted and paginated in the database, and a
rule's page reads a bounded slice of its journal."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
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
RULE_SORT_LABELS = {
    "-recorded": "newest recorded",
    "recorded": "oldest recorded",
    "-decided": "latest decided",
    "decided": "earliest decided",
    "id": "id A→Z",
    "-id": "id Z→A",
    "state": "state A→Z",
    "-state": "state Z→A",
    "scope": "scope A→Z",
    "-scope": "scope Z→A",
    "-attempts": "most replay attempts",
    "attempts": "fewest replay attempts",
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
    """What the filter form offers: the scopes and metrics in use, and the closed sets."""
    return {
        "states": RuleState.values,
        "scopes": list(Rule.objects.order_by("scope").values_list("scope", flat=True).distinct()),
        "metrics": list(load_registry()),
        "validators": VALIDATORS,
        "pending_reasons": [(NOT_ATTEMPTED, "not yet attempted"), *PendingReason.choices],
        "sorts": list(RULE_SORT_LABELS.items()),
    }


# --- Overview ----------------------------------------------------------------------------------

LIFECYCLE_EVENT_TYPES = TRANSITION_TYPES


def state_counts() -> dict[str, int]:
    counts = dict(Rule.objects.values_list("state").annotate(n=Count("id")).order_by())
    return {state: counts.get(state, 0) for state in RuleState.values}


def pending_counts() -> list[tuple[str, str, int]]:
    """(reason, words, count) for every candidate, "not yet attempted" included."""
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
    labels = {
        NOT_ATTEMPTED: "not yet attempted",
        "": "no verdict yet",
        **dict(PendingReason.choices),
    }
    return [(reason, labels[reason], n) for reason, n in counts.most_common()]


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

_DECISION_WORDS = {
    "attributable": "attributable regression",
    "not_attributable": "not attributable",
    "improved": "improved",
    "within_margin": "within margin",
}


def signed(value: float) -> str:
    """A delta as people read it: explicit sign, typographic minus."""
    return f"{value:+.2f}".replace("-", "\u2212")


def attribution_words(entry: dict) -> str:
    """One attribution decision in words, e.g. "coherence −0.09: not attributable — not in
    retire_on" (semantics §7.7)."""
    decision = entry.get("decision", "")
    words = _DECISION_WORDS.get(decision, decision.replace("_", " "))
    why = entry.get("why") or ("not in retire_on" if decision == "not_attributable" else "")
    if why.lower().startswith(words):
        # The engine's reason often restates the decision ("improved past the promote margin").
        why = why[len(words) :].strip()
    delta = entry.get("delta")
    head = (
        f"{entry.get('metric', '?')} {signed(delta)}"
        if isinstance(delta, int | float)
        else entry.get("metric", "?")
    )
    return f"{head}: {words}" + (f" — {why}" if why else "")


def attribution_lines(entries: list[dict]) -> list[str]:
    """Each decision that mattered in words; the metrics that stayed within the margins are
    named together on one line, so the decisive ones stand out."""
    lines = [attribution_words(e) for e in entries if e.get("decision") != "within_margin"]
    quiet = [e.get("metric", "?") for e in entries if e.get("decision") == "within_margin"]
    if quiet:
        lines.append(f"within margin: {', '.join(quiet)}")
    return lines


def delta_class(delta, *, promote_margin: float, regress_margin: float) -> str:
    """Red at or past the regression margin, green at or past the promotion margin (semantics §7.7–8)."""
    if not isinstance(delta, int | float):
        return "delta-flat"
    if delta <= -regress_margin:
        return "delta-bad"
    if delta >= promote_margin:
        return "delta-good"
    return "delta-flat"


@dataclass
class CaseRow:
    """One row of a round's per-case delta table."""

    case: str
    kind: str
    outcome: str
    candidate_read: bool | None
    replay_session: str
    metrics: list[dict]
    deciding_metric: str | None
    attribution: list[str]
    regressed: bool
    improved: bool
    error: str | None


@dataclass
class ReplayRound:
    round_id: int | None
    at: datetime
    cases: list[CaseRow] = field(default_factory=list)
    verdict: dict | None = None
    retire_on: list[str] = field(default_factory=list)


def case_row(evidence: dict, *, promote_margin: float, regress_margin: float) -> CaseRow:
    metrics = []
    for name, values in sorted((evidence.get("metrics") or {}).items()):
        if not isinstance(values, dict):
            # A paired replay (semantics §17.5) keeps its metrics as measured, with no original.
            values = {"replayed": values}
        delta = values.get("delta")
        metrics.append(
            {
                "name": name,
                "original": values.get("original"),
                "replayed": values.get("replayed"),
                "delta": delta,
                "delta_text": signed(delta) if isinstance(delta, int | float) else "",
                "css": delta_class(
                    delta, promote_margin=promote_margin, regress_margin=regress_margin
                ),
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
        attribution=attribution_lines(evidence.get("attribution") or []),
        regressed=bool(evidence.get("regressed")),
        improved=bool(evidence.get("improved")),
        error=evidence.get("error"),
    )


def replay_rounds(
    events: list[JournalEvent], *, promote_margin: float, regress_margin: float
) -> list[ReplayRound]:
    """Group a rule's `validation_replay_case` events by round, oldest first, each with the
    round's `validation_verdict` for the rule."""
    rounds: dict[int | None, ReplayRound] = {}
    for event in events:
        if event.type == EventType.VALIDATION_REPLAY_CASE:
            entry = rounds.setdefault(event.round_id, ReplayRound(event.round_id, event.at))
            entry.cases.append(
                case_row(
                    event.evidence, promote_margin=promote_margin, regress_margin=regress_margin
                )
            )
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


def extraction_parts(extraction: dict | None) -> list[tuple[dict, str]]:
    """Trigger and directive rows of the extraction diff (semantics §12): expected, extracted, the
    word diff and that part's scores."""
    if not extraction:
        return []
    return [
        (
            {
                "expected": (extraction.get("expected") or {}).get(part, ""),
                "extracted": (extraction.get("extracted") or {}).get(part, ""),
                **(extraction.get(part) or {}),
            },
            part.capitalize(),
        )
        for part in ("trigger", "directive")
    ]


def gate_columns(gate: dict) -> list[dict]:
    """The lexical and signature gates side by side (semantics §11), each with the trajectories it
    fired on, so a success the lexical matcher breaks is visible next to the signature result."""
    columns = []
    for matcher in ("lexical", "signature"):
        report = gate.get(matcher) or {}
        fired = report.get("fired") or {}
        columns.append(
            {
                **report,
                "matcher": matcher,
                "fired_lists": [
                    ("Fired on failures (prevented)", fired.get("prevented", [])),
                    ("Fired on successes (broken)", fired.get("broken", [])),
                    ("Fired on near misses", fired.get("near_misses", [])),
                ],
            }
        )
    return columns


# A rule page shows the newest slice of a rule's history, so its cost stays flat however long
# the rule has been pending; the journal page holds the rest.
TIMELINE_LIMIT = 50


def rule_events(rule: Rule, *, limit: int = TIMELINE_LIMIT) -> tuple[list[JournalEvent], bool]:
    """The rule's newest `limit` journal events, oldest first (semantics §10), and whether older
    ones exist."""
    newest = list(JournalEvent.objects.filter(rule=rule).order_by("-at", "-id")[: limit + 1])
    return newest[:limit][::-1], len(newest) > limit


def replay_case_limit() -> int:
    """The most cases the engine replays for one rule in its life (semantics §7.1, §7.2, §7.10):
    the rule page shows them all in normal operation, and no more than that otherwise."""
    per_round = settings.CAUTERWEB_MAX_FAILING_CASES + settings.CAUTERWEB_MAX_PROTECTED_WINS
    return per_round * settings.CAUTERWEB_MAX_REPLAY_ATTEMPTS


def rule_replay_events(rule: Rule) -> list[JournalEvent]:
    """The rule's newest replay cases (at most `replay_case_limit()`) and the verdicts of the
    rounds they belong to."""
    cases = list(
        JournalEvent.objects.filter(rule=rule, type=EventType.VALIDATION_REPLAY_CASE).order_by(
            "-at", "-id"
        )[: replay_case_limit()]
    )
    rounds = {e.round_id for e in cases if e.round_id is not None}
    verdicts = JournalEvent.objects.filter(
        rule=rule, type=EventType.VALIDATION_VERDICT, round_id__in=rounds
    ).order_by("at", "id")
    return [*cases[::-1], *(verdicts if rounds else [])]


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


def rule_detail(rule: Rule) -> dict:
    """Everything the rule page shows. The corpus gate (semantics §11) and the extraction diff
    (semantics §12) come from their own modules and are kept apart from replay evidence."""
    # Imported here, not at start-up: the extraction module also holds the comparator's
    # scoring, and the rule-list API that shares this module needs neither. The page reads the
    # stored extraction scores; the comparator does not run here.
    from .extraction import extraction_for_rule
    from .gate import gate_both

    events, older_events = rule_events(rule)
    promote_margin = settings.CAUTERWEB_RULE_PROMOTE_MARGIN
    regress_margin = settings.CAUTERWEB_RULE_REGRESS_MARGIN
    decided_by = rule_decision_event(rule)
    extraction = extraction_report(extraction_for_rule(rule))
    related = Rule.objects.filter(
        Q(replaces=rule) | Q(pk__in=[rule.replaces_id, rule.duplicate_of_id])
    )
    return {
        "rule": rule,
        "events": events,
        "older_events": older_events,
        "decided_by": decided_by,
        "replay_rounds": replay_rounds(
            rule_replay_events(rule), promote_margin=promote_margin, regress_margin=regress_margin
        ),
        "trial": trial_panel(rule, decided_by),
        "source_case": Trajectory.objects.filter(pk=rule.source_case)
        .only("id", "kind", "task")
        .first()
        if rule.source_case
        else None,
        "versions": list(related.only("id", "state", "replaces_id")),
        "gate_columns": gate_columns(gate_both(rule)),
        "extraction": extraction,
        "extraction_parts": extraction_parts(extraction),
        "promote_margin": promote_margin,
        "regress_margin": regress_margin,
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
