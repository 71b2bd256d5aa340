"""The review queue over the API (docs/api.md): any token reads it and may send a pack to
wait in it; only a reviewer's token resolves an item; every refusal in the one error shape."""

import json

import pytest

from lifecycle.models import ReviewItem, Rule, StagedPack
from lifecycle.services.packs import export_pack
from lifecycle.services.tokens import token_create
from tests.builders import make_rule, suspected_duplicate, uncertain_rule, verdict

pytestmark = pytest.mark.django_db
API = "/api/v1"


@pytest.fixture
def keys():
    return {
        "agent": token_create(name="repair-bot", role="agent", actor="test").key,
        "reviewer": token_create(name="rita-token", role="reviewer", actor="test").key,
    }


def call(client, method, path, key=None, **kwargs):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    return getattr(client, method)(API + path, **headers, **kwargs)


@pytest.fixture
def queue():
    a, b = make_rule("A"), make_rule("B")
    suspected_duplicate(b, of=a)
    make_rule("C-1", scope="docs")
    verdict("C-1", 5, "pending", replay_attempts=3)
    uncertain_rule("C-9", scope="git")


def test_any_token_reads_the_queue_with_each_items_actions(client, keys, queue):
    response = call(client, "get", "/review", keys["agent"])
    assert response.status_code == 200
    items = response.json()["items"]
    # Oldest first: the extraction's item was opened at T0, the others as the test ran.
    assert [(i["kind"], i["rule"]) for i in items] == [
        ("extraction", "C-9"),
        ("duplicate", "B"),
        ("inconclusive", "C-1"),
    ]
    assert items[1]["actions"] == ["merge", "dismiss"] and items[1]["other_rule"] == "A"
    assert (
        call(client, "get", "/review", keys["agent"], data={"scope": "docs"}).json()["items"][0][
            "rule"
        ]
        == "C-1"
    )
    counts = call(client, "get", "/review/counts", keys["agent"]).json()
    assert counts == {
        "inconclusive": 1,
        "extraction": 1,
        "duplicate": 1,
        "harm": 0,
        "pack": 0,
        "total": 3,
    }


def test_the_queue_is_paged_by_cursor(client, keys, queue):
    first = call(client, "get", "/review", keys["agent"], data={"limit": 2}).json()
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = call(
        client, "get", "/review", keys["agent"], data={"limit": 2, "cursor": first["next_cursor"]}
    ).json()
    assert [i["rule"] for i in rest["items"]] == ["C-1"] and rest["next_cursor"] is None


def test_a_bad_kind_is_a_422_naming_it(client, keys):
    response = call(client, "get", "/review", keys["agent"], data={"kind": "everything"})
    assert response.status_code == 422
    assert response.json()["errors"] == [
        {"loc": ["query", "kind"], "msg": response.json()["detail"]}
    ]


def test_only_a_reviewer_resolves_and_gets_the_closed_item(client, keys, queue):
    item = ReviewItem.objects.get(kind="duplicate")
    body = {"action": "merge", "keep": "A"}
    denied = call(
        client,
        "post",
        f"/review/{item.pk}",
        keys["agent"],
        data=json.dumps(body),
        content_type="application/json",
    )
    assert denied.status_code == 403
    done = call(
        client,
        "post",
        f"/review/{item.pk}",
        keys["reviewer"],
        data=json.dumps(body),
        content_type="application/json",
    )
    assert done.status_code == 200
    assert (done.json()["closed_by"], done.json()["actions"]) == ("rita-token", [])
    assert Rule.objects.get(pk="B").state == "retired"
    again = call(
        client,
        "post",
        f"/review/{item.pk}",
        keys["reviewer"],
        data=json.dumps(body),
        content_type="application/json",
    )
    assert again.status_code == 409
    assert again.json()["detail"].startswith("already resolved by rita-token")


@pytest.mark.parametrize(
    ("body", "status", "loc"),
    [
        ({"action": "confirm"}, 422, ["body", "action"]),
        ({"action": "merge", "keep": "Z"}, 422, ["body", "keep"]),
        ({"action": "explode"}, 422, None),
    ],
)
def test_an_action_the_item_does_not_offer_is_a_422(client, keys, queue, body, status, loc):
    item = ReviewItem.objects.get(kind="duplicate")
    response = call(
        client,
        "post",
        f"/review/{item.pk}",
        keys["reviewer"],
        data=json.dumps(body),
        content_type="application/json",
    )
    assert response.status_code == status
    if loc:
        assert response.json()["errors"][0]["loc"] == loc
    assert ReviewItem.objects.get(pk=item.pk).closed_at is None


def test_an_unknown_item_is_a_404(client, keys):
    response = call(
        client,
        "post",
        "/review/999",
        keys["reviewer"],
        data=json.dumps({"action": "dismiss"}),
        content_type="application/json",
    )
    assert response.status_code == 404 and response.json()["detail"] == "no review item 999"


def test_the_labelled_pairs_come_as_json_lines(client, keys, queue):
    item = ReviewItem.objects.get(kind="extraction")
    call(
        client,
        "post",
        f"/review/{item.pk}",
        keys["reviewer"],
        data=json.dumps({"action": "deny"}),
        content_type="application/json",
    )
    response = call(client, "get", "/review/extraction-labels", keys["agent"])
    assert response["Content-Type"].startswith("application/x-ndjson")
    (line,) = b"".join(response.streaming_content).decode().splitlines()
    pair = json.loads(line)
    assert (pair["label"], pair["rule"], pair["domain"]) == (0, "C-9", "git")


def test_an_agent_sends_a_pack_to_wait_for_a_reviewer(client, keys):
    make_rule("K-1", state="active", scope="git")
    text = export_pack(scopes=["git"], name="team", version="7")
    Rule.objects.filter(pk="K-1").delete()
    response = call(
        client, "post", "/packs/staged", keys["agent"], data=text, content_type="application/yaml"
    )
    assert response.status_code == 200
    staged = response.json()
    assert (staged["name"], staged["version"], staged["new_rules"], staged["status"]) == (
        "team",
        "7",
        1,
        "waiting",
    )
    assert staged["staged_by"] == "repair-bot"
    assert ReviewItem.objects.get(kind="pack").pack_id == staged["id"]
    broken = call(
        client,
        "post",
        "/packs/staged",
        keys["agent"],
        data="pack_version: 1\n",
        content_type="application/yaml",
    )
    assert broken.status_code == 422 and StagedPack.objects.count() == 1
