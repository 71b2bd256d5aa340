"""The API's HTTP side, the same for every operation: who is calling (a bearer token, or a
dashboard session for reads), how a request body is read (strictly, one item, an array or JSON
Lines), and the one error shape every error under /api/ speaks. The routers hold only their
operations; what they share about HTTP is here.
"""

import json
import logging
import re
from collections.abc import Iterator
from functools import partial
from http import HTTPStatus

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.operation import Operation
from ninja.parser import Parser
from ninja.security import HttpBearer, django_auth

from cauterweb.middleware import current_request_id
from lifecycle import jsonsafe
from lifecycle.cursor import InvalidCursor
from lifecycle.models import ApiToken, TokenRole
from lifecycle.selectors.rules import RuleNotFound
from lifecycle.services.packs import InvalidSelection, PackRejected
from lifecycle.services.review import BadAction, ItemClosed, ReviewItemNotFound
from lifecycle.services.tokens import token_for_key
from lifecycle.states import Actor, NotAllowed, WrongState
from lifecycle.validation import FilterError, ImportRejected, InvalidRule, numbered, read_jsonl
from traces.model import TraceRejected

from .schemas import JSONL_TYPES, ErrorOut

# ---- who is calling -----------------------------------------------------------------------
# Who is calling the API: a bearer token of role `agent` or `reviewer`, or a
# dashboard session for reads. No role can promote: promotion has no endpoint at all (semantics §3).


class Forbidden(Exception):
    """Authenticated, but this role may not do this (HTTP 403)."""


class TokenAuth(HttpBearer):
    """`Authorization: Bearer <token>`; with `role="reviewer"` an agent token gets 403."""

    def __init__(self, role: str | None = None):
        super().__init__()
        self.role = role

    def authenticate(self, request, token: str) -> ApiToken | None:
        found = token_for_key(token.strip())
        if found is None:
            return None
        if self.role == TokenRole.REVIEWER and found.role != TokenRole.REVIEWER:
            raise Forbidden(f"token {found.name!r} has role {found.role}; this needs a reviewer")
        return found


any_token = TokenAuth()
reviewer_token = TokenAuth(role=TokenRole.REVIEWER)
# Reads also accept a logged-in dashboard user (Django session; CSRF applies to writes only,
# and writes take tokens only).
READ = [any_token, django_auth]
WRITE = [any_token]
REVIEW = [reviewer_token]


def request_actor(request) -> Actor:
    """The journal's actor for a write: the token's name (writes take tokens only)."""
    token: ApiToken = request.auth
    if token.role == TokenRole.REVIEWER:
        return Actor.reviewer(token.name)
    return Actor.agent(token.name)


# ---- the one error shape -----------------------------------------------------------------
# The one error shape of the API: `{"detail": str, "errors": [{"loc": [...], "msg": str}]}`.
#
# Every error under /api/ speaks it, whatever raised it: a domain exception, a validation error,
# an unknown path (404), a wrong method (405), a body over the limit (413), a database that does
# not answer (503) or a bug (500, logged with its request id). Handlers never catch; they let the
# domain's exceptions through and this module maps each to a status.

logger = logging.getLogger("cauterweb.api")
API_PREFIX = "/api/"
# The error statuses every operation documents in the OpenAPI schema.
ERRORS = {code: ErrorOut for code in (400, 401, 403, 404, 409, 413, 415, 422)}


def _shared_response_models(create):
    """ninja builds a pydantic model for each status of each operation: with the eight error
    statuses that is 9 models an operation, ~200 in all, built at import by every process that
    loads the URLs (`manage.py check` included) although they differ only in what they wrap.
    One model per wrapped type serves every operation and status alike (they are read, never
    changed: validation of a result and its OpenAPI schema)."""
    models: dict = {}

    def shared(self, response_param):
        try:
            return models[response_param]
        except KeyError:
            return models.setdefault(response_param, create(self, response_param))
        except TypeError:  # an unhashable annotation: its own model, as ninja builds it
            return create(self, response_param)

    return shared


# Before any router module declares its operations: each imports ERRORS from here first.
Operation._create_response_model = _shared_response_models(Operation._create_response_model)


class ApiError(Exception):
    """An error a handler states itself, with its status."""

    def __init__(self, status: int, detail: str, errors: list[dict] | None = None):
        super().__init__(detail)
        self.status, self.detail, self.errors = status, detail, errors or []


def item(loc, msg) -> dict:
    return {"loc": list(loc), "msg": str(msg)}


def body(detail: str, errors=()) -> dict:
    return {"detail": detail, "errors": list(errors)}


