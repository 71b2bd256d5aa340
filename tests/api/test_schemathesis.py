"""Property-based robustness of the API: schemathesis generates requests from the
published OpenAPI schema and sends them in-process, with an agent and a reviewer token.
Whatever it sends: no 5xx, and every response matches the schema it documents.

Bounded so CI stays fast: `MAX_EXAMPLES` per operation, no shrinking beyond Hypothesis'
defaults, and round kicks stop at the broker (the engine has its own tests)."""

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

from lifecycle.schemas import JSONL_TYPES
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
