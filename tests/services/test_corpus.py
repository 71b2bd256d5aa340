"""Corpus import (semantics §2): atomic, every bad line named, idempotent, expected_rule kept."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from lifecycle.models import JournalEvent, Trajectory, TrajectoryAtom
from lifecycle.services.corpus import import_corpus
from lifecycle.states import Actor
from lifecycle.validation import ImportRejected

from ..builders import jsonl, trajectory

pytestmark = pytest.mark.django_db

EXPECTED = {
    "trigger": "when git push fails with non-fast-forward",
    "directive": "pull latest changes before pushing",
}


def test_a_corpus_imports_with_every_field_kept():
    line = trajectory(
        "F-001",
        expected_rule=EXPECTED,
        notices=["breach:task_completion"],
        signature=["tool:git", "action:git.push", "error:non_fast_forward"],
        corpus="failures/positive",
        session_id="sess-1",
        replay_input={"task": "push the fix"},
        meta={"agent": "coder-7"},
    )
    result = import_corpus(jsonl(line, trajectory("S-022", "success", steps=[])))
    assert result.as_dict() == {"created": 2, "unchanged": 0, "updated": 0}
    stored = Trajectory.objects.get(pk="F-001")
    # semantics §2: dropping expected_rule at parse is the defect this product exists to avoid.
    assert stored.expected_rule == EXPECTED
    assert (stored.corpus, stored.session_id, stored.meta) == (
        "failures/positive",
        "sess-1",
        {"agent": "coder-7"},
    )
    assert stored.replay_input == {"task": "push the fix"}
    assert stored.started_at.isoformat() == line["started_at"]
    assert stored.outcome == {"status": "failed"}
    assert stored.replayable is True
    # semantics §2: replayable defaults to true only when the trajectory has steps.
    assert Trajectory.objects.get(pk="S-022").replayable is False
    assert set(
        TrajectoryAtom.objects.filter(trajectory_id="F-001").values_list("atom", flat=True)
    ) == {
        "tool:git",
        "action:git.push",
        "error:non_fast_forward",
        "breach:task_completion",
    }


def test_a_file_with_one_bad_line_imports_nothing_and_names_every_bad_line():
    lines = (
        jsonl(
            trajectory("F-001"),
            trajectory("F-002", kind="crash"),
            trajectory("F-003", metrics={"task_completion": 1.5}),
        )
        + ["{not json\n"]
        + jsonl({"id": "F-005"}, trajectory("F-001"))
    )
    with pytest.raises(ImportRejected) as exc:
        import_corpus(lines)
    found = {(e.line, e.field) for e in exc.value.errors}
    assert (2, "kind") in found
    assert (3, "metrics") in found
    assert (4, "") in found
    assert {(5, "kind"), (5, "task"), (5, "steps")} <= found
    assert (6, "id") in found  # a duplicate id within the file
    assert not Trajectory.objects.exists()
    assert not TrajectoryAtom.objects.exists()


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"signature": ["git push failed"]}, "signature"),
        ({"signature": "tool:git"}, "signature"),
        ({"notices": ["tool:git"]}, "notices"),
        ({"started_at": "yesterday"}, "started_at"),
        ({"expected_rule": {"trigger": "when x"}}, "expected_rule.directive"),
        ({"replayable": "yes"}, "replayable"),
        ({"metrics": {"coherence": "high"}}, "metrics"),
        ({"steps": "push"}, "steps"),
    ],
)
def test_each_bad_field_is_named(override, field):
    with pytest.raises(ImportRejected) as exc:
        import_corpus(jsonl(trajectory("F-001", **override)))
    assert [(e.line, e.field) for e in exc.value.errors] == [(1, field)]


def test_a_second_import_of_the_same_file_is_a_no_op():
    lines = jsonl(trajectory("F-001"), trajectory("S-001", "success"))
    import_corpus(lines)
    before = list(Trajectory.objects.values_list("id", "imported_at"))
    assert import_corpus(lines).as_dict() == {"created": 0, "unchanged": 2, "updated": 0}
    assert list(Trajectory.objects.values_list("id", "imported_at")) == before


def test_changed_content_is_a_conflict_unless_replace():
    import_corpus(jsonl(trajectory("F-001"), trajectory("F-002")))
    changed = jsonl(
        trajectory("F-001", signature=["tool:git", "error:auth_denied"]), trajectory("F-002")
    )
    with pytest.raises(ImportRejected) as exc:
        import_corpus(changed)
    assert [(e.line, e.field) for e in exc.value.errors] == [(1, "id")]
    assert "--replace" in str(exc.value)
    assert Trajectory.objects.get(pk="F-001").signature == ["tool:git", "action:git.push"]

    assert import_corpus(changed, replace=True).as_dict() == {
        "created": 0,
        "unchanged": 1,
        "updated": 1,
    }
    assert set(
        TrajectoryAtom.objects.filter(trajectory_id="F-001").values_list("atom", flat=True)
    ) == {
        "tool:git",
        "error:auth_denied",
    }


def test_the_command_prints_json_counts(tmp_path, capsys):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(jsonl(trajectory("F-001"))))
    call_command("import_corpus", str(path), "--json")
    assert json.loads(capsys.readouterr().out) == {"created": 1, "unchanged": 0, "updated": 0}


def test_the_command_exits_non_zero_naming_the_line(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(jsonl(trajectory("F-001"), trajectory("F-002", kind="oops"))))
    with pytest.raises(CommandError, match="line 2, field 'kind'") as exc:
        call_command("import_corpus", str(path))
    assert exc.value.returncode == 1
    assert not Trajectory.objects.exists()


def test_the_command_refuses_a_missing_file():
    with pytest.raises(CommandError, match="cannot read"):
        call_command("import_corpus", "/nonexistent/corpus.jsonl")


def test_an_import_by_a_token_is_journaled_with_it_and_a_no_op_is_not():
    bot = Actor.agent("corpus-bot")
    import_corpus(jsonl(trajectory("F-001")), actor=bot)
    import_corpus(jsonl(trajectory("F-001")), actor=bot)  # the same again: nothing changed
    import_corpus(jsonl(trajectory("F-002")))  # the command line's own setup
    events = JournalEvent.objects.filter(type="corpus_imported")
    assert [(e.actor, e.evidence) for e in events] == [
        ("corpus-bot", {"created": 1, "unchanged": 0, "updated": 0, "replace": False})
    ]
