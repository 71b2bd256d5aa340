"""Signature matching (semantics §11): the pure decision and its indexed twin agree everywhere."""

import itertools
import json

import pytest
from django.db import connection

from lifecycle.matching import (
    NEWEST_FIRST,
    matching_trajectories,
    newest_matching_ids,
    rule_matches,
)
from lifecycle.metrics import load_registry
from lifecycle.models import MetricDefinition, Rule
from lifecycle.services.corpus import import_corpus

PUSH_RULE = ["action:git.push", "error:non_fast_forward"]


def matches(signature, atoms, *, metric="", family=frozenset()):
    return rule_matches(
        rule_signature=signature, rule_metric=metric, trajectory_atoms=atoms, family=family
    )


@pytest.mark.parametrize(
    ("rule_signature", "trajectory_atoms", "expected"),
    [
        # semantics §11: every failure-mode atom of the rule must be present.
        (PUSH_RULE, ["tool:git", "action:git.push", "error:non_fast_forward"], True),
        (PUSH_RULE, ["action:git.push", "error:non_fast_forward"], True),
        (PUSH_RULE, ["action:git.push"], False),
        (PUSH_RULE, ["error:non_fast_forward"], False),
        (PUSH_RULE, ["action:git.push", "error:auth_denied"], False),
        (["tool:git"], ["tool:git", "action:git.status"], True),
        (["tool:git"], ["tool:npm"], False),
        # Any non-notice key is a failure-mode atom, not just tool/action/error.
        (["exit:128"], ["exit:128", "tool:git"], True),
        (["exit:128"], ["exit:1"], False),
        # With failure-mode atoms the rule's notice atoms do not widen the match.
        (PUSH_RULE + ["breach:task_completion"], ["breach:task_completion"], False),
        (PUSH_RULE + ["breach:task_completion"], PUSH_RULE, True),
        # Notice fallback: a rule of notice atoms only fires on a shared notice.
        (["breach:task_completion"], ["breach:task_completion", "tool:git"], True),
        (["breach:task_completion"], ["stall:task_completion"], False),
        (["stall:coherence"], ["stall:coherence"], True),
        # A rule with neither matches nothing, not everything.
        ([], ["tool:git", "breach:task_completion"], False),
        ([], [], False),
        # A trajectory with no atoms matches no rule.
        (PUSH_RULE, [], False),
        (["breach:task_completion"], [], False),
    ],
)
def test_the_truth_table_of_signature_matching(rule_signature, trajectory_atoms, expected):
    assert matches(rule_signature, trajectory_atoms) is expected


def test_the_git_push_rule_does_not_match_git_status_or_git_pull_successes():
    # semantics §11: shared words are never a match.
    git_status = ["tool:git", "action:git.status"]
    git_pull = ["tool:git", "action:git.pull"]
    assert not matches(PUSH_RULE, git_status)
    assert not matches(PUSH_RULE, git_pull)


def test_a_declared_metric_widens_the_notice_fallback_to_breach_stall_and_regression_on_it():
    family = frozenset({"task_completion"})
    for key in ("breach", "stall", "regression"):
        assert matches([], [f"{key}:task_completion"], metric="task_completion", family=family)
    assert not matches([], ["breach:coherence"], metric="task_completion", family=family)


def test_a_declared_metric_matches_through_its_aliases():
    family = frozenset({"task_completion", "completion"})
    assert matches([], ["breach:completion"], metric="task_completion", family=family)


def test_a_declared_metric_with_an_empty_family_is_its_own_family():
    assert matches([], ["stall:coherence"], metric="coherence", family=frozenset())


def test_a_declared_metric_does_not_rescue_a_rule_whose_failure_atoms_are_missing():
    family = frozenset({"task_completion"})
    assert not matches(
        PUSH_RULE, ["breach:task_completion"], metric="task_completion", family=family
    )


# The indexed query against the pure function, exhaustively over a small atom universe: every
# subset of atoms as a stored trajectory, every subset as a rule signature, each metric.
UNIVERSE = [
    "tool:git",
    "action:git.push",
    "error:non_fast_forward",
    "breach:task_completion",
    "stall:completion",
    "regression:coherence",
]
METRICS = ["", "task_completion", "coherence"]


def subsets(items):
    return [
        list(combo)
        for size in range(len(items) + 1)
        for combo in itertools.combinations(items, size)
    ]


def _corpus_line(number, atoms, kind):
    signature = [a for a in atoms if not a.startswith(("breach:", "stall:", "regression:"))]
    notices = [a for a in atoms if a not in signature]
    return json.dumps(
        {
            "id": f"T-{number:03d}",
            "kind": kind,
            "task": "generated",
            "steps": [{"tool": "shell"}] if number % 3 else [],
            "outcome": {"ok": kind != "failure"},
            "metrics": {"task_completion": 0.5},
            "signature": signature,
            "notices": notices,
        }
    )


