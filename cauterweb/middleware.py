"""The project's own middleware, in the order settings.MIDDLEWARE runs it (the API's error shape
is `cauterweb.api.protocol.json_error_middleware`).

## A request id

A request id for every request, echoed in `X-Request-ID` and stamped on every log record
written while the request runs, so an error a client reports can be found in the logs.

A proxy's id is kept when it looks like one; anything else is replaced, so a client cannot
write arbitrary text into the log lines.

## Chunked bodies

Request bodies sent with `Transfer-Encoding: chunked` (no Content-Length).

Django reads exactly Content-Length bytes of a body, so without that header it reads none: a
chunked POST of reports arrived as an empty body and was refused as such (or, worse, accepted
as an empty batch). A WSGI server that de-chunks the body says so with `wsgi.input_terminated`
(gunicorn, uWSGI with `chunked-input`, mod_wsgi); this middleware then reads it, up to the
body limit, and hands it on with its length. A server that passes the chunks through raw gives
no way to find the body's end: that request is refused with 411 rather than read wrongly.

## One history entry for one URL

A filter form sends on `change` and on `submit`, and Enter in a text field fires both: the
second request asks for the URL the first one pushed into the history. Pushed again, that URL
would stand twice in the history and the back button would seem to do nothing once. An htmx
request for the URL the browser already shows is answered with `HX-Push-Url: false`
(docs/dashboard.md#history).

## No NUL character in the dashboard

No NUL character reaches a dashboard view: PostgreSQL cannot hold one in text, so a `%00` in
a path, a query parameter or a form field would otherwise end in a database error (a 500).
The API checks its own inputs against its schema and answers 422 in its error shape.
"""

import io
import logging
import re
import uuid
from contextvars import ContextVar
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

# ---- a request id ---------------------------------------------------------------------------

HEADER = "X-Request-ID"
_ACCEPTED = re.compile(r"^[A-Za-z0-9._:-]{8,128}$")
_current: ContextVar[str] = ContextVar("request_id", default="-")


def current_request_id() -> str:
    return _current.get()


def request_id_middleware(get_response):
    def middleware(request):
        given = request.headers.get(HEADER, "")
        request_id = given if _ACCEPTED.match(given) else uuid.uuid4().hex
        request.request_id = request_id
        token = _current.set(request_id)
        try:
            response = get_response(request)
        finally:
            _current.reset(token)
        response[HEADER] = request_id
        return response

    return middleware


class RequestIdFilter(logging.Filter):
    """Adds `request_id` to every record ("-" outside a request) for the log format."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = _current.get()
        return True


# ---- chunked bodies --------------------------------------------------------------------------


def chunked_body_middleware(get_response):
    def middleware(request: HttpRequest) -> HttpResponse:
        if _is_chunked(request):
            refused = _read_body(request)
            if refused is not None:
                return refused
        return get_response(request)

    return middleware


def _is_chunked(request: HttpRequest) -> bool:
    encoding = request.META.get("HTTP_TRANSFER_ENCODING", "")
    return "chunked" in encoding.lower() and not request.META.get("CONTENT_LENGTH")


def _read_body(request: HttpRequest) -> HttpResponse | None:
    if not request.META.get("wsgi.input_terminated"):
        return _error(411, "send a Content-Length: this server cannot read a chunked body")
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    data = request.META["wsgi.input"].read(limit + 1)
    if len(data) > limit:
        return _error(413, "the request body is larger than the limit")
    request.META["CONTENT_LENGTH"] = str(len(data))
    # What Django's own request reads the body from (WSGIRequest.read); nothing has read it yet.
    request._stream = io.BytesIO(data)
    return None


def _error(status: int, detail: str) -> JsonResponse:
    # The API's error shape; the dashboard never sends chunked protocol.
    return JsonResponse({"detail": detail, "errors": []}, status=status)


# ---- one history entry for one URL ----------------------------------------------------------


def htmx_push_once_middleware(get_response):
    """After django-htmx's middleware (it reads `request.htmx`)."""

    def middleware(request):
        response = get_response(request)
        if _shows_already(request) and "HX-Push-Url" not in response:
            response["HX-Push-Url"] = "false"
        return response

    return middleware


def _shows_already(request) -> bool:
    htmx = getattr(request, "htmx", None)
    if not htmx or request.method != "GET" or htmx.history_restore_request:
        return False
    try:
        shown = urlsplit(htmx.current_url or "")
    except ValueError:  # a header no browser sends ("http://[::1"): pushed as the page says
        return False
    return f"{shown.path}?{shown.query}".rstrip("?") == request.get_full_path()


# ---- no NUL character in the dashboard --------------------------------------------------------

API_PREFIX = "/api/"


def _has_nul(request) -> bool:
    if "\x00" in request.path:
        return True
    fields = [request.GET]
    if request.method == "POST":
        fields.append(request.POST)
    return any(
        "\x00" in key or any("\x00" in value for value in values)
        for query in fields
        for key, values in query.lists()
    )


def refuse_nul_middleware(get_response):
    def middleware(request):
        if not request.path.startswith(API_PREFIX) and _has_nul(request):
            return render(request, "400.html", status=400)
        return get_response(request)

    return middleware