def _server_error(exc: Exception) -> tuple[int, str, list]:
    request_id = current_request_id()
    if isinstance(exc, OperationalError | InterfaceError):
        logger.error("database unavailable: %s", exc)
        return 503, f"the database is unavailable; try again (request {request_id})", []
    logger.error("unhandled error", exc_info=exc)
    return 500, f"internal server error (request {request_id})", []


def _checked(error: dict) -> str:
    """A field refused by its check in `lifecycle.validation` says so in the check's own words
    (as on a batch line, where the same check runs), not behind pydantic's "Value error, "."""
    if error.get("type") == "value_error" and "error" in error.get("ctx", {}):
        return str(error["ctx"]["error"])
    return error.get("msg", "")


HANDLERS = {
    ApiError: lambda exc: (exc.status, exc.detail, exc.errors),
    AuthenticationError: lambda exc: (
        401,
        "a valid API token is required: 'Authorization: Bearer <token>'",
        [],
    ),
    HttpError: lambda exc: (exc.status_code, str(exc), []),
    ValidationError: lambda exc: (
        422,
        "invalid request",
        [item(e.get("loc", ()), _checked(e)) for e in exc.errors],
    ),
    InvalidCursor: lambda exc: (400, "invalid cursor", [item(["query", "cursor"], "invalid")]),
    Forbidden: lambda exc: (403, str(exc), []),
    NotAllowed: lambda exc: (403, str(exc), []),
    WrongState: lambda exc: (409, str(exc), []),
    RuleNotFound: lambda exc: (404, f"no rule {exc}", []),
    ReviewItemNotFound: lambda exc: (404, f"no review item {exc}", []),
    ItemClosed: lambda exc: (409, str(exc), []),
    BadAction: lambda exc: (422, str(exc), [item(["body", exc.field], exc)]),
    Http404: lambda exc: (404, "not found", []),
    ImportRejected: lambda exc: (
        422,
        f"{len(exc.errors)} error(s), nothing written",
        [item(["line", e.line, *([e.field] if e.field else [])], e.message) for e in exc.errors],
    ),
    TraceRejected: lambda exc: (
        422,
        f"{len(exc.errors)} error(s), nothing written",
        [
            item(["record", e.record, *([e.field] if e.field else [])], e.message)
            for e in exc.errors
        ],
    ),
    InvalidRule: lambda exc: (422, str(exc), [item(["body", exc.field], exc)]),
    FilterError: lambda exc: (422, str(exc), [item(["query", exc.field], exc)]),
    InvalidSelection: lambda exc: (422, str(exc), [item(["query", exc.field], exc)]),
    PackRejected: lambda exc: (
        422,
        f"{len(exc.errors)} error(s), nothing imported",
        [item(["pack", *e.loc], e.msg) for e in exc.errors],
    ),
    RequestDataTooBig: lambda exc: (413, "the request body is larger than the limit", []),
    # Last resort: ninja looks handlers up along the exception's MRO, so this catches the rest.
    DatabaseError: _server_error,
    Exception: _server_error,
}


def _handle(request, exc, *, api: NinjaAPI, describe) -> HttpResponse:
    status, detail, errors = describe(exc)
    response = api.create_response(request, body(detail, errors), status=status)
    if status == 401:
        response["WWW-Authenticate"] = "Bearer"
    return response


def install(api: NinjaAPI) -> None:
    """Make every exception raised inside the API speak the one shape."""
    for exc_class, describe in HANDLERS.items():
        api.add_exception_handler(exc_class, partial(_handle, api=api, describe=describe))


def _is_json(response: HttpResponse) -> bool:
    return response.get("Content-Type", "").startswith("application/json")


