"""Request bodies of the batch endpoints: one item, a JSON array of items, or JSON Lines."""

import json
import re
from collections.abc import Iterator
from functools import partial

from django.conf import settings

from lifecycle.schemas import JSONL_TYPES
from lifecycle.validation import numbered, read_jsonl

from .errors import ApiError, item

# A JSON escape of NUL: `\u0000` preceded by an even number of backslashes. An odd number means
# the backslash itself is escaped, and the text is the literal six characters, which is fine.
_NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


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
    """The body, refused when it holds a NUL character (raw or JSON-escaped): PostgreSQL cannot
    store one in text."""
    data = request.body
    if b"\x00" in data or _NUL_ESCAPE.search(data):
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
    try:
        data = json.loads(raw_body(request) or b"null")
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"the body is not valid JSON: {exc}") from None
    if data is None:
        raise ApiError(400, "the body is empty")
    return data if isinstance(data, list) else [data]


def rows(request) -> list:
    """Numbered items of a batch body, as the intake functions take them."""
    if is_jsonl(request):
        return list(read_jsonl(raw_body(request).splitlines()))
    return numbered(json_items(request))
