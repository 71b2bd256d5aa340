"""The trace upload form (semantics §19): a reviewer's file imports through the same path as
the command line; a bad file names its records and writes nothing; viewers cannot upload."""

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
