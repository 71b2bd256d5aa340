"""Every input of the API is checked by the one set of checks (`lifecycle/validation.py`
through the models of `lifecycle/inputs.py`): a bad field is a 422 in the one error shape,
naming the field in the words the same check uses at every other entry point, and nothing
is stored."""

import json

import pytest
from pydantic import ValidationError

from lifecycle.inputs import TrajectoryIn
from lifecycle.models import JournalEvent, ReviewItem, Rule, Trajectory
from lifecycle.services.packs import pack_checksum
from lifecycle.services.tokens import token_create
from lifecycle.validation import InvalidRule, review_reason, rule_text

from ..builders import candidate, trajectory

pytestmark = pytest.mark.django_db

API = "/api/v1"
TABLES = (Rule, JournalEvent, ReviewItem, Trajectory)


@pytest.fixture
def reviewer():
    key = token_create(name="rita-token", role="reviewer", actor="test").key
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def stored() -> list[int]:
    return [model.objects.count() for model in TABLES]


def refused(response, status: int = 422) -> list[dict]:
    """The one error shape, with at least one error naming where."""
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"detail", "errors"} and body["errors"]
    return body["errors"]


def words(check, *args) -> str:
    """What a check of `lifecycle.validation` says of a value, wherever it arrives."""
    with pytest.raises(InvalidRule) as raised:
        check(*args)
    return str(raised.value)


@pytest.mark.parametrize(
    "reason, said",
    [
        ("   ", words(review_reason, "   ")),
        ("r" * 2_001, words(review_reason, "r" * 2_001)),
        (7, words(review_reason, 7)),
    ],
)
def test_a_bad_retire_reason_is_refused_in_the_checks_words(client, reviewer, reason, said):
    candidate("C-1")
    before = stored()
    response = client.post(
        f"{API}/rules/C-1/retire", {"reason": reason}, "application/json", **reviewer
    )
    assert refused(response) == [{"loc": ["body", "body", "reason"], "msg": said}]
    assert stored() == before
    assert Rule.objects.get(pk="C-1").state == "candidate"


@pytest.mark.parametrize(
    "field, value, said",
    [
        ("reason", "r" * 2_001, "reason is 2,001 characters; the limit is 2,000"),
        ("keep", "K" * 65, "keep is 65 characters; the limit is 64"),
    ],
)
def test_a_bad_review_action_field_is_refused_before_the_item_is_read(
    client, reviewer, field, value, said
):
    candidate("C-1")
    before = stored()
    body = {"action": "retire", field: value}
    response = client.post(f"{API}/review/999", body, "application/json", **reviewer)
    assert refused(response) == [{"loc": ["body", "body", field], "msg": said}]
    assert stored() == before


def pack(*rules) -> str:
    document = {
        "pack_version": 1,
        "name": "team",
        "version": "1",
        "checksum": "",
        "exported_at": "2026-12-01T00:00:00+00:00",
        "selection": {"scopes": None, "states": ["active"]},
        "rules": [
            {"id": "P-1", "trigger": "when x", "directive": "do y", "state": "active", **rule}
            for rule in rules
        ],
    }
    return json.dumps({**document, "checksum": pack_checksum(document)})


@pytest.mark.parametrize(
    "rule, field, said",
    [
        ({"id": "P" * 65}, "id", "id must be a non-empty string of at most 64 characters"),
        ({"trigger": " "}, "trigger", "trigger is required (the 'when …' part)"),
        ({"trigger": "t" * 2_001}, "trigger", words(rule_text, "t" * 2_001, "trigger", 2_000, "")),
        ({"scope": "s" * 129}, "scope", "scope is 129 characters; the limit is 128"),
    ],
)
def test_a_pack_rule_is_checked_as_any_candidate_is(client, reviewer, rule, field, said):
    before = stored()
    response = client.post(f"{API}/packs", pack(rule), "application/json", **reviewer)
    assert {"loc": ["pack", "rules", 0, field], "msg": said} in refused(response)
    assert stored() == before
    # The preview lists the same error, and still stores nothing.
    preview = client.post(f"{API}/packs?dry_run=true", pack(rule), "application/json", **reviewer)
    assert {"loc": ["rules", 0, field], "msg": said} in preview.json()["errors"]
    assert stored() == before


def test_a_pack_name_over_its_limit_is_refused(client, reviewer):
    document = {**json.loads(pack({})), "name": "n" * 101, "checksum": ""}
    document["checksum"] = pack_checksum(document)
    response = client.post(f"{API}/packs", json.dumps(document), "application/json", **reviewer)
    assert [e["loc"] for e in refused(response)] == [["pack", "name"]]
    assert Rule.objects.count() == 0


@pytest.mark.parametrize(
    "overrides, field, said",
    [
        ({"id": "T" * 129}, "id", "must be a non-empty string of at most 128 characters"),
        ({"corpus": "c" * 129}, "corpus", "must be a string of at most 128 characters"),
        ({"kind": "bad"}, "kind", "must be one of failure, near_miss, success, got 'bad'"),
    ],
)
def test_a_bad_trajectory_is_refused_by_the_import_and_by_its_schema(
    client, reviewer, overrides, field, said
):
    line = trajectory("T-1", **overrides)
    before = stored()
    response = client.post(
        f"{API}/trajectories", json.dumps([line]), "application/json", **reviewer
    )
    assert {"loc": ["line", 1, field], "msg": said} in refused(response)
    assert stored() == before
    # The model the API publishes runs the same check.
    with pytest.raises(ValidationError, match=f"{field}: {said}"):
        TrajectoryIn.model_validate(line)


def test_a_good_trajectory_is_its_schema_as_the_import_reads_it():
    line = TrajectoryIn.model_validate(trajectory("T-1", signature=[]))
    assert line.id == "T-1" and line.signature  # derived from the steps (semantics §19)
