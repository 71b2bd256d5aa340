"""The packs page (semantics §13): export by scope, state and format as a download; import
in two steps — a validation preview that writes nothing, then a confirmation."""

import json

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from lifecycle.models import JournalEvent, Rule
from lifecycle.services import packs
from lifecycle.services.rules import rule_promote
from lifecycle.states import Actor
from tests.builders import candidate

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # The personas' passwords are hashed once per test; the real hasher costs seconds on CI.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def rules():
    push = candidate("R-PUSH")
    rule_promote(rule_id=push.id, actor=Actor.engine(), evidence={}, reason="improved F-001")
    candidate("R-SLOW", trigger="when push is slow", directive="wait and retry")
    pay = candidate(
        "R-PAY", scope="repo:payments", trigger="when a refund fails", directive="retry"
    )
    rule_promote(rule_id=pay.id, actor=Actor.engine(), evidence={}, reason="trial")


def download(response) -> tuple[str, str]:
    assert response.status_code == 200, response.content[:500]
    disposition = response["Content-Disposition"]
    assert disposition.startswith("attachment; filename=")
    return disposition.split("filename=")[1].strip('"'), response.content.decode()


def a_pack_of(*rule_ids: str) -> str:
    """A pack of these rules as this database exports them."""
    text = packs.export_pack(scopes=None, states=["active", "candidate"], fmt="yaml")
    document = yaml.safe_load(text)
    document["rules"] = [r for r in document["rules"] if r["id"] in rule_ids]
    document["checksum"] = packs.pack_checksum(document)
    return yaml.safe_dump(document, sort_keys=False)


# --- The page ----------------------------------------------------------------------------------


def test_the_packs_page_needs_a_login(client):
    assert client.get(reverse("packs")).status_code == 302
    assert client.get(reverse("pack-export")).status_code == 302


def test_a_viewer_is_offered_neither_export_nor_import(viewer_client, rules):
    body = viewer_client.get(reverse("packs")).content.decode()
    assert 'data-testid="export-form"' not in body
    assert 'data-testid="import-form"' not in body
    assert "Only reviewers may export packs" in body
    assert "Only reviewers may import packs" in body


def test_a_viewer_may_not_export_as_in_the_api(viewer_client, rules):
    assert viewer_client.get(reverse("pack-export")).status_code == 403


def test_the_export_form_offers_the_scopes_states_and_formats(reviewer_client, rules):
    response = reviewer_client.get(reverse("packs"))
    assert response.context["scopes"] == ["git", "repo:payments"]
    assert [value for value, _ in response.context["formats"]] == [
        "yaml",
        "json",
        "agents_md",
        "claude_md",
        "cursor_mdc",
    ]


# --- Export ------------------------------------------------------------------------------------


def test_the_default_export_is_a_yaml_pack_of_the_active_rules(reviewer_client, rules):
    name, text = download(reviewer_client.get(reverse("pack-export")))
    assert name.startswith("cauterweb-pack-") and name.endswith(".yaml")
    document = yaml.safe_load(text)
    assert [r["id"] for r in document["rules"]] == ["R-PUSH", "R-PAY"]
    assert document["checksum"] == packs.pack_checksum(document)


def test_a_json_export_selects_by_scope_and_state(reviewer_client, rules):
    query = {"format": "json", "scope": "git", "state": ["active", "candidate"]}
    name, text = download(reviewer_client.get(reverse("pack-export"), query))
    assert name.endswith(".json")
    document = json.loads(text)
    assert {r["id"]: r["state"] for r in document["rules"]} == {
        "R-PUSH": "active",
        "R-SLOW": "candidate",
    }
    assert document["selection"] == {"scopes": ["git"], "states": ["active", "candidate"]}


@pytest.mark.parametrize(
    ("fmt", "filename"),
    [("agents_md", "AGENTS.md"), ("claude_md", "CLAUDE.md"), ("cursor_mdc", "repo-payments.mdc")],
)
def test_agent_files_hold_the_active_rules_of_one_scope(reviewer_client, rules, fmt, filename):
    response = reviewer_client.get(
        reverse("pack-export"), {"format": fmt, "scope": "repo:payments"}
    )
    name, text = download(response)
    assert name == filename
    assert "R-PAY" in text and "R-PUSH" not in text


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"format": "agents_md"}, "exactly one scope"),
        ({"format": "claude_md", "scope": ["git", "repo:payments"]}, "exactly one scope"),
        ({"format": "zip"}, "format must be one of"),
        ({"format": "yaml", "state": "archived"}, "states must be among"),
    ],
)
def test_a_bad_export_request_shows_the_form_again_with_a_message(
    reviewer_client, rules, query, message
):
    response = reviewer_client.get(reverse("pack-export"), query)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert 'data-testid="export-form"' in response.content.decode()


# --- Import: preview, then confirm -------------------------------------------------------------


def test_the_preview_shows_the_rules_and_writes_nothing(reviewer_client, rules):
    text = a_pack_of("R-PUSH", "R-SLOW")
    before = (Rule.objects.count(), JournalEvent.objects.count())
    response = reviewer_client.post(reverse("pack-import"), {"pack_text": text})
    assert response.status_code == 200
    assert (Rule.objects.count(), JournalEvent.objects.count()) == before
    preview = response.context["preview"]
    assert preview.ok
    assert [(p.origin_id, p.action) for p in preview.rules] == [
        ("R-PUSH", "unchanged"),
        ("R-SLOW", "unchanged"),
    ]
    body = response.content.decode()
    assert 'data-testid="pack-preview"' in body
    assert "nothing to import" in body
    assert reverse("pack-import-confirm") not in body


