"""The command line on awkward input (semantics §2, §15): a lone surrogate, NaN, a line nested
5,000 deep, a NUL, invalid UTF-8, a time outside the range, a text over its limit — each is an
error naming its line, the command exits non-zero, and nothing at all is written."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from lifecycle.models import JournalEvent, Report, Rule, Trajectory

from ..builders import T0, report, trajectory

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db

GOOD = {
    "import_corpus": json.dumps(trajectory("F-001")).encode(),
    "record_candidates": json.dumps(
        {"id": "C-1", "trigger": "when git push fails", "directive": "pull first"}
    ).encode(),
    "ingest_reports": json.dumps(report("s-1", T0)).encode(),
}
# A bad second line for every command: (bytes, words the error must hold).
AWKWARD = {
    "surrogate": (b'{"id": "s\\ud800x", "session_id": "s\\ud800x"}', "lone surrogate"),
    "nan": (b'{"id": "X-1", "session_id": "s", "metrics": {"coherence": NaN}}', "NaN"),
    "infinity": (
        b'{"id": "X-1", "session_id": "s", "metrics": {"coherence": -Infinity}}',
        "Infinity",
    ),
    "huge number": (b'{"id": "X-1", "session_id": "s", "n": 1e999}', "out of range"),
    "deep": (b"[" * 5000 + b"]" * 5000, "nested deeper than 64"),
    "raw nul": (b'{"id": "X-1"}\x00', "NUL"),
    "escaped nul": (b'{"id": "X\\u0000", "session_id": "X\\u0000"}', "NUL"),
    "invalid utf-8": (b'{"id": "\xff\xfe"}', "not valid UTF-8"),
    "truncated utf-8": (b'{"id": "caf\xc3"}', "not valid UTF-8"),
}
TABLES = (Trajectory, Rule, Report, JournalEvent)


def stored() -> list[int]:
    return [model.objects.count() for model in TABLES]


def run(command: str, body: bytes, tmp_path) -> str:
    path = tmp_path / "input.jsonl"
    path.write_bytes(body)
    with pytest.raises(CommandError) as info:
        call_command(command, str(path))
    assert info.value.returncode == 1
    return str(info.value)


@pytest.mark.parametrize("command", sorted(GOOD))
@pytest.mark.parametrize("kind", sorted(AWKWARD))
def test_an_awkward_line_is_named_and_nothing_is_written(command, kind, tmp_path):
    bad, words = AWKWARD[kind]
    before = stored()
    message = run(command, GOOD[command] + b"\n" + bad + b"\n", tmp_path)
    assert "line 2" in message and words in message, message
    assert "line 1" not in message
    assert stored() == before


@pytest.mark.parametrize(
    "command, line, field",
    [
        ("ingest_reports", {**report("s-2", T0), "at": "0001-01-01T00:00:00+01:00"}, "at"),
        ("ingest_reports", {**report("s-2", T0), "at": "9999-12-31T23:00:00-05:00"}, "at"),
        (
            "import_corpus",
            trajectory("F-002", started_at="0001-01-01T00:00:00+01:00"),
            "started_at",
        ),
        ("import_corpus", trajectory("F-002", task="t" * 20_001), "task"),
        ("import_corpus", trajectory("F-002", meta={"blob": "x" * 70_000}), "meta"),
        ("record_candidates", {"trigger": "w" * 2_001, "directive": "d"}, "trigger"),
        ("record_candidates", {"trigger": "w", "directive": "d" * 2_001}, "directive"),
        ("record_candidates", {"trigger": "w", "directive": "d", "scope": "s" * 129}, "scope"),
    ],
)
def test_times_out_of_range_and_texts_over_their_limit_name_the_field(
    command, line, field, tmp_path
):
    before = stored()
    message = run(command, GOOD[command] + b"\n" + json.dumps(line).encode(), tmp_path)
    assert f"line 2, field '{field}'" in message, message
    assert stored() == before


def test_the_literal_text_backslash_u0000_is_accepted(tmp_path):
    path = tmp_path / "candidates.jsonl"
    line = {"id": "C-9", "trigger": "when a log shows \\u0000", "directive": "strip it"}
    path.write_text(json.dumps(line) + "\n")
    call_command("record_candidates", str(path), stdout=io.StringIO())
    assert Rule.objects.get(pk="C-9").trigger == "when a log shows \\u0000"


def test_a_form_feed_or_line_separator_inside_a_string_does_not_split_the_line(tmp_path):
    path = tmp_path / "candidates.jsonl"
    line = {"id": "C-8", "trigger": "when a page\fbreak or \u2028 shows", "directive": "go on"}
    path.write_text(json.dumps(line, ensure_ascii=False) + "\n")
    call_command("record_candidates", str(path), stdout=io.StringIO())
    assert Rule.objects.filter(pk="C-8").exists()


def test_stdin_with_invalid_utf8_exits_1_with_the_line_and_no_traceback():
    body = GOOD["ingest_reports"] + b"\n" + b'{"session_id": "\xff"}\n'
    result = subprocess.run(
        [sys.executable, "manage.py", "ingest_reports", "-"],
        input=body,
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )
    stderr = result.stderr.decode()
    assert result.returncode == 1
    assert "line 2: not valid UTF-8" in stderr
    assert "Traceback" not in stderr
