"""The HTTP API: who may call what, what no one may do, and the error format."""

import json
from datetime import timedelta

import pytest
import yaml
from django.test import override_settings
from django.urls import get_resolver

from lifecycle.models import JournalEvent, Rule, RuleRead, Trajectory
from lifecycle.services.packs import CHECKSUM_MISMATCH, export_pack
from lifecycle.services.rules import rule_promote, rule_retire_by_reviewer
from lifecycle.services.tokens import token_create, token_revoke
from lifecycle.states import Actor
from tests.builders import (
    F001_EXTRACTION,
    F001_EXTRACTION_BEFORE_CALIBRATION,
    T0,
    candidate,
    make_rule,
    report,
    trajectory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    # The personas log in with real passwords; the default hasher costs ~0.3 s a user.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


API = "/api/v1"


@pytest.fixture
def keys():
    keys = {
        "agent": token_create(name="repair-bot", role="agent", actor="test").key,
        "reviewer": token_create(name="rita-token", role="reviewer", actor="test").key,
        "revoked": token_create(name="old-bot", role="reviewer", actor="test").key,
    }
    token_revoke(name="old-bot", actor="test")
    return keys


@pytest.fixture
def kicks(monkeypatch):
    """Round kicks from the API, recorded instead of run (the engine is tested on its own)."""
    reasons = []

    def fake_kick(*, reason):
        reasons.append(reason)
        return {"queued": True, "detail": "round queued"}

    monkeypatch.setattr("replay.reviewer.kick_round", fake_kick)
    return reasons


def call(client, method, path, key=None, body=None, content_type="application/json"):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    if method == "get":
        return client.get(path, **headers)
    if body is not None and not isinstance(body, str | bytes):
        body = json.dumps(body)
    return client.post(path, body or "", content_type=content_type, **headers)


def world():
    """A candidate C-1 in scope git, an active A-1 and a retired X-1."""
    candidate("C-1")
    candidate("A-1", trigger="when the lockfile is stale", directive="regenerate it", signature=[])
    rule_promote(rule_id="A-1", actor=Actor.engine(), evidence={}, reason="trial", validator="x")
    candidate("X-1", trigger="when ci is red", directive="read the log first", signature=[])
    rule_retire_by_reviewer(rule_id="X-1", actor=Actor.reviewer("rita"), reason="vague")


def pack_text():
    return export_pack(states=["active"])


AGENT, REVIEWER = "agent", "reviewer"
# (method, path, body, least role allowed, status when allowed)
ENDPOINTS = [
    ("post", "/trajectories", [trajectory("F-001")], AGENT, 200),
    ("post", "/reports", [report("s-1", T0)], AGENT, 200),
    ("post", "/candidates", {"trigger": "when a", "directive": "do b"}, AGENT, 200),
    ("get", "/rules", None, AGENT, 200),
    ("get", "/rules/C-1", None, AGENT, 200),
    ("get", "/rules/C-1/gate", None, AGENT, 200),
    ("get", "/rules/C-1/extraction", None, AGENT, 404),  # C-1 has no ground truth
    ("post", "/rules/C-1/retire", {"reason": "duplicate of A-1"}, REVIEWER, 200),
    ("post", "/rules/X-1/requeue", None, REVIEWER, 200),
    ("get", "/journal", None, AGENT, 200),
    ("get", "/rounds", None, AGENT, 200),
    ("post", "/rounds", None, REVIEWER, 202),
    ("get", "/scopes/git/rules?session=s-1", None, AGENT, 200),
    ("get", "/scopes/git", None, AGENT, 200),
    ("get", "/packs", None, REVIEWER, 200),
    ("post", "/packs?dry_run=true", pack_text, REVIEWER, 200),
]
IDS = [f"{m.upper()} {p}" for m, p, *_ in ENDPOINTS]


@pytest.mark.parametrize(("method", "path", "body", "least", "ok"), ENDPOINTS, ids=IDS)
@pytest.mark.parametrize("role", ["anonymous", "revoked", "agent", "reviewer"])
def test_each_role_is_allowed_or_refused_on_each_endpoint(
    client, keys, kicks, role, method, path, body, least, ok
):
    world()
    body = body() if callable(body) else body
    response = call(client, method, API + path, keys.get(role), body)

    if role in ("anonymous", "revoked"):
        expected = 401
    elif role == AGENT and least == REVIEWER:
        expected = 403
    else:
        expected = ok
    assert response.status_code == expected, response.content
    if expected in (401, 403):
        assert set(response.json()) == {"detail", "errors"}


@pytest.mark.parametrize(("method", "path", "body", "least", "ok"), ENDPOINTS, ids=IDS)
def test_a_dashboard_session_may_read_but_never_write(
    viewer_client, kicks, method, path, body, least, ok
):
    world()
    body = body() if callable(body) else body
    response = call(viewer_client, method, API + path, None, body)
    readable = method == "get" and least == AGENT
    assert response.status_code == (ok if readable else 401), response.content


def test_a_refused_write_changes_nothing(client, keys):
    world()
    before = JournalEvent.objects.count()
    response = call(client, "post", f"{API}/rules/C-1/retire", keys[AGENT], {"reason": "mine"})
    assert response.status_code == 403
    assert response.json()["detail"] == "token 'repair-bot' has role agent; this needs a reviewer"
    assert Rule.objects.get(pk="C-1").state == "candidate"
    assert JournalEvent.objects.count() == before


def test_an_agent_cannot_retire_even_a_rule_it_recorded(client, keys):
    made = call(
        client, "post", f"{API}/candidates", keys[AGENT], {"trigger": "when a", "directive": "b"}
    )
    rule_id = made.json()["ids"][0]
    assert Rule.objects.get(pk=rule_id).author == "repair-bot"
    response = call(client, "post", f"{API}/rules/{rule_id}/retire", keys[AGENT], {"reason": "x"})
    assert response.status_code == 403


# ---- no role can promote (semantics §3) ---------------------------------------------------------


def _resolve(schema, node):
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _properties(schema, node) -> set[str]:
    node = _resolve(schema, node)
    names = set(node.get("properties", {}))
    for key in ("anyOf", "oneOf", "allOf"):
        for part in node.get(key, []):
            names |= _properties(schema, part)
    if node.get("type") == "array":
        names |= _properties(schema, node.get("items", {}))
    return names


def test_no_operation_of_the_published_schema_can_set_a_rule_state(client):
    schema = client.get(f"{API}/openapi.json").json()
    writes = []
    for path, operations in schema["paths"].items():
        assert "promote" not in path and "state" not in path
        for method, operation in operations.items():
            if method == "get":
                continue
            writes.append(f"{method} {path}")
            for content in operation.get("requestBody", {}).get("content", {}).values():
                assert "state" not in _properties(schema, content["schema"]), (method, path)
            for param in operation.get("parameters", []):
                assert param["name"] != "state", (method, path)
    assert f"post {API}/candidates" in writes


def test_no_url_of_the_site_mentions_promotion():
    def patterns(resolver, prefix=""):
        for entry in resolver.url_patterns:
            if hasattr(entry, "url_patterns"):
                yield from patterns(entry, prefix + str(entry.pattern))
            else:
                yield prefix + str(entry.pattern)

    assert not [p for p in patterns(get_resolver()) if "promot" in p.lower()]


def test_a_candidate_posted_with_a_state_is_refused(client, keys):
    body = {"trigger": "when a", "directive": "do b", "state": "active"}
    response = call(client, "post", f"{API}/candidates", keys[REVIEWER], body)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["line", 1, "state"]
    assert not Rule.objects.exists()


@pytest.mark.parametrize("verb", ["promote", "activate", "approve"])
def test_there_is_no_promote_endpoint_to_find(client, keys, verb):
    candidate("C-1")
    response = call(client, "post", f"{API}/rules/C-1/{verb}", keys[REVIEWER], {})
    assert response.status_code in (404, 405)
    assert Rule.objects.get(pk="C-1").state == "candidate"


# ---- writes --------------------------------------------------------------------------------


def test_posting_candidates_returns_each_with_its_baseline_and_kicks_one_round(client, keys, kicks):
    batch = [
        {"id": "C-7", "trigger": "when a", "directive": "do b", "metric": "task_completion"},
        {"trigger": "when c", "directive": "do d", "scope": "git", "signature": ["tool:git"]},
    ]
    response = call(client, "post", f"{API}/candidates", keys[AGENT], batch)

    assert response.status_code == 200
    body = response.json()
    assert (body["created"], body["unchanged"]) == (2, 0)
    assert body["candidates"][0]["id"] == "C-7"
    assert body["candidates"][0]["baseline"] == {"rate": 1.0, "sessions": 0, "hits": 0}
    assert body["candidates"][1]["author"] == "repair-bot"


def test_a_retire_by_hand_is_journaled_with_the_reviewer_and_reason(client, keys):
    candidate("C-1")
    response = call(client, "post", f"{API}/rules/C-1/retire", keys[REVIEWER], {"reason": "dup"})

    assert response.json()["changed"] is True
    assert response.json()["rule"]["state"] == "retired"
    event = JournalEvent.objects.get(type="rule_retired_by_reviewer")
    assert (event.rule_id, event.actor, event.evidence) == (
        "C-1",
        "rita-token",
        {"from": "candidate", "to": "retired", "reason": "dup", "reviewer": "rita-token"},
    )
    again = call(client, "post", f"{API}/rules/C-1/retire", keys[REVIEWER], {"reason": "dup"})
    assert again.json()["changed"] is False
    assert JournalEvent.objects.filter(type="rule_retired_by_reviewer").count() == 1


def test_requeue_makes_a_new_candidate_version_and_refuses_a_live_rule(client, keys):
    world()
    response = call(client, "post", f"{API}/rules/X-1/requeue", keys[REVIEWER])
    assert response.json()["replaces"] == "X-1"
    assert response.json()["state"] == "candidate"
    conflict = call(client, "post", f"{API}/rules/C-1/requeue", keys[REVIEWER])
    assert conflict.status_code == 409
    assert conflict.json() == {"detail": "cannot requeue a rule that is candidate", "errors": []}


def test_kicking_a_round_names_the_token(client, keys, kicks):
    response = call(client, "post", f"{API}/rounds", keys[REVIEWER])
    assert response.json() == {"queued": True, "detail": "round queued"}
    assert kicks == ["api:rita-token"]
    assert list(
        JournalEvent.objects.filter(type="round_kicked").values_list("actor", "evidence")
    ) == [("rita-token", {"queued": True, "detail": "round queued"})]


def test_reports_arrive_as_json_lines_too(client, keys):
    lines = "\n".join(json.dumps(report(f"s-{i}", T0 + timedelta(minutes=i))) for i in range(3))
    response = call(client, "post", f"{API}/reports", keys[AGENT], lines, "application/x-ndjson")
    assert response.json()["created"] == 3
    assert JournalEvent.objects.filter(type="report_received").first().actor == "repair-bot"


def test_trajectories_follow_import_corpus_semantics(client, keys):
    first = call(client, "post", f"{API}/trajectories", keys[AGENT], [trajectory("F-001")])
    assert first.json() == {"created": 1, "unchanged": 0, "updated": 0, "ids": ["F-001"]}
    changed = [trajectory("F-001", task="another task")]
    conflict = call(client, "post", f"{API}/trajectories", keys[AGENT], changed)
    assert conflict.status_code == 422
    assert conflict.json()["errors"][0]["loc"] == ["line", 1, "id"]
    replaced = call(client, "post", f"{API}/trajectories?replace=true", keys[AGENT], changed)
    assert replaced.json()["updated"] == 1
    events = JournalEvent.objects.filter(type="corpus_imported").order_by("id")
    assert list(events.values_list("actor", "evidence")) == [
        ("repair-bot", {"created": 1, "unchanged": 0, "updated": 0, "replace": False}),
        ("repair-bot", {"created": 0, "unchanged": 0, "updated": 1, "replace": True}),
    ]


def test_a_json_lines_corpus_is_read_as_a_stream_beyond_the_body_limit(client, keys):
    """The body is never loaded whole: a corpus far larger than the request body limit goes
    in, as long as each of its lines is within it (semantics §2)."""
    lines = "".join(json.dumps(trajectory(f"F-{n:03d}")) + "\n" for n in range(60))
    assert len(lines) > 16 * 1024
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024):
        response = call(
            client, "post", f"{API}/trajectories", keys[AGENT], lines, "application/x-ndjson"
        )
    assert response.status_code == 200, response.content
    assert response.json()["created"] == 60
    assert len(response.json()["ids"]) == 60


