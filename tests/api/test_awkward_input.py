"""The API on awkward input: strings and numbers Python's json takes but storage cannot
(lone surrogates, NUL, NaN, Infinity, huge numbers), nesting 5,000 deep, invalid UTF-8, times
outside 1970 .. 2200 and texts over their limits. Each is a 4xx in the one error shape naming
where the value sits, and nothing is stored."""

import io
import json

import pytest

from lifecycle import jsonsafe
from lifecycle.models import JournalEvent, Report, Rule, Trajectory
from lifecycle.services.tokens import token_create
from tests.builders import T0, candidate, report, trajectory

pytestmark = pytest.mark.django_db
API = "/api/v1"
JSONL = "application/x-ndjson"
ITEMS = {
    "/reports": report("s-1", T0),
    "/candidates": {"trigger": "when git push fails", "directive": "pull first", "scope": "git"},
    "/trajectories": trajectory("F-001"),
}
# (what, a JSON value spliced into an item as its "meta"/"extra" field, reason words)
AWKWARD_VALUES = [
    ("lone surrogate", '"s\\ud800x"', "lone surrogate"),
    ("low surrogate", '"\\udc00"', "lone surrogate"),
    ("escaped NUL", '"a\\u0000b"', "NUL"),
    ("NaN", "NaN", "NaN"),
    ("Infinity", "Infinity", "Infinity"),
    ("-Infinity", "-Infinity", "Infinity"),
    ("float overflow", "1e400", "out of range"),
    ("huge integer", "1" + "0" * 400, "out of range"),
]
TABLES = (Trajectory, Rule, Report, JournalEvent)


@pytest.fixture
def headers():
    agent = token_create(name="repair-bot", role="agent", actor="test").key
    reviewer = token_create(name="rita-token", role="reviewer", actor="test").key
    return {
        "agent": {"HTTP_AUTHORIZATION": f"Bearer {agent}"},
        "reviewer": {"HTTP_AUTHORIZATION": f"Bearer {reviewer}"},
    }


def stored() -> list[int]:
    return [model.objects.count() for model in TABLES]


def with_value(path: str, field: str, raw: str) -> str:
    """The item of `path` as JSON text with `field` set to the raw JSON `raw`."""
    text = json.dumps({k: v for k, v in ITEMS[path].items() if k != field})
    return text[:-1] + f', "{field}": {raw}}}'


def field_of(path: str) -> str:
    # A field each endpoint reads as text, so the value reaches validation if json lets it.
    return {"/reports": "session_id", "/candidates": "trigger", "/trajectories": "task"}[path]


def post(client, path, body, content_type, headers):
    return client.post(f"{API}{path}", body, content_type=content_type, **headers)


@pytest.mark.parametrize("path", sorted(ITEMS))
@pytest.mark.parametrize("what, raw, words", AWKWARD_VALUES)
def test_a_json_body_with_an_awkward_value_is_a_422_naming_it(
    client, headers, path, what, raw, words
):
    before = stored()
    good = json.dumps(ITEMS[path])
    body = f"[{good}, {with_value(path, field_of(path), raw)}]"
    response = post(client, path, body, "application/json", headers["agent"])
    assert response.status_code == 422, response.content
    error = response.json()
    assert words in error["detail"]
    loc = error["errors"][0]["loc"]
    if what in ("lone surrogate", "low surrogate", "escaped NUL"):
        assert loc == ["line", 2, field_of(path)]
    assert stored() == before


@pytest.mark.parametrize("path", sorted(ITEMS))
@pytest.mark.parametrize("what, raw, words", AWKWARD_VALUES)
def test_a_json_lines_body_with_an_awkward_value_names_its_line(
    client, headers, path, what, raw, words
):
    before = stored()
    body = json.dumps(ITEMS[path]) + "\n" + with_value(path, field_of(path), raw) + "\n"
    response = post(client, path, body, JSONL, headers["agent"])
    assert response.status_code == 422, response.content
    errors = response.json()["errors"]
    assert [e["loc"][:2] for e in errors] == [["line", 2]]
    assert words in errors[0]["msg"]
    assert stored() == before


