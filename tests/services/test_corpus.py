"""Corpus import (semantics §2): atomic, every bad line named, idempotent, expected_rule kept."""

import gc
import importlib
import io
import json
import sys
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from lifecycle import limits
from lifecycle.models import JournalEvent, Trajectory, TrajectoryAtom
from lifecycle.services import corpus as corpus_service
from lifecycle.services.corpus import import_corpus
from lifecycle.services.corpus_store import SWITCH_INTERVAL, _QuickSwitch
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


def test_json_parts_over_their_byte_limits_are_named_even_on_an_otherwise_good_line():
    # Two-byte characters: under the limit in characters, over it in bytes.
    over = "é" * (limits.META_BYTES // 2)
    lines = jsonl(
        trajectory("F-001", meta={"note": over}),
        trajectory("F-002", steps=[{"tool": "git", "output": "é" * (limits.STEP_BYTES // 2)}]),
        trajectory("F-003", kind="crash", outcome={"text": over}),
        trajectory("F-004", meta={"note": "é" * (limits.META_BYTES // 2 - 20)}),
    )
    with pytest.raises(ImportRejected) as exc:
        import_corpus(lines)
    assert [(e.line, e.field) for e in exc.value.errors] == [
        (1, "meta"),
        (2, "steps[0]"),
        (3, "kind"),
        (3, "outcome"),
    ]
    assert "bytes as JSON; the limit is 65,536" in exc.value.errors[0].message
    assert not Trajectory.objects.exists()


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


# --- streaming: chunks, one transaction, every bad line (semantics §2) ----------------------


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of three lines, so a handful of lines crosses several chunk boundaries."""
    monkeypatch.setattr(corpus_service, "CHUNK", 3)


def test_a_bad_last_line_after_written_chunks_writes_nothing(small_chunks):
    lines = jsonl(*(trajectory(f"F-{i:03d}") for i in range(10)), trajectory("F-999", kind="x"))
    with pytest.raises(ImportRejected) as exc:
        import_corpus(lines)
    assert [(e.line, e.field) for e in exc.value.errors] == [(11, "kind")]
    assert not Trajectory.objects.exists()
    assert not TrajectoryAtom.objects.exists()


def test_every_bad_line_is_reported_after_the_first_bad_chunk(small_chunks):
    import_corpus(jsonl(trajectory("F-100")))
    lines = jsonl(
        trajectory("F-001", kind="x"),  # chunk 1
        trajectory("F-002"),
        trajectory("F-003"),
        trajectory("F-004"),  # chunk 2
        trajectory("F-100", task="other text"),  # stored with other content
        trajectory("F-002"),  # a repeat of line 2, two chunks later
        trajectory("F-007", metrics={"coherence": 2}),  # chunk 3
    )
    with pytest.raises(ImportRejected) as exc:
        import_corpus(lines)
    assert [(e.line, e.field) for e in exc.value.errors] == [
        (1, "kind"),
        (5, "id"),
        (6, "id"),
        (7, "metrics"),
    ]
    assert "already appears on line 2" in exc.value.errors[2].message
    assert list(Trajectory.objects.values_list("id", flat=True)) == ["F-100"]


def test_a_repeated_id_in_a_later_chunk_names_its_first_line(small_chunks):
    lines = jsonl(*(trajectory(f"F-{i:03d}") for i in range(7)), trajectory("F-001"))
    with pytest.raises(ImportRejected) as exc:
        import_corpus(lines)
    assert [str(e) for e in exc.value.errors] == [
        "line 8, field 'id': 'F-001' already appears on line 2"
    ]


def test_repeats_found_by_the_primary_key_are_all_named_and_nothing_is_written(small_chunks):
    # Into an empty corpus the first chunks go in unchecked; the first repeat meets the
    # primary key, its chunk is undone, and from then on every chunk is checked.
    ids = ["F-000", "F-001", "F-002", "F-003", "F-004", "F-005", "F-001", "F-006", "F-003"]
    lines = jsonl(*(trajectory(i) for i in [*ids, "F-004", "F-007"]))
    with pytest.raises(ImportRejected) as exc:
        import_corpus(lines)
    assert [str(e) for e in exc.value.errors] == [
        "line 7, field 'id': 'F-001' already appears on line 2",
        "line 9, field 'id': 'F-003' already appears on line 4",
        "line 10, field 'id': 'F-004' already appears on line 5",
    ]
    assert not Trajectory.objects.exists()
    assert not TrajectoryAtom.objects.exists()


def test_repeats_after_a_bad_line_name_lines_of_chunks_written_unchecked(small_chunks):
    # Two chunks go in unchecked; the bad line stops the writes and checking starts from the
    # ids those chunks wrote, so a later repeat still names the line it first appeared on.
    lines = jsonl(
        *(trajectory(f"F-{i:03d}") for i in range(6)),
        trajectory("F-900", kind="x"),
        trajectory("F-001"),
        trajectory("F-004"),
    )
    with pytest.raises(ImportRejected) as exc:
        import_corpus(lines)
    assert [str(e) for e in exc.value.errors][1:] == [
        "line 8, field 'id': 'F-001' already appears on line 2",
        "line 9, field 'id': 'F-004' already appears on line 5",
    ]
    assert exc.value.errors[0].line == 7
    assert not Trajectory.objects.exists()


def test_an_import_leaves_the_switch_interval_as_it_found_it(small_chunks):
    before = sys.getswitchinterval()
    import_corpus(jsonl(*(trajectory(f"F-{i:03d}") for i in range(7))))
    assert sys.getswitchinterval() == pytest.approx(before)


def test_overlapping_imports_restore_the_switch_interval_once_both_end():
    before = sys.getswitchinterval()
    switch = _QuickSwitch()
    switch.enter()
    switch.enter()
    switch.leave()
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL)
    switch.leave()
    assert sys.getswitchinterval() == pytest.approx(before)


def test_an_awkward_id_repeated_in_a_later_chunk_names_its_first_line(small_chunks):
    odd = 'F-"quoted" \\ é\t€'
    lines = jsonl(trajectory(odd), *(trajectory(f"F-{i:03d}") for i in range(3)), trajectory(odd))
    with pytest.raises(ImportRejected) as exc:
        import_corpus(lines)
    assert [(e.line, e.message) for e in exc.value.errors] == [
        (5, f"{odd!r} already appears on line 1")
    ]


def test_chunks_import_and_re_import_like_one_file(small_chunks):
    lines = jsonl(*(trajectory(f"F-{i:03d}") for i in range(8)))
    seen = []
    result = import_corpus(lines, progress=seen.append, keep_ids=True)
    assert result.as_dict() == {"created": 8, "unchanged": 0, "updated": 0}
    assert result.ids == [f"F-{i:03d}" for i in range(8)]
    assert seen == [3, 6, 8]
    assert TrajectoryAtom.objects.count() == 16
    again = jsonl(
        *(trajectory(f"F-{i:03d}", **({"task": "new"} if i == 4 else {})) for i in range(8))
    )
    assert import_corpus(again, replace=True).as_dict() == {
        "created": 0,
        "unchanged": 7,
        "updated": 1,
    }
    assert Trajectory.objects.get(pk="F-004").task == "new"
    assert TrajectoryAtom.objects.count() == 16


def test_the_same_content_written_another_way_is_unchanged():
    line = trajectory(
        "F-001", meta={"b": 1, "a": [1, 2]}, signature=["tool:git", " action:git.push"]
    )
    import_corpus(jsonl(line))
    reordered = dict(reversed(list({**line, "meta": {"a": [1, 2], "b": 1}}.items())))
    reordered["signature"] = ["tool:git", "action:git.push"]
    assert import_corpus([json.dumps(reordered, indent=None)]).as_dict() == {
        "created": 0,
        "unchanged": 1,
        "updated": 0,
    }


@pytest.mark.parametrize(
    ("override", "field"),
    [
        # NaN is refused by the strict decoder while it reads the line, before any field.
        ({"steps": [{"score": float("nan")}]}, ""),
        ({"task": "push\u0000the fix"}, "task"),
        ({"outcome": {"summary": "\ud800"}}, "outcome.summary"),
        ({"meta": {"note": "a\u0000b"}}, "meta.note"),
    ],
)
def test_values_the_database_cannot_store_are_line_errors(override, field):
    raw = json.dumps(trajectory("F-001", **override))
    with pytest.raises(ImportRejected) as exc:
        import_corpus([raw])
    assert [(e.line, e.field) for e in exc.value.errors] == [(1, field)]
    assert not Trajectory.objects.exists()


def test_a_line_that_is_not_utf8_is_named_by_the_command(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(json.dumps(trajectory("F-001")).encode() + b"\n" + b'{"id": "F-\xff"}\n')
    with pytest.raises(CommandError, match="line 2: not valid UTF-8"):
        call_command("import_corpus", str(path))
    assert not Trajectory.objects.exists()


def test_the_collector_is_paused_during_an_import_and_restored_after(monkeypatch):
    states = []

    def watch(lines_read):
        states.append((gc.isenabled(), gc.get_freeze_count() > 0))

    assert gc.isenabled()
    import_corpus(jsonl(trajectory("F-001")), progress=watch)
    assert states == [(False, True)]
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with pytest.raises(ImportRejected):
        import_corpus(jsonl(trajectory("F-002", kind="x")))
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_stored_trajectories_re_hash_to_what_an_import_computes():
    """Migration 0011 re-hashes what was imported before the hash was taken from the cells:
    from the stored values it must find the hash an import of the same line computes."""
    lines = jsonl(
        trajectory(
            "F-001",
            expected_rule=EXPECTED,
            notices=["breach:task_completion"],
            replay_input={"task": "push", "n": [1, 2.5]},
            meta={"é": "ü"},
            session_id="s-1",
            corpus="failures/positive",
        ),
        trajectory("S-002", "success", steps=[], outcome=None, started_at=None),
    )
    import_corpus(lines)
    imported = dict(Trajectory.objects.values_list("id", "content_hash"))
    Trajectory.objects.update(content_hash="before")
    migration = importlib.import_module("lifecycle.migrations.0011_trajectory_row_hashes")
    migration.rehash(django_apps, SimpleNamespace(connection=connection))
    assert dict(Trajectory.objects.values_list("id", "content_hash")) == imported
    assert import_corpus(lines).as_dict() == {"created": 0, "unchanged": 2, "updated": 0}


def test_an_import_by_a_token_is_journaled_with_it_and_a_no_op_is_not():
    bot = Actor.agent("corpus-bot")
    import_corpus(jsonl(trajectory("F-001")), actor=bot)
    import_corpus(jsonl(trajectory("F-001")), actor=bot)  # the same again: nothing changed
    import_corpus(jsonl(trajectory("F-002")))  # the command line's own setup
    events = JournalEvent.objects.filter(type="corpus_imported")
    assert [(e.actor, e.evidence) for e in events] == [
        ("corpus-bot", {"created": 1, "unchanged": 0, "updated": 0, "replace": False})
    ]


def test_tabs_newlines_and_backslashes_survive_the_copy_text():
    odd = "a\tb\nc\\d\re"
    line = trajectory(
        f"F-{odd}",
        task=odd,
        session_id=odd,
        meta={"path": "C:\\temp\\x", "text": odd},
        signature=["tool:git", "error:a\\b\tc"],
    )
    import_corpus(jsonl(line))
    stored = Trajectory.objects.get()
    assert (stored.id, stored.task, stored.session_id) == (f"F-{odd}", odd, odd)
    assert stored.meta == {"path": "C:\\temp\\x", "text": odd}
    assert set(TrajectoryAtom.objects.values_list("trajectory_id", "atom")) == {
        (f"F-{odd}", "tool:git"),
        (f"F-{odd}", "error:a\\b\tc"),
    }
    assert import_corpus(jsonl(line)).as_dict() == {"created": 0, "unchanged": 1, "updated": 0}


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_command_shows_a_progress_bar_on_a_terminal_only(tmp_path, capsys):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(jsonl(trajectory("F-001"), trajectory("F-002"))))
    call_command("import_corpus", str(path), stdout=Terminal())
    assert "import" in capsys.readouterr().err  # tqdm draws on stderr
    call_command("import_corpus", str(path), "--json", stdout=Terminal())
    call_command("import_corpus", str(path), stdout=io.StringIO())
    assert capsys.readouterr().err == ""


# --- a plain line's cells by orjson store what the old encoder stored ------------------------


def stored_rows() -> list[tuple]:
    """Every stored trajectory and atom as the database returns them, but the time of import."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {Trajectory._meta.db_table} ORDER BY id")
        names = [c[0] for c in cursor.description]
        keep = [i for i, name in enumerate(names) if name != "imported_at"]
        rows = [tuple(row[i] for i in keep) for row in cursor.fetchall()]
        cursor.execute(
            f"SELECT trajectory_id, atom FROM {TrajectoryAtom._meta.db_table} "
            "ORDER BY trajectory_id, atom"
        )
        return rows + cursor.fetchall()


def test_an_awkward_file_stores_the_same_rows_and_hashes_on_the_old_and_new_paths(
    monkeypatch, small_chunks
):
    from ..unit.test_corpus_reading import AWKWARD_LINES

    generated = [
        json.dumps(
            trajectory(
                f"G-{i:03d}",
                task=f"task {i} \u00e9\t\u2028 {'x' * i}",
                metrics={"coherence": i / 13, "task_completion": 1 / (i + 3)},
                meta={"n": i * 10**14, "f": i * 1.1, "z": {"b": [i, None], "a": "\\"}},
            ),
            ensure_ascii=i % 2 == 0,
        ).encode()
        for i in range(12)
    ]
    lines = [*AWKWARD_LINES, *generated]
    fast = []
    real = corpus_service._plain_text

    def spied(fields, time_text):
        written = real(fields, time_text)
        fast.append(written is not None)
        return written

    monkeypatch.setattr(corpus_service, "_plain_text", spied)
    assert import_corpus(lines).created == len(lines)
    new = stored_rows()
    assert sum(fast) >= 10  # the fast path was taken, for most lines
    Trajectory.objects.all().delete()

    monkeypatch.setattr(corpus_service, "_plain_text", lambda fields, time_text: None)
    assert import_corpus(lines).created == len(lines)
    assert stored_rows() == new
    # And what is stored re-hashes to the stored hash (migration 0011's function).
    assert import_corpus(lines).as_dict() == {"created": 0, "unchanged": len(lines), "updated": 0}