def test_a_streamed_corpus_with_a_bad_last_line_writes_nothing(client, keys):
    lines = "".join(json.dumps(trajectory(f"F-{n:03d}")) + "\n" for n in range(30))
    bad = json.dumps(trajectory("F-999", task="a\u0000b"))
    response = call(
        client, "post", f"{API}/trajectories", keys[AGENT], lines + bad, "application/x-ndjson"
    )
    assert response.status_code == 422
    assert response.json()["errors"] == [
        {"loc": ["line", 31, "task"], "msg": "a string contains a NUL character (\\u0000)"}
    ]
    assert not JournalEvent.objects.filter(type="corpus_imported").exists()
    assert not Trajectory.objects.exists()


def test_a_streamed_line_over_the_limit_is_refused_by_number(client, keys):
    lines = (
        json.dumps(trajectory("F-001")) + "\n" + json.dumps(trajectory("F-002", task="x" * 2048))
    )
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024):
        response = call(
            client, "post", f"{API}/trajectories", keys[AGENT], lines, "application/x-ndjson"
        )
    assert response.status_code == 413
    assert response.json() == {
        "detail": "line 2 is longer than the limit of 1024 bytes",
        "errors": [{"loc": ["line", 2], "msg": "too long"}],
    }
    assert not Trajectory.objects.exists()