@pytest.mark.parametrize("path", sorted(ITEMS))
@pytest.mark.parametrize(
    "body, content_type, status",
    [
        (b"[" * 5000 + b"]" * 5000, "application/json", 400),
        (b'{"a": ' * 5000 + b"1" + b"}" * 5000, "application/json", 400),
        (b'{"session_id": "\xff\xfe"}', "application/json", 400),
        (b"{}\n" + b"[" * 5000 + b"]" * 5000, JSONL, 422),
        (b"{}\n" + b'{"session_id": "caf\xc3"}', JSONL, 422),
        (b'{"trigger": "x"}\x00', "application/json", 422),
    ],
)
def test_bodies_too_deep_or_not_utf8_are_4xx_never_500(
    client, headers, path, body, content_type, status
):
    before = stored()
    response = post(client, path, body, content_type, headers["agent"])
    assert response.status_code == status, response.content
    assert set(response.json()) == {"detail", "errors"}
    assert stored() == before


@pytest.mark.parametrize(
    "at",
    [
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:00:00-05:00",
        "1969-12-31T23:59:59Z",
        "2200-01-01T00:00:01Z",
    ],
)
def test_a_report_time_outside_the_range_is_a_422_and_the_session_still_works(client, headers, at):
    response = post(
        client, "/reports", {**report("s-1", T0), "at": at}, "application/json", headers["agent"]
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["line", 1, "at"]
    assert "outside the accepted range" in response.json()["errors"][0]["msg"]
    assert not Report.objects.exists()
    later = post(client, "/reports", report("s-1", T0), "application/json", headers["agent"])
    assert later.status_code == 200
    assert later.json()["created"] == 1


@pytest.mark.parametrize(
    "path, item, field",
    [
        ("/candidates", {"trigger": "w" * 2_001, "directive": "d"}, "trigger"),
        ("/candidates", {"trigger": "w", "directive": "d" * 25_000_000}, "directive"),
        ("/candidates", {"trigger": "w", "directive": "d", "scope": "s" * 129}, "scope"),
        ("/candidates", {"trigger": "w", "directive": "d", "tags": ["t"] * 33}, "tags"),
        ("/candidates", {"trigger": "w", "directive": "d", "tags": ["t" * 65]}, "tags"),
        ("/trajectories", trajectory("F-002", task="t" * 20_001), "task"),
        ("/trajectories", trajectory("F-002", meta={"x": "y" * 70_000}), "meta"),
        ("/trajectories", trajectory("F-002", steps=[{}] * 2_001), "steps"),
        ("/reports", {**report("s-2", T0), "rules_read": ["C-1"] * 1_001}, "rules_read"),
    ],
)
def test_a_text_over_its_limit_is_a_422_with_the_field(client, headers, path, item, field):
    before = stored()
    response = post(client, path, [item], "application/json", headers["agent"])
    assert response.status_code == 422, response.content[:300]
    locs = [e["loc"] for e in response.json()["errors"]]
    assert ["line", 1, field] in locs or ["body", field] in locs, locs
    assert "limit" in response.content.decode()
    assert stored() == before


def test_a_retire_reason_over_its_limit_or_with_a_surrogate_is_refused(client, headers):
    candidate("C-1")
    url = f"{API}/rules/C-1/retire"
    long = client.post(url, {"reason": "r" * 2_001}, "application/json", **headers["reviewer"])
    assert long.status_code == 422
    assert long.json()["errors"][0]["loc"][-1] == "reason"
    surrogate = '{"reason": "bad \\ud800"}'
    response = client.post(url, surrogate, "application/json", **headers["reviewer"])
    assert response.status_code == 400
    assert set(response.json()) == {"detail", "errors"}
    assert Rule.objects.get(pk="C-1").state == "candidate"


PACK_RULE = {"id": "P-1", "trigger": "when x", "directive": "do y", "scope": "git"}


@pytest.mark.parametrize(
    "body, content_type",
    [
        ('{"pack_version": 1, "rules": [{"trigger": "s\\ud800x"}]}', "application/json"),
        ('{"pack_version": NaN, "rules": []}', "application/json"),
        ('{"pack_version": 1e999, "rules": []}', "application/json"),
        ('{"pack_version": 1, "name": "a\\u0000"}', "application/json"),
        ('pack_version: 1\nname: "s\\ud800x"\nrules: []\n', "application/yaml"),
        ("pack_version: .nan\nrules: []\n", "application/yaml"),
        ("pack_version: .inf\nrules: []\n", "application/yaml"),
        ("pack_version: 1" + "0" * 40 + "\nrules: []\n", "application/yaml"),
        ("pack_version: 1\nrules: " + "[" * 200 + "]" * 200 + "\n", "application/yaml"),
    ],
)
@pytest.mark.parametrize("dry_run", ["true", "false"])
def test_a_pack_with_awkward_values_is_refused_with_its_path(
    client, headers, body, content_type, dry_run
):
    before = stored()
    response = client.post(
        f"{API}/packs?dry_run={dry_run}", body, content_type=content_type, **headers["reviewer"]
    )
    # A dry run answers with the errors it found; an import refuses with them.
    assert response.status_code == (200 if dry_run == "true" else 422), response.content
    answer = response.json()
    errors = answer["errors"]
    assert errors and all(set(e) == {"loc", "msg"} for e in errors)
    if dry_run == "true":
        assert (answer["ok"], answer["pack_version"], answer["name"]) == (False, None, "")
    # The answer itself is strict JSON: nothing of the bad value is echoed back.
    assert jsonsafe.loads(response.content) == answer
    assert stored() == before


def chunked(client, body: bytes, *, terminated: bool, headers):
    """A POST with Transfer-Encoding: chunked and no Content-Length, as gunicorn hands it on
    (de-chunked, `wsgi.input_terminated`) or as a server that cannot de-chunk does."""
    environ = {
        "CONTENT_LENGTH": "",
        "CONTENT_TYPE": JSONL,
        "HTTP_TRANSFER_ENCODING": "chunked",
        "wsgi.input": io.BytesIO(body),
        **({"wsgi.input_terminated": True} if terminated else {}),
        **headers,
    }
    return client.generic("POST", f"{API}/reports", b"", **environ)


def test_a_chunked_body_is_read_whole(client, headers):
    body = "".join(json.dumps(report(f"s-{i}", T0)) + "\n" for i in range(3)).encode()
    response = chunked(client, body, terminated=True, headers=headers["agent"])
    assert response.status_code == 200, response.content
    assert response.json()["created"] == 3
    assert Report.objects.count() == 3


def test_a_chunked_body_over_the_limit_is_a_413(client, headers, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    body = (json.dumps(report("s-1", T0)) + "\n").encode() * 20
    response = chunked(client, body, terminated=True, headers=headers["agent"])
    assert response.status_code == 413
    assert not Report.objects.exists()


def test_a_chunked_body_the_server_cannot_delimit_is_a_411_not_an_empty_batch(client, headers):
    body = (json.dumps(report("s-1", T0)) + "\n").encode()
    response = chunked(client, body, terminated=False, headers=headers["agent"])
    assert response.status_code == 411
    assert set(response.json()) == {"detail", "errors"}
    assert not Report.objects.exists()


@pytest.mark.parametrize(
    "body, content_type, status",
    [
        ('{"resourceSpans": [{"name": "s\\ud800x"}]}', "application/json", 422),
        ('{"resourceSpans": [], "x": NaN}', "application/json", 422),
        ("[" * 5000 + "]" * 5000, "application/json", 400),
        ('{"resourceSpans": []}\n' + "[" * 5000 + "]" * 5000, JSONL, 422),
        ('{"resourceSpans": []}\n{"x": "\\u0000"}', JSONL, 422),
    ],
)
def test_trace_bodies_are_read_as_strictly_as_batches(client, headers, body, content_type, status):
    before = stored()
    response = post(client, "/traces", body, content_type, headers["agent"])
    assert response.status_code == status, response.content[:300]
    assert set(response.json()) == {"detail", "errors"}
    assert stored() == before
