"""Request bodies of the batch endpoints: one item, a JSON array of items, or JSON Lines."""

import re
from collections.abc import Iterator
from functools import partial

from django.conf import settings
from ninja.parser import Parser

from lifecycle import jsonsafe
from lifecycle.validation import ImportRejected, numbered, read_jsonl

from .errors import ApiError, item
from .schemas import JSONL_TYPES

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
