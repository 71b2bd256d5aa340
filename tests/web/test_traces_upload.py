"""The trace upload form (semantics §19): a reviewer's file imports through the same path as
the command line; a bad file names its records and writes nothing; viewers cannot upload."""

import io
import tarfile
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.template.loader import render_to_string
from django.test import Client

from lifecycle.models import JournalEvent, Trajectory
from tests.traces_support import fixture_bytes

pytestmark = pytest.mark.django_db
UPLOAD = "/corpus/upload/"


def login(client: Client, *, reviewer: bool) -> None:
    user = User.objects.create_user("rita" if reviewer else "vic", password="pw")
    if reviewer:
        user.groups.add(Group.objects.get_or_create(name="reviewers")[0])
    client.force_login(user)


def upload(client, name: str, content: bytes, **fields):
    return client.post(UPLOAD, {"trace_file": SimpleUploadedFile(name, content), **fields})


def test_a_reviewer_uploads_a_trace_file_and_its_sessions_become_trajectories(client):
    login(client, reviewer=True)
    assert client.get(UPLOAD).status_code == 200
    response = upload(client, "agent.otlp.pb", fixture_bytes("genai_agent.otlp.pb"))
    assert response.status_code == 302
    assert Trajectory.objects.count() == 2
    assert JournalEvent.objects.get(type="corpus_imported").actor == "rita"


def test_a_bad_file_names_its_records_and_imports_nothing(client):
    login(client, reviewer=True)
    response = upload(client, "bad.json", b'{"eval": {}, "samples": [{"input": "x"}]}')
    assert response.status_code == 422
    assert b"samples[0], field &#x27;id&#x27;: is required" in response.content
    assert not Trajectory.objects.exists()


def test_a_viewer_cannot_upload(client):
    login(client, reviewer=False)
    assert upload(client, "agent.json", fixture_bytes("genai_agent.otlp.json")).status_code == 403
    assert not Trajectory.objects.exists()


def test_the_derivation_panel_shows_each_atom_with_its_rule_and_text():
    derivation = {
        "because": [
            {
                "atom": "error:non_fast_forward",
                "rule": "git.non_fast_forward",
                "source": "steps[2].error",
                "match": "non-fast-forward",
            }
        ]
    }
    html = render_to_string("dashboard/traces/derivation.html", {"derivation": derivation})
    assert (
        "error:non_fast_forward" in html
        and "git.non_fast_forward" in html
        and "steps[2].error" in html
    )


def test_the_trajectory_page_shows_where_its_derived_signature_came_from(client):
    login(client, reviewer=True)
    upload(client, "agent.json", fixture_bytes("genai_agent.otlp.json"))
    page = client.get("/corpus/otel-conv_5j66UpCpwteGg4YSxUnt7lPY/")
    assert page.status_code == 200
    assert b'data-testid="signature-derivation"' in page.content
    assert b"git.remote_has_work" in page.content
    assert b"Upload agent traces" in client.get("/corpus/").content


LOGS = Path(__file__).parents[1] / "fixtures" / "logs"
TRANSCRIPT = LOGS / "claude" / "-home-ana-shop" / "0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e.jsonl"


def test_a_reviewer_uploads_a_claude_code_transcript(client):
    login(client, reviewer=True)
    response = upload(client, TRANSCRIPT.name, TRANSCRIPT.read_bytes())
    assert response.status_code == 302
    assert Trajectory.objects.get().id == "claude-0b7f0a52-5a2e-4f2b-9d0e-3c1a2b4c5d6e"
    assert JournalEvent.objects.get(type="corpus_imported").evidence["created"] == 1


def test_a_reviewer_uploads_an_archive_of_logs(client):
    login(client, reviewer=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(LOGS / "codex", arcname="codex")
    assert upload(client, "codex.tar.gz", buffer.getvalue()).status_code == 302
    assert Trajectory.objects.filter(id__startswith="codex-").count() == 4


def test_a_bad_transcript_names_its_file_and_line_and_imports_nothing(client):
    login(client, reviewer=True)
    lines = TRANSCRIPT.read_bytes().splitlines(keepends=True)
    bad = b"".join(lines[:2]) + b"{oops\n" + b"".join(lines[2:])
    response = upload(client, "s.jsonl", bad)
    assert response.status_code == 422
    assert b"s.jsonl, line 3: not valid JSON" in response.content
    assert not Trajectory.objects.exists()
