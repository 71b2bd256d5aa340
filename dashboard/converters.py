"""The URL grammar of rule ids and scopes on dashboard pages.

The API accepts any non-empty rule id up to 64 characters and any scope up to 128: `/`, `:`,
`%`, spaces and non-ASCII letters included (`repo:acme/payments` is an ordinary scope). A URL
segment cannot hold a bare `/`, and a browser folds `.` and `..` segments away, so a value is
escaped into one segment: `%` becomes `%25`, `/` becomes `%2F`, and a value made only of dots
has its dots as `%2E`. `reverse()` then quotes those `%` once more for the wire, the server
decodes the wire form once, and `to_python` undoes the escape exactly. Ids without `/`, `%` or
a lone dot segment keep the URLs they always had.
"""

import re

_ESCAPED = re.compile(r"%(25|2F|2E)", re.IGNORECASE)
_UNESCAPE = {"25": "%", "2F": "/", "2E": "."}


def escape_segment(value: str) -> str:
    escaped = value.replace("%", "%25").replace("/", "%2F")
    if escaped and set(escaped) == {"."}:
        return "%2E" * len(escaped)
    return escaped


def unescape_segment(segment: str) -> str:
    return _ESCAPED.sub(lambda match: _UNESCAPE[match[1].upper()], segment)


class SegmentConverter:
    """Any non-empty text as one URL path segment (see the module docstring)."""

    regex = r"[^/]+"

    def to_python(self, value: str) -> str:
        return unescape_segment(value)

    def to_url(self, value: str) -> str:
        return escape_segment(str(value))
