"""Lines of a JSON Lines log read one at a time from a binary stream, each decoded on its own
(a bad line names its file and number; the lines around it are not held). Pure."""

import re
from collections.abc import Iterator
from typing import BinaryIO

import ijson
import orjson

from .model import RecordError

# A line longer than this is refused (a log line is a message, not a file): reading it whole
# would let one line take the memory the rest of the import is careful not to.
MAX_LINE_BYTES = 64 * 1024 * 1024
_CHUNK = 1024 * 1024
_POSITION = re.compile(r": line \d+ column (\d+) \(char \d+\)")


def where(name: str, number: int) -> str:
    return f"{name}, line {number}"


def objects(stream: BinaryIO, name: str, errors: list[RecordError]) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line; a line that is not a JSON object is an
    error naming it, and reading goes on so every bad line is named."""
    number = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            errors.append(
                RecordError(where(name, number), "", f"longer than {MAX_LINE_BYTES} bytes")
            )
            while (rest := stream.readline(_CHUNK)) and not rest.endswith(b"\n"):
                pass
            continue
        if raw.isspace():
            continue
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            errors.append(RecordError(where(name, number), "", f"not valid JSON: {_reason(exc)}"))
            continue
        if not isinstance(value, dict):
            errors.append(RecordError(where(name, number), "", "each line must be a JSON object"))
            continue
        yield number, value


def _reason(exc: orjson.JSONDecodeError) -> str:
    """orjson's message without its own line number (always 1: it saw one line); it quotes
    nothing of the line, so no secret of it reaches an error."""
    return _POSITION.sub(r" (column \1)", str(exc))


def text_of(content: object) -> str:
    """The text of a message content: a string, or the text parts of a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                text = block.get("text")
                if isinstance(text, str):
                    parts.append(text)
                elif block.get("type") in ("tool_result",):
                    parts.append(text_of(block.get("content")))
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict):
        return text_of(content.get("text") or content.get("content"))
    return ""


def values_at(stream: BinaryIO, wanted: tuple[str, ...]) -> Iterator[tuple[str, object]]:
    """(prefix, value) for every value at one of the `wanted` prefixes, built one at a time
    from the parse events; everything else is read past without being built."""
    builder, building, depth = None, "", 0
    for prefix, event, value in ijson.parse(stream, use_float=True):
        if builder is None:
            if prefix in wanted and event in ("start_map", "start_array"):
                builder, building, depth = ijson.ObjectBuilder(), prefix, 0
            elif prefix in wanted:
                yield prefix, value
                continue
            else:
                continue
        builder.event(event, value)
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                yield building, builder.value
                builder = None
