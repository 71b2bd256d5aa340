"""Every endpoint works for every rule id and scope the API accepts: `/`, `:`, spaces, `%` and
non-ASCII letters included. Clients percent-encode a value into the path as usual."""

from urllib.parse import quote

import pytest

from lifecycle.models import Rule, RuleRead, RuleState
from lifecycle.services.tokens import token_create

pytestmark = pytest.mark.django_db

API = "/api/v1"
IDS = ["X/slash", "a:b", "with space", "50%off", "%2F", "ünï/規則", "end/"]
SCOPES = ["repo:acme/payments", "team x/y z", "100%", "ünï/規則", "a/rules/b"]


@pytest.fixture
def agent():
    return {
        "HTTP_AUTHORIZATION": f"Bearer {token_create(name='bot', role='agent', actor='test').key}"
    }


@pytest.fixture
def reviewer():
    return {
        "HTTP_AUTHORIZATION": f"Bearer {token_create(name='rita', role='reviewer', actor='test').key}"
    }


def record(client, agent, *, rule_id: str, scope: str = "git"):
    body = {
        "id": rule_id,
        "scope": scope,
        "trigger": "when git push fails with non-fast-forward",
        "directive": "pull latest changes before pushing",
    }
    response = client.post(f"{API}/candidates", body, content_type="application/json", **agent)
    assert response.status_code == 200, response.json()


@pytest.mark.parametrize("rule_id", IDS)
def test_a_rule_is_read_retired_and_requeued_whatever_its_id(client, agent, reviewer, rule_id):
    record(client, agent, rule_id=rule_id)
    path = f"{API}/rules/{quote(rule_id, safe='')}"
    assert client.get(path, **agent).json()["rule"]["id"] == rule_id
    assert client.get(f"{path}/gate", **agent).status_code == 200
    listed = client.get(f"{API}/rules", {"q": rule_id.split("/")[0]}, **agent).json()
    assert rule_id in [r["id"] for r in listed["items"]]
    journal = client.get(f"{API}/journal", {"rule": rule_id}, **agent).json()
    assert {e["rule"] for e in journal["items"]} == {rule_id}
    retired = client.post(
        f"{path}/retire", {"reason": "wrong"}, content_type="application/json", **reviewer
    )
    assert retired.status_code == 200 and retired.json()["rule"]["state"] == "retired"
    requeued = client.post(f"{path}/requeue", **reviewer)
    assert requeued.status_code == 200 and requeued.json()["replaces"] == rule_id
    assert Rule.objects.get(pk=rule_id).state == RuleState.RETIRED


@pytest.mark.parametrize("scope", SCOPES)
def test_the_rule_tool_and_the_scope_file_work_whatever_the_scope(client, agent, scope):
    record(client, agent, rule_id="R-1", scope=scope)
    path = f"{API}/scopes/{quote(scope, safe='')}"
    tool = client.get(f"{path}/rules", {"session": "s-1"}, **agent)
    assert tool.status_code == 200
    assert tool.json()["scope"] == scope
    assert [r["id"] for r in tool.json()["rules"]] == ["R-1"]
    assert RuleRead.objects.filter(session_id="s-1", rule_id="R-1").exists()
    scope_file = client.get(path, **agent).json()
    assert scope_file["scope"] == scope and "[R-1]" in scope_file["text"]
    assert client.get(f"{API}/rules", {"scope": scope}, **agent).json()["items"][0]["id"] == "R-1"


def test_a_missing_rule_with_a_slash_is_a_json_404(client, agent):
    response = client.get(f"{API}/rules/{quote('no/such', safe='')}", **agent)
    assert response.status_code == 404
    assert response.json() == {"detail": "no rule no/such", "errors": []}


def test_a_trailing_sub_resource_name_means_the_sub_resource(client, agent):
    # The server sees `%2F` as `/`, so `/scopes/a/b/rules` is the rule tool of scope `a/b`, and
    # `/rules/a/gate` the gate of rule `a`: the longer routes are matched first.
    record(client, agent, rule_id="R-1", scope="a/b")
    assert client.get(f"{API}/scopes/a/b/rules", **agent).json()["scope"] == "a/b"
    record(client, agent, rule_id="a")
    assert "lexical" in client.get(f"{API}/rules/a/gate", **agent).json()