# ---- errors --------------------------------------------------------------------------------


def test_every_bad_line_is_reported_and_nothing_is_written(client, keys):
    batch = [report("s-1", T0), {"session_id": "s-2"}, {"at": "yesterday"}]
    response = call(client, "post", f"{API}/reports", keys[AGENT], batch)

    assert response.status_code == 422
    assert response.json() == {
        "detail": "3 error(s), nothing written",
        "errors": [
            {"loc": ["line", 2, "at"], "msg": "is required (ISO 8601)"},
            {
                "loc": ["line", 3, "session_id"],
                "msg": "is required: a string of at most 128 characters",
            },
            {"loc": ["line", 3, "at"], "msg": "'yesterday' is not an ISO 8601 date-time"},
        ],
    }
    assert not JournalEvent.objects.filter(type="report_received").exists()


def test_one_report_reading_an_unknown_rule_is_a_422_naming_it_with_nothing_written(
    client, keys, django_capture_on_commit_callbacks
):
    # One report alone is one statement on PostgreSQL; the lines are named all the same, and
    # no round is asked for.
    body = report("s-1", T0, rules_read=["NOPE"])
    with django_capture_on_commit_callbacks() as callbacks:
        response = call(client, "post", f"{API}/reports", keys[AGENT], body)

    assert response.status_code == 422
    assert response.json() == {
        "detail": "1 error(s), nothing written",
        "errors": [{"loc": ["line", 1, "rules_read"], "msg": "unknown rule 'NOPE'"}],
    }
    assert not JournalEvent.objects.filter(type="report_received").exists()
    assert not RuleRead.objects.exists() and callbacks == []


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        ("{not json", "application/json", 400),
        ("", "application/json", 400),
        ("a,b\n1,2", "text/csv", 415),
        ('"just a string"', "application/json", 422),
        ("[[[[[[[[[[" * 20000, "application/json", 400),
    ],
)
def test_bad_bodies_are_json_errors_not_500s(client, keys, body, content_type, status):
    response = call(client, "post", f"{API}/candidates", keys[AGENT], body, content_type)
    assert response.status_code == status
    assert set(response.json()) == {"detail", "errors"}


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=4096)
def test_a_body_over_the_size_limit_is_413(client, keys):
    big = [{"trigger": "when " + "x" * 5000, "directive": "do y"}]
    response = call(client, "post", f"{API}/candidates", keys[AGENT], big)
    assert response.status_code == 413
    assert response.json()["detail"] == "the request body is larger than the limit"