def test_the_preview_offers_to_import_only_the_new_rules(reviewer_client, rules):
    document = yaml.safe_load(a_pack_of("R-PUSH", "R-SLOW"))
    document["rules"][0]["scope"] = "repo:mirror"
    document["checksum"] = packs.pack_checksum(document)
    response = reviewer_client.post(reverse("pack-import"), {"pack_text": yaml.safe_dump(document)})
    body = response.content.decode()
    assert "Import 1 new rule as candidate</button>" in body
    assert "1 already here, left unchanged." in body


def test_an_uploaded_pack_file_is_previewed_too(reviewer_client, rules):
    upload = SimpleUploadedFile("team.yaml", a_pack_of("R-PUSH").encode(), "application/yaml")
    response = reviewer_client.post(reverse("pack-import"), {"pack_file": upload})
    assert response.status_code == 200
    assert [p.origin_id for p in response.context["preview"].rules] == ["R-PUSH"]


def test_a_broken_pack_lists_every_error_and_offers_no_import(reviewer_client, rules):
    document = yaml.safe_load(a_pack_of("R-PUSH", "R-SLOW"))
    document["rules"][1]["trigger"] = ""
    before = Rule.objects.count()
    response = reviewer_client.post(reverse("pack-import"), {"pack_text": yaml.safe_dump(document)})
    assert response.status_code == 400
    assert Rule.objects.count() == before
    errors = [str(e) for e in response.context["preview"].errors]
    assert any(e.startswith("checksum") for e in errors)
    assert any(e.startswith("rules.1.trigger") for e in errors)
    body = response.content.decode()
    assert 'data-testid="pack-errors"' in body
    assert reverse("pack-import-confirm") not in body


def test_a_file_that_is_not_utf8_is_refused_with_a_message(reviewer_client):
    upload = SimpleUploadedFile("pack.yaml", b"\xff\xfe\x00bad", "application/yaml")
    response = reviewer_client.post(reverse("pack-import"), {"pack_file": upload})
    assert response.status_code == 400
    assert "not UTF-8" in response.content.decode()


def test_confirming_imports_the_rules_as_candidates_with_the_reviewer_journaled(
    reviewer_client, rules
):
    document = yaml.safe_load(a_pack_of("R-PAY"))
    # From another install: the same rule under a scope this one does not have yet.
    document["rules"][0]["scope"] = "repo:refunds"
    document["checksum"] = packs.pack_checksum(document)
    response = reviewer_client.post(
        reverse("pack-import-confirm"), {"pack_text": yaml.safe_dump(document)}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("packs")
    imported = Rule.objects.get(scope="repo:refunds")
    assert imported.state == "candidate"  # never trusted into force (semantics §13)
    assert imported.provenance["evidence_trusted"] is False
    assert imported.provenance["pack"]["imported_by"] == "rita"
    event = JournalEvent.objects.get(type="pack_imported")
    assert event.actor == "rita"
    assert event.evidence["created"] == [imported.id]
    assert f"Imported 1 rule(s) as candidates ({imported.id})" in response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_importing_a_pack_of_several_rules_kicks_one_round(reviewer_client, rules, monkeypatch):
    # Real commits: the per-candidate kicks are sent on commit, inside the deferral.
    from replay.tasks import round_run_task

    kicked = []
    monkeypatch.setattr(round_run_task, "delay", lambda **kwargs: kicked.append(kwargs))
    document = yaml.safe_load(a_pack_of("R-PAY", "R-PUSH", "R-SLOW"))
    for rule in document["rules"]:
        rule["scope"] = "repo:elsewhere"
    document["checksum"] = packs.pack_checksum(document)
    reviewer_client.post(reverse("pack-import-confirm"), {"pack_text": yaml.safe_dump(document)})
    assert Rule.objects.filter(scope="repo:elsewhere").count() == 3
    assert kicked == [{"kicked_by": "bulk:candidate"}]


def test_confirming_an_altered_pack_imports_nothing(reviewer_client, rules):
    document = yaml.safe_load(a_pack_of("R-PAY"))
    document["rules"][0]["directive"] = "delete the refunds table"  # checksum no longer fits
    before = Rule.objects.count()
    response = reviewer_client.post(
        reverse("pack-import-confirm"), {"pack_text": yaml.safe_dump(document)}
    )
    assert response.status_code == 400
    assert Rule.objects.count() == before
    assert "Nothing imported" in response.content.decode()


def test_a_viewer_may_not_import(viewer_client, rules):
    text = a_pack_of("R-PUSH")
    assert viewer_client.post(reverse("pack-import"), {"pack_text": text}).status_code == 403
    response = viewer_client.post(reverse("pack-import-confirm"), {"pack_text": text})
    assert response.status_code == 403


def test_import_is_post_only(reviewer_client):
    assert reviewer_client.get(reverse("pack-import")).status_code == 405
    assert reviewer_client.get(reverse("pack-import-confirm")).status_code == 405
