"""Strict JSON and JSON Lines decoding for everything that comes from outside.

Python's `json` accepts what our storage and our callers cannot take: `NaN` and `Infinity`
(not JSON, and refused by PostgreSQL's jsonb), lone UTF-16 surrogates written as escapes
(`"\\ud800"`, which no UTF-8 encoder will write back), NUL characters (PostgreSQL text cannot
hold one), integers of any size, and nesting deep enough to exhaust the interpreter's stack.
This module decodes bytes or text into plain Python values and refuses each of those with a
`JsonRejected` naming the line (and column where known) and the reason, so every entry point —
the API, the command line, packs — reports bad input the same way and never fails with a 500 or
a traceback.

Pure: no Django, no I/O, no recursion of our own. Depth is measured on the decoded value by an
iterative walk over its containers, and only when the text has more brackets than `MAX_DEPTH`;
json's C scanner stops at the interpreter's recursion limit with a RecursionError, which is
caught, so a line nested a million deep costs an exception, not the stack.
"""

import json
import math
import re
from collections.abc import Iterable, Iterator

# Deeper than any document we store (a trajectory's steps nest a handful of levels) and far
# below what `json`, `canonical_json` and PostgreSQL's jsonb can take.
MAX_DEPTH = 64
# Integers must fit a signed 64-bit column and survive a round trip through any JSON parser
# that reads them as int64; larger values are refused rather than silently rounded.
MAX_INT = 2**63 - 1
MAX_INT_DIGITS = len(str(MAX_INT))

# Escapes that can decode to a NUL or a surrogate; without one, no string needs to be walked.
_RISKY_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


class Reason:
    """Why a document was refused: stable codes for callers and tests."""

    UTF8 = "utf8"
    NUL = "nul"
    SURROGATE = "surrogate"
    CONSTANT = "constant"
    NUMBER = "number"
    DEPTH = "depth"
    SYNTAX = "syntax"


class JsonRejected(ValueError):
    """A document (or one line of JSON Lines) that is refused. `line` counts from 1; `reason`
    is one of `Reason`'s codes; `path` names the key of a bad string (`meta.notes[2]`)."""

    def __init__(
        self,
        reason: str,
        message: str,
        line: int | None = None,
        column: int | None = None,
        *,
        path: str = "",
    ):
        super().__init__(message)
        self.reason, self.message, self.line, self.column = reason, message, line, column
        self.path = path

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.column is not None:
            where.append(f"column {self.column}")
        if self.path:
            where.append(f"at {self.path}")
        return f"{', '.join(where)}: {self.message}" if where else self.message

    def at_line(self, line: int) -> "JsonRejected":
        """The same error placed on a line of a JSON Lines input."""
        return JsonRejected(self.reason, self.message, line, self.column, path=self.path)


def decode_text(data: bytes | str) -> str:
    """Bytes as strict UTF-8 (a leading byte-order mark is dropped); text is checked for
    surrogates, which only a caller that built the string itself can have put there."""
    if isinstance(data, str):
        text = data
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise JsonRejected(
                Reason.SURROGATE, f"lone surrogate at character {exc.start + 1}"
            ) from None
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonRejected(
                Reason.UTF8, f"not valid UTF-8 (byte {exc.start + 1}: {exc.reason})"
            ) from None
    return text.removeprefix("\ufeff")


def loads(data: bytes | str) -> object:
    """One JSON document, strictly (see the module docstring); raises JsonRejected."""
    text = decode_text(data)
    if "\x00" in text:
        raise JsonRejected(Reason.NUL, "contains a NUL character", column=text.index("\x00") + 1)
    try:
        value = json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_int=_bounded_int,
            parse_float=_finite_float,
        )
    except JsonRejected:
        raise
    except json.JSONDecodeError as exc:
        raise JsonRejected(
            Reason.SYNTAX, f"not valid JSON: {exc.msg}", exc.lineno, exc.colno
        ) from None
    except RecursionError:
        # json's C scanner counts its own recursion and stops at the interpreter's limit
        # (about a thousand levels): deep input costs an exception, never the stack.
        raise JsonRejected(Reason.DEPTH, f"nested deeper than {MAX_DEPTH} levels") from None
    if isinstance(value, dict | list) and text.count("[") + text.count("{") > MAX_DEPTH:
        check_depth(value)
    if _RISKY_ESCAPE.search(text):
        _check_strings(value)
    return value


def iter_jsonl(
    lines: Iterable[bytes | str],
) -> Iterator[tuple[int, object, JsonRejected | None]]:
    """(line number, value, None) for each non-blank line, or (line number, None, error).

    Every line is decoded on its own, so one bad line never hides the errors of the next: a
    caller that writes nothing on any error can report all of them."""
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            yield number, loads(raw), None
        except JsonRejected as exc:
            yield number, None, exc.at_line(number)


def split_lines(data: bytes) -> list[bytes]:
    """A JSON Lines body split on line feeds only (a trailing CR is dropped by the decoder as
    whitespace). `bytes.splitlines` would also split on form feeds and other separators."""
    return data.split(b"\n")


def check_depth(value: object) -> None:
    """Containers only, iteratively: a document of a million strings has few containers."""
    if not isinstance(value, dict | list):
        return
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise JsonRejected(Reason.DEPTH, f"nested deeper than {MAX_DEPTH} levels")
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def _refuse_constant(name: str):
    raise JsonRejected(Reason.CONSTANT, f"{name} is not a JSON number")


def _bounded_int(raw: str) -> int:
    digits = raw.lstrip("-")
    if len(digits) > MAX_INT_DIGITS or abs(int(raw)) > MAX_INT:
        raise JsonRejected(Reason.NUMBER, f"integer {_clip(raw)} is out of range (±{MAX_INT})")
    return int(raw)


def _finite_float(raw: str) -> float:
    value = float(raw)
    if not math.isfinite(value):
        raise JsonRejected(Reason.NUMBER, f"number {_clip(raw)} is out of range")
    return value


def _clip(raw: str, width: int = 24) -> str:
    return raw if len(raw) <= width else f"{raw[:width]}…"


def _check_strings(value: object) -> None:
    """Walk every key and string without recursion, naming where a bad one sits."""
    stack: list[tuple[object, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            _check_string(node, path)
        elif isinstance(node, dict):
            for key, item in node.items():
                _check_string(key, path)
                stack.append((item, f"{path}.{key}" if path else key))
        elif isinstance(node, list):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node))


def _check_string(text: str, path: str) -> None:
    problem = string_problem(text)
    if problem is not None:
        raise JsonRejected(problem[0], f"a string contains {problem[1]}", path=path)


def string_problem(text: str) -> tuple[str, str] | None:
    """(reason, what) when `text` cannot be stored as UTF-8 text: a NUL or a lone surrogate.
    For values decoded by other means (YAML) that must meet the same bar."""
    if "\x00" in text:
        return Reason.NUL, "a NUL character (\\u0000)"
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return Reason.SURROGATE, f"a lone surrogate (\\u{ord(text[exc.start]):04x})"
    return None


def number_problem(value: int | float) -> str | None:
    """Why a number decoded by other means (YAML) is out of JSON's range here, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and abs(value) > MAX_INT:
        return f"integer out of range (±{MAX_INT})"
    if isinstance(value, float) and not math.isfinite(value):
        return "numbers must be finite (no NaN or Infinity)"
    return None