@pytest.mark.parametrize(
    ("path", "status", "loc"),
    [
        ("/rules/NOPE", 404, None),
        ("/rules/NOPE/gate", 404, None),
        ("/rules?state=promoted", 422, ["query", "state"]),
        ("/rules?limit=0", 422, ["query", "limit"]),
        ("/rules?cursor=!!!", 400, ["query", "cursor"]),
        ("/journal?cursor=WzFd", 400, ["query", "cursor"]),
        ("/rounds?cursor=bm9wZQ", 400, ["query", "cursor"]),
        ("/packs?format=docx", 422, ["query", "format"]),
        ("/packs?format=agents_md", 422, ["query", "scope"]),
        ("/packs?state=promoted", 422, ["query", "state"]),
    ],
)
def test_bad_reads_say_what_is_wrong(client, keys, path, status, loc):
    response = call(client, "get", API + path, keys[REVIEWER])
    assert response.status_code == status, response.content
    if loc:
        assert response.json()["errors"][0]["loc"] == loc


def test_retiring_without_a_reason_names_the_field(client, keys):
    candidate("C-1")
    for body in ({"reason": "  "}, {}):
        response = call(client, "post", f"{API}/rules/C-1/retire", keys[REVIEWER], body)
        assert response.status_code == 422
        assert response.json()["errors"][0]["loc"][-1] == "reason"


