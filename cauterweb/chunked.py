"""Request bodies sent with `Transfer-Encoding: chunked` (no Content-Length).

Django reads exactly Content-Length bytes of a body, so without that header it reads none: a
chunked POST of reports arrived as an empty body and was refused as such (or, worse, accepted
as an empty batch). A WSGI server that de-chunks the body says so with `wsgi.input_terminated`
(gunicorn, uWSGI with `chunked-input`, mod_wsgi); this middleware then reads it, up to the
body limit, and hands it on with its length. A server that passes the chunks through raw gives
no way to find the body's end: that request is refused with 411 rather than read wrongly.
"""

import io

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


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
    # The API's error shape; the dashboard never sends chunked bodies.
    return JsonResponse({"detail": detail, "errors": []}, status=status)
