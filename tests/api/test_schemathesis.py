"""Property-based robustness of the API: schemathesis generates requests from the
published OpenAPI schema and sends them in-process, with an agent and a reviewer token.
Whatever it sends: no 5xx, and every response matches the schema it documents.

Bounded so CI stays fast: `MAX_EXAMPLES` per operation, no shrinking beyond Hypothesis'
defaults, and round kicks stop at the broker (the engine has its own tests)."""

import json

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from cauterweb.api.schemas import JSONL_TYPES
from lifecycle.services.tokens import token_create
from tests.builders import candidate

MAX_EXAMPLES = 20
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

# JSON Lines bodies are documented as text; send them as text so they are fuzzed too.
schemathesis.serializer.alias(list(JSONL_TYPES), "text/plain")

# The /replay/ operations serve replay harnesses with HMAC-signed one-time tokens, not API
# tokens; the engine's tests cover them.
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application()).exclude(
    path_regex="^/api/v1/replay/"
)


@pytest.fixture
def in_process(db):
    """Requests share the test's transaction, as with Django's own test client: a finished
    request must not close the connection (it would, on PostgreSQL)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def bearers(in_process, monkeypatch):
    from replay.tasks import round_run_task

    monkeypatch.setattr(round_run_task, "delay", lambda **kwargs: None)
    candidate("C-1")
    return [
        {"Authorization": f"Bearer {token_create(name=n, role=n, actor='test').key}"}
        for n in ("agent", "reviewer")
    ]


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
def test_the_api_never_fails_and_always_answers_as_documented(case, bearers):
    for headers in bearers:
        # call_and_validate raises on any failed check (5xx, schema mismatch); the explicit
        # assert keeps the contract visible where it is tested.
        response = case.call_and_validate(headers=headers, checks=CHECKS)
        assert response.status_code < 500


# Strings and numbers Python's json takes and storage cannot, spliced into generated bodies.
AWKWARD = ["s\ud800x", "\udfff", "a\x00b", float("nan"), float("inf"), float("-inf"), 10**30]
AWKWARD_LINES = [
    '{"id": "s\\ud800x", "session_id": "s\\ud800x", "trigger": "s\\ud800x"}',
    '{"id": "X", "metrics": {"coherence": NaN}, "n": Infinity}',
    '{"id": "X", "n": 1e400, "m": ' + "9" * 400 + "}",
    "[" * 5000 + "]" * 5000,
    '{"id": "X\\u0000"}',
]


def _spliced(body, value):
    """The generated body with its first string or number leaf replaced by `value`; None when
    it holds neither."""
    if isinstance(body, list):
        for i, item in enumerate(body):
            changed = _spliced(item, value)
            if changed is not None:
                return [*body[:i], changed, *body[i + 1 :]]
        return None
    if isinstance(body, dict):
        for key, item in body.items():
            if isinstance(item, str | int | float) and not isinstance(item, bool):
                return {**body, key: value}
            changed = _spliced(item, value)
            if changed is not None:
                return {**body, key: changed}
    return None


@schema.include(method="POST").parametrize()
@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
def test_awkward_strings_and_numbers_are_refused_as_documented(case, bearers):
    """Whatever the generated body, the same body with a lone surrogate, a NUL, NaN, ±Infinity
    or a huge number in it (or, for text bodies, such a line, or one nested 5,000 deep) is a
    documented 4xx — never a 5xx, never stored as is."""
    if isinstance(case.body, str):
        bodies = [f"{case.body}\n{line}\n" for line in AWKWARD_LINES]
    else:
        # Serialized here: a client library refuses to write NaN; a careless client does not.
        spliced = (_spliced(case.body, value) for value in AWKWARD)
        bodies = [json.dumps(b).encode() for b in spliced if b is not None]
    for body in bodies:
        case.body = body
        response = case.call_and_validate(headers=bearers[1], checks=CHECKS)
        # Refused: a 4xx, or a pack preview (dry_run) that answers with its errors.
        refused = 400 <= response.status_code < 500 or response.json().get("ok") is False
        assert refused, (body, response.status_code, response.text)
