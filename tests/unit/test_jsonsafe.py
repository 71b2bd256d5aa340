"""Strict JSON decoding: every way a document can be valid for Python's json and still poison
storage or a caller is refused with its reason, line and column; nothing recurses."""

import json
import sys

import pytest

from lifecycle.jsonsafe import (
    MAX_DEPTH,
    MAX_INT,
    JsonRejected,
    Reason,
    check_depth,
    decode_text,
    iter_jsonl,
    loads,
    number_problem,
    split_lines,
    string_problem,
)


def rejected(data) -> JsonRejected:
    with pytest.raises(JsonRejected) as info:
        loads(data)
    return info.value


@pytest.mark.parametrize(
    "data, expected",
    [
        (
            b'{"a": 1, "b": [true, false, null], "c": "x"}',
            {"a": 1, "b": [True, False, None], "c": "x"},
        ),
        (b"[]", []),
        (b"0", 0),
        (b"-0.0", -0.0),
        (b"1e308", 1e308),
        (b"-1.5e-300", -1.5e-300),
        (str(MAX_INT).encode(), MAX_INT),
        (str(-MAX_INT).encode(), -MAX_INT),
        ('"caf\u00e9 \u2603 \U0001f600"'.encode(), "caf\u00e9 \u2603 \U0001f600"),
        # A valid surrogate pair written as escapes is one astral character.
        (b'"\\ud83d\\ude00"', "\U0001f600"),
        # The literal six characters backslash-u-0-0-0-0 are text like any other.
        (b'"\\\\u0000"', "\\u0000"),
        (b'"\\\\ud800"', "\\ud800"),
        # A byte-order mark before the document is dropped.
        (b'\xef\xbb\xbf{"a": 1}', {"a": 1}),
        (' {"a": "\u2028"} '.encode(), {"a": "\u2028"}),
    ],
)
def test_it_accepts_what_storage_can_hold(data, expected):
    assert loads(data) == expected
    assert loads(data.decode("utf-8")) == expected


@pytest.mark.parametrize(
    "data, reason, path",
    [
        (b'{"a": "s\\ud800x"}', Reason.SURROGATE, "a"),
        (b'{"a": "\\udfff"}', Reason.SURROGATE, "a"),
        (b'["ok", "\\uDBFF"]', Reason.SURROGATE, "[1]"),
        (b'{"meta": {"notes": ["x", "\\ud83d"]}}', Reason.SURROGATE, "meta.notes[1]"),
        (b'{"\\ud800": 1}', Reason.SURROGATE, ""),
        (b'{"a": "\\u0000"}', Reason.NUL, "a"),
        (b'{"a": {"b": "x\\u0000y"}}', Reason.NUL, "a.b"),
        (b'{"a": "\\\\\\u0000"}', Reason.NUL, "a"),
    ],
)
def test_it_refuses_escapes_that_decode_to_what_storage_cannot_hold(data, reason, path):
    error = rejected(data)
    assert error.reason == reason
    assert error.path == path


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_it_refuses_nan_and_infinity_anywhere(constant):
    for document in (constant, f"[{constant}]", f'{{"meta": {{"x": {constant}}}}}'):
        error = rejected(document.encode())
        assert error.reason == Reason.CONSTANT
        assert constant in error.message


@pytest.mark.parametrize(
    "number",
    ["1e400", "-1e400", "1E+999", str(MAX_INT + 1), str(-MAX_INT - 1), "9" * 5000, "-" + "9" * 30],
)
def test_it_refuses_numbers_out_of_range(number):
    error = rejected(f'{{"n": {number}}}'.encode())
    assert error.reason == Reason.NUMBER
    assert "out of range" in error.message
    # A 5,000-digit number is clipped in the message, not echoed whole.
    assert len(error.message) < 120


@pytest.mark.parametrize(
    "data, byte",
    [(b"\xff", 1), (b'{"a": "\xc3\x28"}', 8), (b'"\xed\xa0\x80"', 2), (b'"ok\xe2\x82"', 4)],
)
def test_it_refuses_invalid_utf8_naming_the_byte(data, byte):
    error = rejected(data)
    assert error.reason == Reason.UTF8
    assert f"byte {byte}" in error.message


def test_text_that_already_holds_a_lone_surrogate_is_refused():
    assert rejected('"a\ud800"').reason == Reason.SURROGATE
    with pytest.raises(JsonRejected):
        decode_text("\udc80")


def test_a_raw_nul_is_refused_with_its_column():
    error = rejected(b'{"a": 1}\x00')
    assert (error.reason, error.column) == (Reason.NUL, 9)
    assert rejected(b'"a\x00b"').reason == Reason.NUL


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 500, 999, 1000, 5000, 200_000])
@pytest.mark.parametrize("opening, closing", [("[", "]"), ('{"k":', "}")])
def test_it_refuses_nesting_deeper_than_the_bound_without_recursing(depth, opening, closing):
    document = opening * depth + "1" + closing * depth
    error = rejected(document.encode())
    assert error.reason == Reason.DEPTH
    assert str(MAX_DEPTH) in error.message