def json_error_middleware(get_response):
    """Errors answered outside the API's handlers — an unknown path under /api/ (the URL
    resolver's 404), a method the path does not take (ninja's 405), a request refused by a
    middleware, a crash turned into Django's 500 page — reach the client in the same JSON
    shape as every other API error, never as an HTML page."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if (
            response.status_code < 400
            or not request.path.startswith(API_PREFIX)
            or _is_json(response)
            or getattr(response, "streaming", False)
        ):
            return response
        try:
            detail = HTTPStatus(response.status_code).phrase.lower()
        except ValueError:
            detail = "error"
        shaped = HttpResponse(
            json.dumps(body(detail)),
            status=response.status_code,
            content_type="application/json; charset=utf-8",
        )
        for header in ("Allow", "WWW-Authenticate", "X-Request-ID"):
            if header in response:
                shaped[header] = response[header]
        return shaped

    return middleware


# ---- request bodies ----------------------------------------------------------------------
# Request bodies of the batch endpoints: one item, a JSON array of items, or JSON Lines.

# A path jsonsafe gives for a string inside the n-th item of an array body: "[n].field…".
_ITEM_PATH = re.compile(r"^\[(\d+)\]\.?(.*)$")


def batch_body(item_schema, what: str) -> dict:
    """OpenAPI for a body that is one item, a JSON array of items, or JSON Lines."""
    one = item_schema.model_json_schema()
    return {
        "requestBody": {
            "required": True,
            "description": f"one {what}, a JSON array of them, or JSON Lines (one a line). "
            "All or nothing: any bad item and nothing is written; each error names its item "
            "as ['line', n, field], counted from 1.",
            "content": {
                "application/json": {"schema": {"anyOf": [one, {"type": "array", "items": one}]}},
                **{t: {"schema": {"type": "string"}} for t in JSONL_TYPES},
            },
        }
    }


def raw_body(request) -> bytes:
    """The body, refused when it holds a raw NUL byte: no JSON, JSON Lines or YAML we accept
    can, and PostgreSQL cannot store one in text. Escaped NULs (`\\u0000`) are found by the
    strict decoder, which tells them from the literal text `\\\\u0000`."""
    data = request.body
    if b"\x00" in data:
        raise ApiError(422, "NUL characters are not allowed", [item(["body"], "contains NUL")])
    return data


def streamed_lines(request) -> Iterator[bytes]:
    """The lines of a JSON Lines body, read from the request stream as they are consumed, never
    the whole body at once: a corpus of any size goes in with flat memory. The body size limit
    applies to each line instead. A line with a NUL character is a line error of the import,
    like any line it cannot store."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    for number, line in enumerate(iter(partial(request.readline, limit + 1), b""), start=1):
        if len(line) > limit:
            raise ApiError(
                413,
                f"line {number} is longer than the limit of {limit} bytes",
                [item(["line", number], "too long")],
            )
        yield line


def is_jsonl(request) -> bool:
    return request.content_type in JSONL_TYPES


def json_items(request) -> list:
    if request.content_type not in ("application/json", ""):
        raise ApiError(415, f"send application/json or JSON Lines ({', '.join(JSONL_TYPES)})", [])
    body = raw_body(request)
    if not body.strip():
        raise ApiError(400, "the body is empty")
    try:
        data = jsonsafe.loads(body)
    except jsonsafe.JsonRejected as exc:
        raise rejected(exc) from None
    return data if isinstance(data, list) else [data]


def rejected(exc: jsonsafe.JsonRejected) -> ApiError:
    """A body that is not JSON we read (bad syntax or UTF-8, nested too deep) is a 400; JSON
    holding a value we cannot store (a NUL, a lone surrogate, NaN, a number out of range) is
    a 422 naming where it sits, as ['line', n, field] like any other error of a batch item."""
    if exc.reason in (jsonsafe.Reason.SYNTAX, jsonsafe.Reason.UTF8, jsonsafe.Reason.DEPTH):
        return ApiError(400, f"the body is not valid JSON: {exc}")
    return ApiError(422, f"the body holds a value we cannot store: {exc}", [_located(exc)])


def _located(exc: jsonsafe.JsonRejected) -> dict:
    if not exc.path:
        return item(["body"], exc.message)
    found = _ITEM_PATH.match(exc.path)
    line, field = (int(found[1]) + 1, found[2]) if found else (1, exc.path)
    return item(["line", line, *([field] if field else [])], exc.message)


def rows(request) -> list:
    """Numbered items of a batch body, as the intake functions take them."""
    if is_jsonl(request):
        return list(read_jsonl(jsonsafe.split_lines(raw_body(request))))
    return numbered(json_items(request))


def strict_text(request) -> bytes:
    """A JSON or JSON Lines body for a parser of its own (trace formats), checked first as
    strictly as the batches: a bad line is a 422 naming it, a bad document a 400/422."""
    data = raw_body(request)
    if is_jsonl(request):
        errors = [error for _, _, error in read_jsonl(jsonsafe.split_lines(data)) if error]
        if errors:
            raise ImportRejected(errors)
        return data
    try:
        jsonsafe.loads(data)
    except jsonsafe.JsonRejected as exc:
        raise rejected(exc) from None
    return data


class StrictParser(Parser):
    """Bodies that ninja parses into a schema (a reviewer's retire reason) are read as
    strictly as the batches: ninja answers 400 for whatever this refuses."""

    def parse_body(self, request) -> dict:
        return jsonsafe.loads(request.body)