def test_a_missing_token_is_401_with_a_bearer_challenge(client):
    response = client.get(f"{API}/rules")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"


# ---- reads ---------------------------------------------------------------------------------


def test_the_rule_tool_narrows_active_rules_but_returns_every_candidate(client, keys):
    # semantics §4–§5: the query may narrow active rules, never candidates; the read is recorded.
    world()
    candidate("C-2", trigger="when docker build fails", directive="prune", signature=[])
    response = call(
        client, "get", f"{API}/scopes/git/rules?session=s-9&query=lockfile", keys[AGENT]
    )

    rules = response.json()["rules"]
    assert [(r["id"], r["state"]) for r in rules] == [
        ("A-1", "active"),
        ("C-1", "candidate"),
        ("C-2", "candidate"),
    ]
    assert set(RuleRead.objects.values_list("session_id", "rule_id", "via")) == {
        ("s-9", "A-1", "api"),
        ("s-9", "C-1", "api"),
        ("s-9", "C-2", "api"),
    }
    narrowed = call(client, "get", f"{API}/scopes/git/rules?query=docker", keys[AGENT])
    assert [r["id"] for r in narrowed.json()["rules"]] == ["C-1", "C-2"]


def test_the_scope_file_lists_active_then_provisional_rules(client, keys):
    world()
    text = call(client, "get", f"{API}/scopes/git", keys[AGENT]).json()["text"]
    assert text.index("[A-1]") < text.index("Provisional rules (under evaluation)")
    assert text.index("Provisional rules") < text.index("[C-1]")


