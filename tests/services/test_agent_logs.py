"""Coding agents' logs into the corpus (docs/traces.md, "Coding-agent logs"): a directory tree,
an archive or one file, by `import_traces` and `POST /api/v1/traces` — atomic, idempotent
wherever the log was read from, every bad file named with its line, and no secret of the logs
in the stored rows, the journal or the API's answers."""

import gzip
import io
import json
import tarfile
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from lifecycle.models import JournalEvent, Trajectory, TrajectoryAtom
from lifecycle.services.tokens import token_create

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parents[1] / "fixtures" / "logs"
CLAUDE_FILE = FIXTURES / "claude" / "-home-ana-shop" / "0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e.jsonl"
SESSIONS = 17
# The secrets the fixtures' sessions carry in prompts, commands and outputs.
SECRETS = ("ghp_R2d7Kx9LmQ4pZt8VwN3bYc6FhJ1sGe5TaU0o", "sk-proj-Tq8zK3mV9xL2pW7nR4bY6cJ1hF5dG0sAeU")


def run(*args) -> tuple[dict, str]:
    out, err = StringIO(), StringIO()
    call_command("import_traces", *args, "--json", stdout=out, stderr=err)
    return json.loads(out.getvalue()), err.getvalue()


def tar_gz(root: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(root, arcname="logs")
    return buffer.getvalue()


def test_a_tree_of_every_agent_imports_one_trajectory_per_session_and_names_what_it_skipped():
    counts, err = run(str(FIXTURES))
    assert counts == {"created": SESSIONS, "unchanged": 0, "updated": 0}
    assert "notes.txt: not a coding-agent log this import reads" in err
    push = Trajectory.objects.get(pk="claude-0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e")
    assert (push.kind, push.replayable, push.session_id) == (
        "near_miss",
        False,
        "0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e",
    )
    assert set(TrajectoryAtom.objects.filter(trajectory=push).values_list("atom", flat=True)) == {
        "tool:bash",
        "tool:git",
        "action:git.push",
        "error:non_fast_forward",
        "exit:1",
    }
    by_kind = dict.fromkeys(("failure", "near_miss", "success"), 0)
    for kind in Trajectory.objects.values_list("kind", flat=True):
        by_kind[kind] += 1
    assert by_kind == {"failure": 6, "near_miss": 8, "success": 3}


def test_the_same_logs_from_a_tree_an_archive_or_one_file_import_the_same(tmp_path):
    run(str(FIXTURES))
    before = {t.id: (t.steps, t.signature, t.meta) for t in Trajectory.objects.all()}
    archive = tmp_path / "logs.tar.gz"
    archive.write_bytes(tar_gz(FIXTURES))
    assert run(str(archive))[0] == {"created": 0, "unchanged": SESSIONS, "updated": 0}
    assert run(str(CLAUDE_FILE))[0] == {"created": 0, "unchanged": 1, "updated": 0}
    assert {t.id: (t.steps, t.signature, t.meta) for t in Trajectory.objects.all()} == before


def test_a_session_that_went_on_is_a_conflict_until_replaced(tmp_path):
    grown = tmp_path / CLAUDE_FILE.name
    grown.write_bytes(CLAUDE_FILE.read_bytes())
    run(str(grown))
    with grown.open("a") as handle:
        handle.write(
            json.dumps(
                {
                    "type": "user",
                    "sessionId": "0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "tool_use",
                                "id": "toolu_09",
                                "name": "Bash",
                                "input": {"command": "git log -1"},
                            }
                        ],
                    },
                }
            )
            + "\n"
        )
    with pytest.raises(CommandError, match="already stored with other content"):
        run(str(grown))
    assert run(str(grown), "--replace")[0] == {"created": 0, "unchanged": 0, "updated": 1}


def test_a_bad_line_anywhere_names_its_file_and_line_and_nothing_is_stored(tmp_path):
    tree = tmp_path / "projects"
    tree.mkdir()
    (tree / "a.jsonl").write_bytes(CLAUDE_FILE.read_bytes())
    lines = CLAUDE_FILE.read_bytes().splitlines(keepends=True)
    (tree / "b.jsonl").write_bytes(
        b"".join(lines[:5]) + b'{"type": "assistant", "message": 7}\n' + b"".join(lines[5:])
    )
    with pytest.raises(CommandError) as caught:
        run(str(tree))
    assert f"{tree / 'b.jsonl'}, line 6, field 'message': must be an object" in str(caught.value)
    assert not Trajectory.objects.exists()


def test_a_refused_archive_stores_nothing_and_says_why(tmp_path):
    archive = tmp_path / "logs.tar.gz"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(CLAUDE_FILE, arcname="ok.jsonl")
        info = tarfile.TarInfo("../../escape.jsonl")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"{}\n"))
    archive.write_bytes(buffer.getvalue())
    with pytest.raises(CommandError, match="climbs out of the archive: refused"):
        run(str(archive))
    assert not Trajectory.objects.exists()


@pytest.fixture
def agent_key() -> str:
    return token_create(name="log-shipper", role="agent", actor="test").key


