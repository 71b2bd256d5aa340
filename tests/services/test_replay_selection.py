"""Failing cases selected for a chunk of the queue in one statement choose, for every
candidate, exactly what the matcher chooses for it alone (semantics §7.1, §11): the newest
replayable failures carrying every failure-mode atom of its signature, at most the limit, and
nothing for a rule that is no longer a candidate."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle.matching import NEWEST_FIRST, matching_trajectories
from lifecycle.metrics import load_registry
from lifecycle.models import Rule, Trajectory, TrajectoryKind
from lifecycle.services.corpus import import_corpus
from lifecycle.services.rules import rule_retire_by_reviewer
from lifecycle.states import Actor
from replay import cases
from tests.builders import T0, candidate, jsonl, trajectory

SIGNATURES = {
    "R-common": ["tool:git"],  # every case carries it
    "R-two": ["tool:git", "error:e1"],
    "R-rare-pair": ["action:a2", "error:e3"],
    "R-three": ["error:e4", "action:a0", "tool:git"],
    "R-none": ["error:nowhere"],
    "R-notice-only": ["breach:task_completion"],  # no failure-mode atom: the matcher's path
    "R-retired": ["tool:git", "error:e2"],
}


def corpus() -> None:
    lines = []
    for i in range(40):
        lines.append(
            trajectory(
                f"F-{i:02d}",
                "failure",
                signature=["tool:git", f"action:a{i % 3}", f"error:e{i % 5}"],
                notices=["breach:task_completion"],
                # Ties on started_at (ids break them) and cases with no start time (last).
                started_at=None if i % 11 == 0 else (T0 + timedelta(minutes=i // 2)).isoformat(),
                replayable=i % 7 != 0,
                replay_input={"scope": "git"},
            )
        )
    lines += [
        trajectory(f"S-{i}", "success", signature=["tool:git", "action:a2", "error:e3"])
        for i in range(3)
    ]
    import_corpus(jsonl(*lines))


def rules() -> list[Rule]:
    made = [
        candidate(rid, signature=sig, directive=f"remedy {rid}", trigger=f"when {rid} fails")
        for rid, sig in SIGNATURES.items()
    ]
    rule_retire_by_reviewer(rule_id="R-retired", actor=Actor.reviewer("rita"), reason="wrong")
    return [Rule.objects.get(pk=r.id) for r in made]


def one_at_a_time(rule: Rule, limit: int) -> list[str]:
    """The matcher's answer for one rule alone: the definition the chunk must agree with."""
    if rule.state != "candidate":
        return []
    query = matching_trajectories(
        rule, kinds=[TrajectoryKind.FAILURE], replayable=True, registry=load_registry()
    )
    return list(query.order_by(*NEWEST_FIRST).values_list("id", flat=True)[:limit])


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [1, 3, 50])
@pytest.mark.parametrize("rarest", ["counted", "reversed"])
def test_a_chunk_selects_what_each_candidate_selects_alone(limit, rarest):
    corpus()
    chunk = rules()
    counts = cases.atom_counts(chunk)
    if rarest == "reversed":  # which atom leads changes the cost, never the answer
        counts = {atom: -n for atom, n in counts.items()}
    chosen = cases.failing_cases(chunk, limit=limit, counts=counts, registry=load_registry())
    got = {r.id: [t.id for t in chosen.get(r.id, [])] for r in chunk}
    assert got == {r.id: one_at_a_time(r, limit) for r in chunk}
    assert "R-retired" not in chosen and "R-none" not in chosen
    assert len(got["R-common"]) == min(limit, 34)  # every replayable failure carries tool:git


@pytest.mark.django_db
def test_a_chunk_is_one_statement_however_many_candidates():
    corpus()
    chunk = [r for r in rules() if r.id != "R-notice-only"]
    counts, registry = cases.atom_counts(chunk), load_registry()
    with CaptureQueriesContext(connection) as ctx:
        cases.failing_cases(chunk, limit=3, counts=counts, registry=registry)
    expected = 1 if connection.vendor == "postgresql" else len(chunk)
    assert len(ctx.captured_queries) == expected


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's statement per rule")
def test_a_selection_on_sqlite_starts_from_the_rare_atoms_postings_not_every_failure():
    # Walking every replayable failure made a selection grow with the corpus.
    corpus()
    (rule,) = [r for r in rules() if r.id == "R-rare-pair"]
    plans = []
    real = connection.cursor

    def explained():
        cursor = real()
        execute = cursor.execute

        def explain(sql, params=None):
            if sql.startswith("WITH rare"):
                execute("EXPLAIN QUERY PLAN " + sql, params)
                plans.append([row[-1] for row in cursor.fetchall()])
            return execute(sql, params)

        cursor.execute = explain
        return cursor

    connection.cursor = explained
    try:
        counts = cases.atom_counts([rule])
        cases.failing_cases([rule], limit=3, counts=counts, registry=load_registry())
    finally:
        del connection.cursor
    (plan,) = plans
    assert "lifecycle_trajectoryatom" in plan[0] and "(atom=?)" in plan[0], plan
    assert not any("SCAN" in step for step in plan), plan


@pytest.mark.django_db
def test_a_rule_retired_before_the_statement_selects_nothing_the_others_keep_theirs():
    corpus()
    chunk = rules()
    rule_retire_by_reviewer(rule_id="R-two", actor=Actor.reviewer("rita"), reason="wrong")
    chosen = cases.failing_cases(
        chunk, limit=3, counts=cases.atom_counts(chunk), registry=load_registry()
    )
    assert "R-two" not in chosen
    assert [t.id for t in chosen["R-rare-pair"]] == one_at_a_time(
        Rule.objects.get(pk="R-rare-pair"), 3
    )


def wins_corpus() -> None:
    scopes = ["git", "git", "git", "ops", None, "ops", "git", None, "deploy"]
    import_corpus(
        jsonl(
            *[
                trajectory(
                    f"S-{i:02d}",
                    "success",
                    started_at=None if i == 6 else (T0 + timedelta(minutes=i % 4)).isoformat(),
                    replayable=i != 5,
                    **({"replay_input": {"scope": scope}} if scope else {}),
                )
                for i, scope in enumerate(scopes)
            ],
            trajectory("F-99", "failure", replay_input={"scope": "git"}),
        )
    )


def wins_alone(scope: str, limit: int) -> list[str]:
    """Semantics §7.2 for one scope: its own newest, then the newest of the others."""
    wins = Trajectory.objects.filter(kind=TrajectoryKind.SUCCESS, replayable=True)
    own = list(
        wins.filter(replay_input__scope=scope)
        .order_by(*NEWEST_FIRST)
        .values_list("id", flat=True)[:limit]
    )
    others = wins.exclude(pk__in=own).order_by(*NEWEST_FIRST).values_list("id", flat=True)
    return own + list(others[: limit - len(own)])


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [0, 1, 2, 5])
def test_the_wins_of_many_scopes_read_together_are_each_scopes_own(limit):
    wins_corpus()
    scopes = ["git", "ops", "deploy", "nowhere"]
    cache: dict = {}
    with CaptureQueriesContext(connection) as ctx:
        cases.protected_wins_read(scopes, limit=limit, cache=cache)
    got = {s: [t.id for t in cases.protected_wins(s, limit=limit, cache=cache)] for s in scopes}
    assert got == {s: wins_alone(s, limit) for s in scopes}
    if limit and connection.vendor == "postgresql":
        assert len(ctx.captured_queries) == 2  # the newest overall, and every scope's own
