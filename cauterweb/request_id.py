"""A request id for every request, echoed in `X-Request-ID` and stamped on every log record
written while the request runs, so an error a client reports can be found in the logs.

A proxy's id is kept when it looks like one; anything else is replaced, so a client cannot
write arbitrary text into the log lines.
"""

import logging
import re
import uuid
from contextvars import ContextVar

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
