"""One error shape for every API error, whatever raised it, with DEBUG off; every unhandled
error is logged to stderr with the request id the response carries."""

import io
import logging

import pytest
from django.db import OperationalError
from django.db.backends.utils import CursorWrapper

from lifecycle.services.tokens import token_create

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture
def stderr_log(settings):
    """What the console handler (stderr, in settings.LOGGING) writes during the test."""
    assert settings.LOGGING["handlers"]["console"]["stream"] == "ext://sys.stderr"
    (handler,) = [
        h for h in logging.getLogger("django.request").handlers if type(h) is logging.StreamHandler
    ]
    assert handler in logging.getLogger("cauterweb").handlers
    written = io.StringIO()
    previous = handler.setStream(written)
    yield written
    handler.setStream(previous)


@pytest.fixture
def agent():
    return {"HTTP_AUTHORIZATION": f"Bearer {token_create(name='bot', role='agent', actor='t').key}"}


def assert_shape(response, status: int) -> dict:
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"detail", "errors"} and isinstance(body["detail"], str)
    return body


@pytest.mark.parametrize("path", [f"{API}/no-such-thing", f"{API}/rules/x/y/z/w", "/api/v2/rules"])
def test_an_unknown_path_is_a_json_404(client, agent, path):
    assert_shape(client.get(path, **agent), 404)


def test_a_method_the_path_does_not_take_is_a_json_405(client, agent):
    response = client.delete(f"{API}/rules", **agent)
    assert_shape(response, 405)
    assert "GET" in response["Allow"]


def test_a_body_over_the_limit_is_a_json_413(client, agent, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    body = "[" + ",".join(['{"session_id": "s", "at": "2026-11-01T12:00:00Z"}'] * 100) + "]"
    response = client.post(f"{API}/reports", body, content_type="application/json", **agent)
    assert_shape(response, 413)


def test_a_validation_error_names_the_field(client, agent):
    body = assert_shape(client.get(f"{API}/rules", {"limit": "many"}, **agent), 422)
    assert body["errors"][0]["loc"] == ["query", "limit"]


def test_a_crash_is_a_json_500_logged_with_its_request_id(client, agent, monkeypatch, stderr_log):
    def broken(**kwargs):
        raise RuntimeError("the bug we did not foresee")

    monkeypatch.setattr("lifecycle.selectors.rules.rules_page", broken)
    response = client.get(f"{API}/rules", **agent, HTTP_X_REQUEST_ID="probe-0001")
    body = assert_shape(response, 500)
    assert response["X-Request-ID"] == "probe-0001"
    assert "probe-0001" in body["detail"]
    logged = stderr_log.getvalue()
    assert "[probe-0001]" in logged and "RuntimeError: the bug we did not foresee" in logged


def test_a_database_outage_is_a_json_503(client, agent, monkeypatch):
    headers = dict(agent)

    def down(self, *args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(CursorWrapper, "execute", down)
    body = assert_shape(client.get(f"{API}/rules", **headers), 503)
    assert "database is unavailable" in body["detail"]


def test_a_nul_escape_is_refused_but_the_literal_text_backslash_u0000_is_not(client, agent):
    base = {"trigger": "when the log shows {}", "directive": "quote the log line"}
    nul = '{"trigger": "when \\u0000 appears", "directive": "stop"}'
    assert_shape(client.post(f"{API}/candidates", nul, "application/json", **agent), 422)
    literal = {**base, "trigger": "when the log shows \\u0000 verbatim"}
    response = client.post(f"{API}/candidates", literal, "application/json", **agent)
    assert response.status_code == 200
    assert response.json()["candidates"][0]["trigger"] == "when the log shows \\u0000 verbatim"


def test_every_response_carries_a_request_id_and_a_bad_one_is_replaced(client, agent):
    response = client.get(f"{API}/rules", **agent, HTTP_X_REQUEST_ID="x\ny")
    assert response.status_code == 200
    assert len(response["X-Request-ID"]) == 32 and "\n" not in response["X-Request-ID"]


def test_a_dashboard_crash_is_logged_with_its_request_id(viewer_client, monkeypatch, stderr_log):
    def broken(**kwargs):
        raise RuntimeError("dashboard bug")

    monkeypatch.setattr("lifecycle.selectors.rules.latest_transitions", broken)
    viewer_client.raise_request_exception = False
    response = viewer_client.get("/", HTTP_X_REQUEST_ID="probe-0002")
    assert response.status_code == 500
    assert response["X-Request-ID"] == "probe-0002"
    logged = stderr_log.getvalue()
    assert "[probe-0002]" in logged and "RuntimeError: dashboard bug" in logged


@pytest.mark.parametrize(
    "path",
    [
        f"{API}/rules/%00",
        f"{API}/rules/a%00/retire",
        f"{API}/scopes/%00/rules",
        f"{API}/scopes/%00",
        f"{API}/rules?q=%00",
        f"{API}/journal?rule=%00",
        f"{API}/scopes/git/rules?session=%00",
    ],
)
def test_a_nul_in_an_api_address_is_a_json_4xx(client, agent, path):
    method = client.post if path.endswith("/retire") else client.get
    response = method(path, **agent)
    assert 400 <= response.status_code < 500
    assert_shape(response, response.status_code)


@pytest.mark.django_db(False)
def test_the_operations_share_one_error_model_and_document_every_error_status():
    """ninja would build a response model per status per operation (~200 at import); the
    operations share one per wrapped type, and the schema still documents each error status of
    each operation as the one error shape."""
    from cauterweb.api import api
    from cauterweb.api.protocol import ERRORS

    operations = [
        operation
        for _, router in api._routers
        for view in router.path_operations.values()
        for operation in view.operations
    ]
    errors = [(op, code) for op in operations for code in ERRORS if code in op.response_models]
    assert len({op for op, _ in errors}) > 20
    assert len({id(op.response_models[code]) for op, code in errors}) == 1
    schema = api.get_openapi_schema(path_prefix=f"{API}/")
    documented = [
        operation["responses"][code]["content"]["application/json"]["schema"]
        for operations_of_path in schema["paths"].values()
        for operation in operations_of_path.values()
        for code in ERRORS
        if code in operation["responses"]
    ]
    assert len(documented) == len(errors)
    assert all(entry == {"$ref": "#/components/schemas/ErrorOut"} for entry in documented)
