"""The corpus import's fast paths give what the strict, plain paths give: lines decoded by
orjson read as `validation.read_jsonl` reads them (values, types and errors alike), rows with
nothing to escape come out as escaping every cell would write them, and remembered atom lists
parse as `atoms.parse_atoms` does."""

import json
import math
import random
import struct

import orjson
import pytest

from lifecycle.atoms import BadAtom, parse_atoms
from lifecycle.inputs import _atoms, parse_trajectory
from lifecycle.jsonsafe import MAX_DEPTH, MAX_INT
from lifecycle.services.corpus import (
    _cells,
    _fast_json,
    _json,
    _plain_text,
    _read,
    read_lines,
    row_text,
    serialise,
    stored_digest,
)
from lifecycle.services.corpus_store import _PostgresStore, copy_escape
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


@pytest.mark.parametrize(
    "blank", [b"", b"\n", b" \t\r\n", b"\x0b\x0c\n", "", " \n", "\u2003\u00a0\n", "\u3000"]
)
def test_blank_lines_are_skipped_as_the_strict_reader_skips_them(blank):
    raw = b'{"a": 1}' if isinstance(blank, bytes) else '{"a": 1}'
    lines = [raw, blank, raw]
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


# --- a plain line's cells by orjson: the same text as the json module's encoder -------------


def test_every_code_point_is_written_as_the_old_encoder_writes_it():
    scalars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    assert _fast_json(scalars) == _json(scalars)
    assert _fast_json("".join(scalars)) == _json("".join(scalars))
    keyed = {c: c for c in scalars[::97]} | {c: 1 for c in scalars[:256]}
    assert _fast_json(keyed) == _json(keyed)


def test_keys_are_sorted_as_the_old_encoder_sorts_them():
    pick = random.Random(11)
    ranges = [(0x20, 0x7F), (0x80, 0x800), (0xE000, 0xFFFF), (0x10000, 0x10FFFF)]
    for _ in range(300):
        keys = [
            "".join(chr(pick.randint(*pick.choice(ranges))) for _ in range(3)) for _ in range(8)
        ]
        value = {k: {kk: i for i, kk in enumerate(reversed(keys))} for k in keys}
        assert _fast_json(value) == _json(value)


def random_floats(pick: random.Random):
    """Floats of every magnitude: from random bits, and near the ones orjson writes otherwise."""
    bits = struct.unpack("d", struct.pack("Q", pick.getrandbits(64)))[0]
    for v in (
        bits,
        pick.uniform(-1, 1) * 10.0 ** pick.randint(-12, 20),
        pick.uniform(-1, 1) * 10.0 ** pick.randint(-4, 16),
    ):
        if math.isfinite(v):
            yield v


def test_random_floats_are_written_alike_wherever_the_fast_text_is_taken():
    pick = random.Random(5)
    taken = refused = 0
    while taken < 20_000:
        for v in random_floats(pick):
            fields = {**GOOD_FIELDS, "meta": {"x": v, "y": [v, 0.5]}, "outcome": v}
            written = _plain_text(fields, STORE.time_text)
            if written is None:
                refused += 1
                continue
            taken += 1
            assert written == (old := _cells(fields, STORE.time_text), row_text(old)), v
    assert refused  # the floats orjson writes otherwise were met, and refused


@pytest.mark.parametrize(
    "value", [1e-05, 1.2345678901234567e-05, 9.99e-05, 1e-09, 1.5e-07, -3e-06, 5e-08]
)
def test_a_float_orjson_writes_otherwise_takes_its_line_to_the_old_encoder(value):
    assert _fast_json(value) != _json(value)
    fields = {**GOOD_FIELDS, "meta": {"v": [0, value]}}
    assert _plain_text(fields, STORE.time_text) is None
    fast, _ = serialise(1, fields, STORE, plain=True)
    old, _ = serialise(1, fields, STORE, plain=False)
    assert (fast.payload, fast.digest) == (old.payload, old.digest)


@pytest.mark.parametrize(
    "number", [2**53 + 1, 10**15, -(10**15) + 7, 2**63 - 1, -(2**63), 2**64 - 1, 10**18]
)
def test_integers_orjson_holds_are_written_as_the_old_encoder_writes_them(number):
    assert _fast_json({"n": number, "l": [number]}) == _json({"n": number, "l": [number]})


def test_an_integer_past_64_bits_takes_its_line_to_the_old_encoder():
    fields = {**GOOD_FIELDS, "meta": {"n": 2**64}}
    assert _plain_text(fields, STORE.time_text) is None
    fast, _ = serialise(1, fields, STORE, plain=True)
    assert fast.payload == serialise(1, fields, STORE, plain=False)[0].payload