def test_nesting_at_the_bound_is_accepted_and_brackets_inside_strings_do_not_count():
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert loads(json.dumps(["[" * 10_000, "{" * 10_000])) == ["[" * 10_000, "{" * 10_000]
    wide = [[i] for i in range(10_000)]
    assert loads(json.dumps(wide)) == wide


def test_deep_input_is_refused_even_with_little_stack_left():
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        assert rejected(b"[" * 5000 + b"]" * 5000).reason == Reason.DEPTH
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.parametrize(
    "data, line, column",
    [(b"[1, 2", 1, 6), (b'{"a": 1,\n "b": }', 2, 7), (b"", 1, 1), (b"{'a': 1}", 1, 2)],
)
def test_syntax_errors_name_line_and_column(data, line, column):
    error = rejected(data)
    assert (error.reason, error.line, error.column) == (Reason.SYNTAX, line, column)
    assert str(error).startswith(f"line {line}, column {column}: not valid JSON")


def test_json_lines_number_every_line_and_report_every_bad_one():
    body = b"\n".join(
        [
            b'{"id": 1}',
            b"",
            b'{"id": "s\\ud800x"}',
            b"   ",
            b'{"id": NaN}',
            b"[" * 5000 + b"]" * 5000,
            b'{"id": "\x00"}',
            b'{"id": "\xff"}',
            b'{"id": 2}\r',
            b'{"id": "\\\\u0000"}',
            b"",
        ]
    )
    rows = list(iter_jsonl(split_lines(body)))
    assert [(n, v) for n, v, e in rows if e is None] == [
        (1, {"id": 1}),
        (9, {"id": 2}),
        (10, {"id": "\\u0000"}),
    ]
    errors = {n: e for n, _, e in rows if e is not None}
    assert {n: e.reason for n, e in errors.items()} == {
        3: Reason.SURROGATE,
        5: Reason.CONSTANT,
        6: Reason.DEPTH,
        7: Reason.NUL,
        8: Reason.UTF8,
    }
    assert all(e.line == n and str(e).startswith(f"line {n}") for n, e in errors.items())


def test_json_lines_split_on_line_feeds_only():
    # Form feeds and unicode line separators may sit inside a JSON string; only \n ends a line.
    body = '{"a": "x\u2028y"}\n{"b": "\x0c"}'.encode().replace(b"\x0c", b"\\f")
    assert [v for _, v, _ in iter_jsonl(split_lines(body))] == [{"a": "x\u2028y"}, {"b": "\f"}]
    assert split_lines(b"a\x0cb\x1cc\nd") == [b"a\x0cb\x1cc", b"d"]


def test_text_lines_are_read_like_byte_lines():
    rows = list(iter_jsonl(['{"a": 1}\n', "\n", '{"a": "\\ud800"}\n']))
    assert rows[0] == (1, {"a": 1}, None)
    assert rows[1][0] == 3 and rows[1][2].reason == Reason.SURROGATE


def test_the_error_is_a_value_error_with_a_plain_message():
    error = rejected(b"NaN")
    assert isinstance(error, ValueError)
    assert str(error) == "NaN is not a JSON number"
    assert str(error.at_line(7)) == "line 7: NaN is not a JSON number"


@pytest.mark.parametrize("value", [None, 1, "text", 1.5, True, [], {}, [[{"a": [1]}]]])
def test_a_shallow_value_decoded_elsewhere_passes_the_depth_check(value):
    assert check_depth(value) is None  # no JsonRejected raised


def test_a_value_decoded_elsewhere_too_deep_is_refused():
    value: list = []
    for _ in range(MAX_DEPTH):
        value = [value]
    with pytest.raises(JsonRejected) as info:
        check_depth(value)
    assert info.value.reason == Reason.DEPTH


@pytest.mark.parametrize(
    "text, problem",
    [
        ("fine", None),
        ("caf\u00e9", None),
        ("a\x00b", Reason.NUL),
        ("caf\u00e9\x00", Reason.NUL),
        ("x\ud800", Reason.SURROGATE),
        ("\udfff", Reason.SURROGATE),
    ],
)
def test_string_problems_of_values_decoded_elsewhere(text, problem):
    found = string_problem(text)
    assert (found[0] if found else None) == problem


@pytest.mark.parametrize(
    "value, bad",
    [(1, False), (True, False), (MAX_INT, False), (MAX_INT + 1, True), (-MAX_INT - 1, True)]
    + [(1.5, False), (float("nan"), True), (float("inf"), True), (float("-inf"), True)],
)
def test_number_problems_of_values_decoded_elsewhere(value, bad):
    assert (number_problem(value) is not None) == bad
