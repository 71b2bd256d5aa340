"""Forward-trial enrolment (semantics §8): what report intake writes follows the rule, written
below as a plain function over plain data, on generated report sequences; and a report costs
the same statements however many candidates are in force."""

import random
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle.atoms import family_notice_atoms
from lifecycle.metrics import load_registry
from lifecycle.models import MetricDefinition, Rule, TrialEnrolment
from lifecycle.services.reports import reports_ingest
from lifecycle.validation import numbered

from ..builders import T0, report

pytestmark = pytest.mark.django_db

METRICS = ["task_completion", "coherence", "tool_correctness", "completion", ""]
NOTICES = [
    "breach:task_completion",
    "stall:coherence",
    "regression:tool_correctness",
    "breach:completion",  # an alias of task_completion
    "breach:plan_quality",
]
SESSIONS = [f"s{n}" for n in range(7)]


def enrol_report(
    enrolments: dict, *, candidates: dict, session_id: str, notices, rules_read, min_sessions: int
) -> dict:
    """The enrolment rule of semantics §8 for one report, over plain data: the oracle.

    `enrolments` maps (rule id, session id) to (breached, read the candidate); `candidates`
    maps each candidate in force to its metric family (empty for a rule with no metric).
    Every report, healthy or not, enrols its session in each candidate's trial while fewer
    than `min_sessions` distinct sessions are enrolled, recording whether it showed the target
    condition (a notice on the family; any notice for a rule with no metric); a session
    already enrolled can still flip to breached, or to having read the candidate."""
    notices, read = set(notices), set(rules_read)
    enrolled = Counter(rule_id for rule_id, _ in enrolments)
    out = dict(enrolments)
    for rule_id, family in candidates.items():
        shows = bool(family_notice_atoms(family) & notices) if family else bool(notices)
        key = (rule_id, session_id)
        if key in out:
            breached, was_read = out[key]
            out[key] = (breached or shows, was_read or rule_id in read)
        elif enrolled[rule_id] < min_sessions:
            out[key] = (shows, rule_id in read)
    return out


def make_rules(ids: list[str], *, metrics: list[str]) -> None:
    Rule.objects.bulk_create(
        Rule(
            id=rule_id,
            trigger=f"when {rule_id} happens",
            directive=f"do {rule_id}",
            metric=metric,
            author="test",
            author_kind="agent",
            content_hash=rule_id,
            recorded_at=T0,
        )
        for rule_id, metric in zip(ids, metrics, strict=True)
    )


def stored() -> dict:
    return {
        (e.rule_id, e.session_id): (e.breached, e.read_candidate)
        for e in TrialEnrolment.objects.all()
    }