def test_a_rule_comes_with_its_trial_evidence_and_journal(client, keys):
    world()
    body = call(client, "get", f"{API}/rules/A-1", keys[AGENT]).json()
    assert body["rule"]["state"] == "active"
    assert body["evidence"] == {"from": "candidate", "to": "active", "reason": "trial"}
    assert [e["type"] for e in body["journal"]] == ["rule_added", "rule_promoted"]
    assert body["journal_truncated"] is False
    assert body["trial"]["needed"] == 5
    assert body["extraction"] is None  # A-1 has no source case to score against


def test_extraction_leads_with_score_and_verdict_and_labels_each_component(client, keys):
    # semantics §12: the calibrated score decides; the similarities are components only.
    make_rule("R-F001", source_case="F-001", comparison=F001_EXTRACTION)
    shown = call(client, "get", f"{API}/rules/R-F001/extraction", keys[AGENT]).json()
    assert list(shown)[:3] == ["score", "verdict", "why"]
    assert (shown["score"], shown["verdict"], shown["calibrated"]) == (0.97, "match", True)
    assert shown["components"] == {
        "semantic": {
            "label": "semantic similarity",
            "value": 0.88,
            "meaning": F001_EXTRACTION["components"]["semantic"],
        },
        "signature_agreement": {
            "label": "signature agreement",
            "value": 1.0,
            "meaning": F001_EXTRACTION["components"]["signature_agreement"],
        },
        "token_f1": {
            "label": "token-F1",
            "value": 0.28,
            "meaning": F001_EXTRACTION["components"]["token_f1"],
        },
    }
    assert "semantic" not in shown  # never beside the score as if it were a verdict
    assert shown["trigger"]["diff"][1] == ["delete", "git"]
    detail = call(client, "get", f"{API}/rules/R-F001", keys[AGENT]).json()
    assert detail["extraction"] == shown


def test_a_comparison_stored_before_calibration_takes_the_comparators_meanings(client, keys):
    from comparison.compare import COMPONENTS

    make_rule("R-F001", source_case="F-001", comparison=F001_EXTRACTION_BEFORE_CALIBRATION)
    shown = call(client, "get", f"{API}/rules/R-F001/extraction", keys[AGENT]).json()
    assert (shown["score"], shown["calibrated"]) == (0.81, False)
    assert shown["score_meaning"] == COMPONENTS["score"]
    assert {name: c["meaning"] for name, c in shown["components"].items()} == {
        name: COMPONENTS[name] for name in ("semantic", "signature_agreement", "token_f1")
    }


def test_rules_page_through_a_cursor_in_a_fixed_number_of_queries(
    client, keys, django_assert_max_num_queries
):
    for n in range(7):
        candidate(f"C-{n}", trigger=f"when case {n} fails", directive="do it", signature=[])
    seen, cursor = [], ""
    while True:
        with django_assert_max_num_queries(3):
            page = call(client, "get", f"{API}/rules?limit=3&cursor={cursor}", keys[AGENT]).json()
        seen += [r["id"] for r in page["items"]]
        if not (cursor := page["next_cursor"]):
            break
    assert seen == [f"C-{n}" for n in range(7)]
    newest = call(client, "get", f"{API}/rules?limit=2&order=-recorded", keys[AGENT]).json()
    assert [r["id"] for r in newest["items"]] == ["C-6", "C-5"]


def test_rule_filters_are_the_dashboards(client, keys):
    world()

    def ids(q):
        return [
            r["id"] for r in call(client, "get", f"{API}/rules?{q}", keys[AGENT]).json()["items"]
        ]

    assert ids("state=active") == ["A-1"]
    assert ids("q=lockfile") == ["A-1"]
    assert ids("pending_reason=not_attempted") == ["C-1"]