def test_a_lone_surrogate_is_refused_on_either_path():
    # A line cannot carry one (the readers refuse it: above); a value that did would fail
    # serialisation on the fast path exactly as on the old one.
    with pytest.raises(orjson.JSONEncodeError):
        _fast_json({"a": "\ud800"})
    assert _plain_text({**GOOD_FIELDS, "outcome": {"a": "x\udc00"}}, STORE.time_text) is None
    for plain in (True, False):
        with pytest.raises(UnicodeEncodeError):
            serialise(4, {**GOOD_FIELDS, "outcome": {"note": "x\udc00y"}}, STORE, plain=plain)
    for raw in (b'{"a": "\\ud800"}', b'{"a": "\xed\xa0\x80"}'):
        ((_, value, error, plain),) = _read([raw])
        assert (value, plain) == (None, False)
        assert error is not None


GOOD_FIELDS = {
    "id": "T-1",
    "kind": "failure",
    "task": "a task",
    "steps": [{"tool": "git", "input": "push", "output": "é\t\n\u2028😀", "n": -0.0}],
    "outcome": {"status": "failed", "z": None, "a": [1, 2.5, True]},
    "metrics": {"coherence": 0.8, "task_completion": 0.1},
    "signature": ["tool:git"],
    "notices": [],
    "session_id": "",
    "started_at": None,
    "corpus": "",
    "expected_rule": None,
    "replayable": True,
    "replay_input": None,
    "meta": {"ü": 1, "a": {"b": "\\"}},
}


class CopyStore:
    copy_text = True
    time_text = staticmethod(_PostgresStore.time_text)
    row_tail = b"\t2026-12-01T00:00:00+00:00\n"


STORE = CopyStore()


AWKWARD_LINES = [
    b'{"id": "A-1", "kind": "failure", "task": "t\\u00e9\\t\\n\\u2028", "steps": [{"tool": "x", '
    b'"b": 1, "a": "\\\\N"}], "outcome": {"z": 1, "\xc3\xa9": 2, "\xf0\x9f\x98\x80": 3}, '
    b'"metrics": {"coherence": 1, "task_completion": 0}, "signature": ["tool:x"], '
    b'"meta": {"n": 123456789012345, "f": -0.0, "g": 0.0001, "h": 1234567890123456.7}}',
    b'{"id": "A-2", "kind": "success", "task": "2e5 and 1.00001 in text", "steps": [], '
    b'"outcome": "ok", "metrics": {"coherence": 1e-05}, "signature": ["tool:y"]}',
    b'{"id": "A-3", "kind": "near_miss", "task": "small", "steps": [], "outcome": null, '
    b'"metrics": {"coherence": 0.00001}, "signature": ["tool:y"], "meta": {"big": 1e16}}',
    b'{"id": "A-4", "kind": "failure", "task": "derived", "steps": [{"tool": "bash", '
    b'"input": "ls", "exit_code": 2, "error": "No such file"}], "outcome": {}, '
    b'"metrics": {"coherence": 0.5}}',
    b'{"id": "A-5", "kind": "failure", "task": "\\u007f\\u001f", "steps": [{"\\u0001": "\\b\\f"}], '
    b'"outcome": {"b": {"d": 1, "c": [{}]}}, "metrics": {}, "signature": ["tool:z"], '
    b'"replay_input": {"q": "\\"quoted\\""}, "expected_rule": {"trigger": "t", "directive": "d"}}',
]


@pytest.mark.parametrize("raw", AWKWARD_LINES)
def test_an_awkward_line_serialises_to_the_same_bytes_and_hash_on_either_path(raw):
    ((number, value, error, plain),) = _read([raw])
    assert error is None
    fields, errors = parse_trajectory(number, value)
    assert not errors
    fast, _ = serialise(number, fields, STORE, plain=plain)
    old, _ = serialise(number, fields, STORE, plain=False)
    assert (fast.payload, fast.digest) == (old.payload, old.digest)


def test_a_good_plain_line_takes_the_fast_path_and_writes_what_the_old_one_does():
    fields = dict(GOOD_FIELDS)
    cells = _cells(fields, STORE.time_text)
    assert _plain_text(fields, STORE.time_text) == (cells, row_text(cells))
    fast, _ = serialise(1, fields, STORE, plain=True)
    old, _ = serialise(1, fields, STORE, plain=False)
    assert fast.payload == old.payload
    assert fast.digest == old.digest == stored_digest(fields, STORE.time_text)
