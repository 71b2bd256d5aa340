"""The corpus import's fast paths give what the strict, plain paths give: lines decoded by
orjson read as `validation.read_jsonl` reads them (values, types and errors alike), rows with
nothing to escape come out as escaping every cell would write them, and remembered atom lists
parse as `atoms.parse_atoms` does."""

import json
import random

import pytest

from lifecycle.atoms import BadAtom, parse_atoms
from lifecycle.jsonsafe import MAX_DEPTH, MAX_INT
from lifecycle.services.corpus import _atoms, read_lines, row_text
from lifecycle.services.corpus_store import copy_escape
from lifecycle.validation import read_jsonl

TRICKY = [
    b'{"id": "T-1", "n": 1, "f": 0.5, "e": 1e5, "E": 1E-7, "z": -0, "zf": -0.0}\n',
    b'{"a": 1, "a": 2}',
    b'  {"a": [1, 2.5, "x", null, true, false]}  \r\n',
    b'{"big": %d}' % MAX_INT,
    b'{"big": %d}' % (MAX_INT + 1),
    b'{"big": -%d}' % (MAX_INT + 1),
    b'{"big": 18446744073709551616}',
    b'{"big": 12345678901234567890.5}',
    b'{"inf": 1e400}',
    b'{"tiny": 1e-400}',
    b'{"nan": NaN}',
    b'{"inf": Infinity}',
    b'{"nul": "a\\u0000b"}',
    b'{"surrogate": "\\ud800"}',
    b'{"pair": "\\ud83d\\ude00"}',
    b'{"raw surrogate": "\xed\xa0\x80"}',
    b'{"utf8": "\xff"}',
    b'\xef\xbb\xbf{"bom": 1}',
    b'{"escaped": "tab\\t nl\\n back\\\\ quote\\" \\u00e9 \\u2028"}',
    '{"text": "é ü 中"}'.encode(),
    b"[" * MAX_DEPTH + b"]" * MAX_DEPTH,
    b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
    b'{"x": 1,}',
    b"{not json",
    b'"a\tb"',
    b"0123",
    b'{"digits in a string": "1234567890123456789012"}',
]


def same(lines):
    """Each value with its types spelled out: 1 and 1.0 and True compare equal in Python."""
    return [(n, None if v is None else repr(v), e) for n, v, e in lines]


@pytest.mark.parametrize("raw", TRICKY)
def test_a_tricky_line_reads_as_the_strict_reader_reads_it(raw):
    lines = [raw, b"\n", raw]
    assert same(read_lines(lines)) == same(read_jsonl(lines))


def test_random_numbers_read_as_the_strict_reader_reads_them():
    pick = random.Random(7)
    values = [
        *(pick.randint(-(2**70), 2**70) for _ in range(300)),
        *(pick.uniform(-1, 1) * 10.0 ** pick.randint(-300, 300) for _ in range(300)),
        *(pick.randint(-10, 10) * 10 ** pick.randint(0, 25) for _ in range(100)),
    ]
    lines = [json.dumps({"v": v, "nested": [v, {"k": v}]}).encode() for v in values]
    lines += [f'{{"v": {pick.randint(1, 99)}e{pick.randint(-400, 400)}}}'.encode() for _ in values]
    assert same(read_lines(lines)) == same(read_jsonl(lines))


def test_text_lines_read_as_the_strict_reader_reads_them():
    lines = ['{"a": 1}', '{"a": "\ud800"}', "{bad"]
    assert same(read_lines(lines)) == same(read_jsonl(lines))


@pytest.mark.parametrize(
    "cells",
    [
        ("T-1", "failure", "plain", '{"a":1}', None, True, False, ""),
        ("T-1", "a\\b", "tab\there", "line\nbreak\r", None, False),
        ("\\N", "literal backslash-N is text, not a null", None),
        ('["a\\\\b"]', None, None, "t"),
        ("", "", ""),
    ],
)
def test_a_row_is_written_as_escaping_every_cell_would_write_it(cells):
    assert row_text(cells) == "\t".join(copy_escape(c) for c in cells)


@pytest.mark.parametrize(
    ("raw", "notices_only"),
    [
        (["tool:git", " Action:git.push ", "tool:git"], False),
        (["breach:task_completion"], True),
        (["tool:git"], True),
        (["not an atom"], False),
        ([1, "tool:git"], False),
        ([["tool:git"]], False),
        ("tool:git", False),
        ([], False),
    ],
)
def test_remembered_atom_lists_parse_as_parse_atoms_does(raw, notices_only):
    def outcome(parse):
        try:
            return parse(raw, notices_only=notices_only)
        except BadAtom as exc:
            return str(exc)

    for _ in range(2):  # the second time from memory
        assert outcome(_atoms) == outcome(parse_atoms)