class Script:
    """A random life of a few candidates: recorded, reported on in batches, decided."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.rules: list[str] = []
        self.in_force: dict[str, str] = {}  # rule id → metric
        self.clock = T0

    def record(self) -> None:
        new = [f"R-{len(self.rules) + n}" for n in range(self.rng.randint(1, 3))]
        metrics = [self.rng.choice(METRICS) for _ in new]
        make_rules(new, metrics=metrics)
        self.rules += new
        self.in_force.update(zip(new, metrics, strict=True))

    def decide(self) -> None:
        rule_id = self.rng.choice(sorted(self.in_force))
        Rule.objects.filter(pk=rule_id).update(state=self.rng.choice(["active", "retired"]))
        del self.in_force[rule_id]

    def batch(self) -> list[dict]:
        lines = []
        for _ in range(self.rng.randint(1, 4)):
            self.clock += timedelta(minutes=self.rng.randint(1, 30))
            lines.append(
                report(
                    self.rng.choice(SESSIONS),
                    self.clock,
                    notices=self.rng.sample(NOTICES, self.rng.choice([0, 0, 1, 2])),
                    rules_read=self.rng.sample(self.rules, min(len(self.rules), 1))
                    if self.rng.random() < 0.3
                    else [],
                )
            )
        # Sent out of time order: the batch is taken in by time all the same.
        self.rng.shuffle(lines)
        return lines


@pytest.mark.parametrize("seed", range(16))
def test_enrolment_in_the_database_follows_the_rule_on_generated_reports(seed, settings):
    MetricDefinition.objects.filter(name="task_completion").update(aliases=["completion"])
    registry = load_registry()
    script = Script(seed)
    min_sessions = script.rng.randint(1, 4)
    settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS = min_sessions
    expected: dict = {}
    for _ in range(30):
        move = script.rng.random()
        if move < 0.2 or not script.in_force:
            script.record()
            continue
        if move < 0.3:
            script.decide()
            continue
        lines = script.batch()
        reports_ingest(numbered(lines), now=script.clock)
        families = {r: registry.family(m) for r, m in script.in_force.items()}
        for line in sorted(lines, key=lambda r: r["at"]):
            expected = enrol_report(
                expected,
                candidates=families,
                session_id=line["session_id"],
                notices=line["notices"],
                rules_read=line["rules_read"],
                min_sessions=min_sessions,
            )
        assert stored() == expected
    counts = {r: 0 for r in script.rules}
    for rule_id, _ in expected:
        counts[rule_id] += 1
    assert dict(Rule.objects.values_list("id", "trial_sessions")) == counts


def test_the_pure_rule_enrols_every_report_until_the_trial_is_full():
    candidates = {"R-TC": frozenset({"task_completion"}), "R-ANY": frozenset()}
    state: dict = {}
    for session, notices in [("s1", []), ("s2", ["stall:coherence"]), ("s3", [])]:
        state = enrol_report(
            state,
            candidates=candidates,
            session_id=session,
            notices=notices,
            rules_read=[],
            min_sessions=2,
        )
    assert state == {
        ("R-TC", "s1"): (False, False),
        ("R-TC", "s2"): (False, False),
        ("R-ANY", "s1"): (False, False),
        ("R-ANY", "s2"): (True, False),
    }
    # A full trial still flips a session it enrolled, and only for the target condition.
    state = enrol_report(
        state,
        candidates=candidates,
        session_id="s1",
        notices=["breach:task_completion"],
        rules_read=["R-TC"],
        min_sessions=2,
    )
    assert state[("R-TC", "s1")] == (True, True)
    assert state[("R-ANY", "s1")] == (True, False)


def full_trials(ids: list[str], sessions: int) -> None:
    TrialEnrolment.objects.bulk_create(
        TrialEnrolment(rule_id=rule_id, session_id=f"old-{n}", enrolled_at=T0, updated_at=T0)
        for rule_id in ids
        for n in range(sessions)
    )


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("notices", [[], ["breach:task_completion"]])
def test_a_batch_takes_the_same_statements_with_100_or_2000_candidates(settings, notices, batch):
    # A batch of one report (one statement on PostgreSQL) and a larger one alike.
    settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS = 5
    open_ids = [f"OPEN-{n}" for n in range(5)]
    make_rules(open_ids, metrics=["task_completion"] * 5)

    def one_report(n: int) -> int:
        lines = [
            report(f"live-{n}", T0 + timedelta(hours=n, minutes=m), notices=notices)
            for m in range(batch)
        ]
        with CaptureQueriesContext(connection) as queries:
            reports_ingest(numbered(lines), now=T0)
        assert TrialEnrolment.objects.filter(session_id=f"live-{n}").count() == len(open_ids)
        return len(queries.captured_queries)

    def more_full_candidates(start: int, count: int) -> None:
        ids = [f"FULL-{n}" for n in range(start, start + count)]
        make_rules(ids, metrics=["task_completion"] * count)
        full_trials(ids, 5)

    more_full_candidates(0, 95)
    one_report(0)  # the metric registry read once (`lifecycle.metrics.current_registry`)
    few = one_report(1)
    more_full_candidates(95, 1_900)
    assert Rule.objects.filter(state="candidate").count() == 2_000
    assert one_report(2) == few
    # The counts the triggers keep are the enrolments.
    assert set(
        Rule.objects.filter(id__startswith="FULL-").values_list("trial_sessions", flat=True)
    ) == {5}
    assert set(Rule.objects.filter(id__in=open_ids).values_list("trial_sessions", flat=True)) == {3}
