"""The one error shape of the API: `{"detail": str, "errors": [{"loc": [...], "msg": str}]}`.

Every error under /api/ speaks it, whatever raised it: a domain exception, a validation error,
an unknown path (404), a wrong method (405), a body over the limit (413), a database that does
not answer (503) or a bug (500, logged with its request id). Handlers never catch; they let the
domain's exceptions through and this module maps each to a status.
"""

import json
import logging
from functools import partial
from http import HTTPStatus

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from cauterweb.middleware import current_request_id
from lifecycle.cursor import InvalidCursor
from lifecycle.selectors.rules import RuleNotFound
from lifecycle.services.packs import InvalidSelection, PackRejected
from lifecycle.services.review import BadAction, ItemClosed, ReviewItemNotFound
from lifecycle.states import NotAllowed, WrongState
from lifecycle.validation import FilterError, ImportRejected, InvalidRule
from traces.model import TraceRejected

from .auth import Forbidden
from .schemas import ErrorOut

logger = logging.getLogger("cauterweb.api")
API_PREFIX = "/api/"
# The error statuses every operation documents in the OpenAPI schema.
ERRORS = {code: ErrorOut for code in (400, 401, 403, 404, 409, 413, 415, 422)}


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
        [item(e.get("loc", ()), e.get("msg", "")) for e in exc.errors],
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