def post(client, body: bytes, content_type: str, key: str, name: str = "logs.tar.gz"):
    return client.post(
        f"/api/v1/traces?name={name}",
        data=body,
        content_type=content_type,
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )


def test_the_api_takes_a_transcript_and_an_archive_and_journals_the_import(client, agent_key):
    one = post(
        client, CLAUDE_FILE.read_bytes(), "application/x-ndjson", agent_key, CLAUDE_FILE.name
    )
    assert one.status_code == 200, one.content
    assert one.json() == {
        "created": 1,
        "unchanged": 0,
        "updated": 0,
        "ids": ["claude-0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e"],
    }
    many = post(client, tar_gz(FIXTURES), "application/gzip", agent_key)
    assert many.status_code == 200, many.content
    assert (many.json()["created"], many.json()["unchanged"]) == (SESSIONS - 1, 1)
    events = JournalEvent.objects.order_by("id").values_list("type", "actor", "evidence")
    assert [e for e in events if e[0] == "corpus_imported"] == [
        (
            "corpus_imported",
            "log-shipper",
            {"created": 1, "unchanged": 0, "updated": 0, "replace": False},
        ),
        (
            "corpus_imported",
            "log-shipper",
            {"created": SESSIONS - 1, "unchanged": 1, "updated": 0, "replace": False},
        ),
    ]


def gzip_bomb(head: bytes, filler: bytes, megabytes: int) -> bytes:
    """A gzip file that starts as a log and goes on with `megabytes` MB of one byte, made
    without ever holding them (the bomb is ~1,000 times smaller than what it says)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as packed:
        packed.write(head)
        chunk = filler * (1024 * 1024)
        for _ in range(megabytes):
            packed.write(chunk)
    return out.getvalue()


def test_a_bomb_posted_to_the_api_is_a_clear_4xx_and_stores_nothing(client, agent_key):
    # A transcript whose second line is 100 MB of one character, in about 100 KB.
    first = CLAUDE_FILE.read_bytes().splitlines(keepends=True)[1]
    bomb = gzip_bomb(first + b'{"type":"user","message":{"content":"', b"A", 100)
    assert len(bomb) < 200 * 1024
    response = post(client, bomb, "application/gzip", agent_key, "s.jsonl.gz")
    assert response.status_code == 422
    assert "compression bomb" in json.dumps(response.json())
    assert not Trajectory.objects.exists()


def test_a_file_that_is_no_log_is_not_read_past_its_first_bytes(client, agent_key):
    # 100 MB of zeros: skipped once its first 256 KiB say it is no log, never read out.
    response = post(client, gzip_bomb(b"", b"\0", 100), "application/gzip", agent_key, "z.gz")
    assert response.status_code == 200
    assert response.json()["created"] == 0


def test_no_secret_survives_in_stored_rows_the_journal_or_the_api(client, agent_key):
    answer = post(client, tar_gz(FIXTURES), "application/gzip", agent_key)
    assert answer.status_code == 200
    # A bad line that holds a secret: the error names the line, never its text.
    bad = f'{{"type": "user", "sessionId": "x", "message": {{"content": "{SECRETS[0]}"}}\n'
    refused = post(client, bad.encode(), "application/x-ndjson", agent_key, "bad.jsonl")
    assert refused.status_code in (400, 422)
    stored = json.dumps(
        [
            list(row)
            for row in Trajectory.objects.values_list(
                "task", "steps", "outcome", "meta", "signature", "session_id"
            )
        ]
    )
    journal = json.dumps(list(JournalEvent.objects.values_list("evidence", flat=True)))
    shown = answer.content.decode() + refused.content.decode()
    for secret in SECRETS:
        assert secret not in stored and secret not in journal and secret not in shown
    assert "[REDACTED:github_token]" in stored and "[REDACTED:openai_key]" in stored


def test_batches_of_sessions_are_one_import_all_or_nothing(monkeypatch, tmp_path):
    # Each session its own batch: still one transaction, every conflict named, nothing written.
    from lifecycle.services import traces as service

    monkeypatch.setattr(service, "BATCH_BYTES", 1)
    assert run(str(FIXTURES))[0] == {"created": SESSIONS, "unchanged": 0, "updated": 0}
    changed = tmp_path / "logs"
    changed.mkdir()
    for name in ("0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e", "9a3e5f10-2c7b-4d88-a1e6-5b0f4c3d2e71"):
        text = (FIXTURES / "claude" / "-home-ana-shop" / f"{name}.jsonl").read_text()
        (changed / f"{name}.jsonl").write_text(text.replace("2.0.30", "2.0.31"))
    (changed / "new.jsonl").write_text(
        json.dumps({"type": "user", "sessionId": "new-one", "message": {"content": "hello"}}) + "\n"
    )
    with pytest.raises(CommandError) as caught:
        run(str(changed))
    assert str(caught.value).count("already stored with other content") == 2
    assert not Trajectory.objects.filter(pk="claude-new-one").exists()
    assert Trajectory.objects.count() == SESSIONS