@pytest.mark.django_db
def test_the_indexed_query_agrees_with_the_pure_function_on_every_generated_case():
    MetricDefinition.objects.filter(name="task_completion").update(aliases=["completion"])
    kinds = ["failure", "success", "near_miss"]
    trajectory_atoms = subsets(UNIVERSE)
    import_corpus(
        [_corpus_line(n, atoms, kinds[n % 3]) for n, atoms in enumerate(trajectory_atoms)]
    )
    families = {"": frozenset(), "task_completion": frozenset({"task_completion", "completion"})}
    families["coherence"] = frozenset({"coherence"})
    checked = 0
    for signature, metric in itertools.product(subsets(UNIVERSE), METRICS):
        rule = Rule(id="R-GEN", trigger="t", directive="d", signature=signature, metric=metric)
        expected = {
            f"T-{n:03d}"
            for n, atoms in enumerate(trajectory_atoms)
            if matches(signature, atoms, metric=metric, family=families[metric])
        }
        assert set(matching_trajectories(rule).values_list("id", flat=True)) == expected, (
            signature,
            metric,
        )
        checked += 1
    assert checked == 64 * 3


@pytest.mark.django_db
def test_many_rules_at_once_get_what_each_would_get_alone(django_assert_num_queries):
    # replay's case selection (semantics §7.1) asks for the newest few matches of many candidates
    # in one statement: the same ids as each rule's own query, newest first, limited.
    lines = []
    for n, atoms in enumerate(subsets(UNIVERSE)):
        line = json.loads(_corpus_line(n, atoms, ["failure", "success"][n % 2]))
        if n % 5:  # a fifth undated: they come last
            line["started_at"] = f"2026-01-01T00:{(n * 37) % 60:02d}:00Z"
        lines.append(json.dumps(line))
    import_corpus(lines)
    rules = [
        Rule(id=f"R-{i}", trigger="t", directive="d", signature=signature, metric=metric)
        for i, (signature, metric) in enumerate(itertools.product(subsets(UNIVERSE), METRICS))
    ]
    registry = load_registry()
    with django_assert_num_queries(1):
        found = newest_matching_ids(
            rules[:150], kinds=["failure"], replayable=True, limit=3, registry=registry
        )
    found.update(
        newest_matching_ids(
            rules[150:], kinds=["failure"], replayable=True, limit=3, registry=registry
        )
    )
    assert len(found) == len(rules) == 192
    for rule in rules:
        alone = matching_trajectories(rule, kinds=["failure"], replayable=True, registry=registry)
        newest = list(alone.order_by(*NEWEST_FIRST).values_list("id", flat=True)[:3])
        assert sorted(found[rule.id]) == sorted(newest), (rule.signature, rule.metric)
    assert sum(len(ids) == 3 for ids in found.values()) > 50  # the limit did bite
    assert newest_matching_ids(rules, limit=0) == {rule.id: [] for rule in rules}


@pytest.mark.django_db
def test_the_indexed_query_filters_by_kind_and_replayability():
    lines = [
        _corpus_line(1, PUSH_RULE, "failure"),  # has steps: replayable
        _corpus_line(3, PUSH_RULE, "failure"),  # no steps: not replayable
        _corpus_line(4, PUSH_RULE, "success"),
        _corpus_line(5, ["action:git.status"], "success"),
    ]
    import_corpus(lines)
    rule = Rule(id="R-1", trigger="t", directive="d", signature=PUSH_RULE)
    assert set(matching_trajectories(rule).values_list("id", flat=True)) == {
        "T-001",
        "T-003",
        "T-004",
    }
    failures = matching_trajectories(rule, kinds=["failure"])
    assert set(failures.values_list("id", flat=True)) == {"T-001", "T-003"}
    replayable = matching_trajectories(rule, kinds=["failure"], replayable=True)
    assert list(replayable.values_list("id", flat=True)) == ["T-001"]


@pytest.mark.django_db
def test_the_indexed_query_is_one_statement(django_assert_num_queries):
    rule = Rule(id="R-1", trigger="t", directive="d", signature=PUSH_RULE + ["tool:git"])
    with django_assert_num_queries(1):
        list(matching_trajectories(rule, kinds=["failure"], replayable=True))


@pytest.mark.django_db
def test_a_rule_with_no_atoms_and_no_metric_matches_no_stored_trajectory(
    django_assert_num_queries,
):
    import_corpus([_corpus_line(1, ["breach:task_completion"], "failure")])
    rule = Rule(id="R-1", trigger="t", directive="d", signature=[])
    with django_assert_num_queries(0):
        assert list(matching_trajectories(rule)) == []


@pytest.mark.postgres
@pytest.mark.django_db
def test_on_postgresql_a_failure_mode_match_is_answered_by_the_signature_gin_index():
    # Migration 0003; bench/bench_matching.py has the figures at 1,000,000 trajectories.
    rule = Rule(id="R-1", trigger="t", directive="d", signature=PUSH_RULE)
    sql, params = matching_trajectories(rule).values_list("id").query.sql_with_params()
    with connection.cursor() as cursor:
        # The test table is tiny: without this the planner rightly prefers a sequential scan.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "traj_signature_gin" in plan
