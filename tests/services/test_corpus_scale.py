"""A bad last line of a long file writes nothing (semantics §2): the import streams in chunks
inside one transaction, so every chunk before the bad line was already written when it is
found, and all of it must roll back. A million lines on PostgreSQL; 100,000 on every run."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from lifecycle.models import Trajectory, TrajectoryAtom

pytestmark = pytest.mark.django_db

LINE = (
    '{"id": "T-%07d", "kind": "failure", "task": "t", "steps": [], "outcome": null, '
    '"metrics": {"task_completion": 0.5}, "signature": ["tool:git"]}\n'
)


def corpus_with_a_bad_last_line(path, lines: int):
    with open(path, "w") as out:
        out.writelines(LINE % n for n in range(lines - 1))
        out.write((LINE % lines).replace('"failure"', '"crash"'))
    return path


def assert_nothing_written(path, lines: int) -> None:
    with pytest.raises(CommandError, match=f"line {lines:d}, field 'kind'") as exc:
        call_command("import_corpus", str(path))
    assert str(exc.value).startswith("1 error(s), nothing imported")
    assert not Trajectory.objects.exists()
    assert not TrajectoryAtom.objects.exists()


def test_a_bad_last_line_of_100_000_lines_writes_nothing(tmp_path):
    path = corpus_with_a_bad_last_line(tmp_path / "corpus.jsonl", 100_000)
    assert_nothing_written(path, 100_000)


@pytest.mark.postgres
def test_a_bad_last_line_of_1_000_000_lines_writes_nothing(tmp_path):
    path = corpus_with_a_bad_last_line(tmp_path / "corpus.jsonl", 1_000_000)
    assert_nothing_written(path, 1_000_000)