def test_the_journal_pages_oldest_first_and_filters(client, keys, django_assert_max_num_queries):
    world()
    everything = call(client, "get", f"{API}/journal?limit=500", keys[AGENT]).json()["items"]
    seen, cursor = [], ""
    while True:
        with django_assert_max_num_queries(3):
            page = call(client, "get", f"{API}/journal?limit=2&cursor={cursor}", keys[AGENT])
        seen += page.json()["items"]
        if not (cursor := page.json()["next_cursor"]):
            break
    assert seen == everything
    assert [(e["at"], e["id"]) for e in seen] == sorted((e["at"], e["id"]) for e in seen)
    x1 = call(client, "get", f"{API}/journal?rule=X-1", keys[AGENT]).json()["items"]
    assert [(e["type"], e["actor"]) for e in x1] == [
        ("rule_added", "repair-bot"),
        ("rule_retired_by_reviewer", "rita"),
    ]


# ---- packs over HTTP -----------------------------------------------------------------------


def test_a_reviewer_exports_and_imports_packs_over_http(client, keys):
    world()
    exported = call(client, "get", f"{API}/packs?format=json", keys[REVIEWER])
    assert exported["Content-Type"] == "application/json; charset=utf-8"
    assert [r["id"] for r in exported.json()["rules"]] == ["A-1"]

    document = exported.json()
    document["rules"][0]["directive"] = "delete the lockfile and push"
    tampered = call(client, "post", f"{API}/packs", keys[REVIEWER], document)
    assert tampered.status_code == 422
    assert tampered.json()["errors"] == [{"loc": ["pack", "checksum"], "msg": CHECKSUM_MISMATCH}]

    yaml_pack = call(client, "get", f"{API}/packs?state=retired", keys[REVIEWER]).content
    imported = call(client, "post", f"{API}/packs", keys[REVIEWER], yaml_pack, "application/yaml")
    # X-1 is already here with the same text: nothing to record.
    assert imported.json() == {"created": 0, "unchanged": 1, "updated": 0, "rules": []}
    assert yaml.safe_load(yaml_pack)["rules"][0]["state"] == "retired"


def test_agent_files_come_as_markdown(client, keys):
    world()
    response = call(client, "get", f"{API}/packs?format=cursor_mdc&scope=git", keys[REVIEWER])
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response.content.decode().startswith("---\ndescription:")


def test_the_api_docs_are_served_without_any_cdn(client):
    page = client.get(f"{API}/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in page
    assert "cdn" not in page.lower() and "https://" not in page


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/candidates", '{"trigger": "when \\u0000", "directive": "d"}'),
        ("post", "/reports", '{"session_id": "s\\u0000", "at": "2026-01-01T00:00:00Z"}'),
        ("post", "/packs", '{"pack_version": 1, "name": "\\u0000"}'),
        ("get", "/rules?q=%00", None),
        ("get", "/rules/R%00", None),
        ("get", "/scopes/git/rules?session=s%00", None),
        ("get", "/scopes/a%00b", None),
        ("get", "/journal?rule=%00", None),
    ],
)
def test_nul_characters_are_refused_before_the_database_sees_them(client, keys, method, path, body):
    # PostgreSQL cannot store NUL: it must be a 422 on every database, never a 500.
    response = call(client, method, API + path, keys[REVIEWER], body)
    assert response.status_code == 422, response.content


def test_pack_export_takes_repeated_scopes_and_states(client, keys):
    world()
    candidate("C-9", scope="ci", trigger="when ci is slow", directive="cache deps", signature=[])
    path = f"{API}/packs?format=json&state=candidate&state=active&scope=git&scope=ci"
    document = call(client, "get", path, keys[REVIEWER]).json()
    assert document["selection"] == {"scopes": ["ci", "git"], "states": ["active", "candidate"]}
    assert [r["id"] for r in document["rules"]] == ["C-9", "C-1", "A-1"]
