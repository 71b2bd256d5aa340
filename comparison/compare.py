"""Extraction accuracy: is the extracted rule the same rule as the expected one? (semantics §12)

Pure functions, plain data in and out; the page, the API and the commands call them.

The answer is `score`, the probability that the two state the same rule, read by a model
fitted on hand-labelled pairs (model.py, train.py) from every signal the comparator has
(features.py): the trigger's failure-mode atoms (triggers.py), the directive's stance and
how two directives differ (directives.py), amounts and status classes (quantities.py), a
swapped key term (swaps.py) and an offline embedding model (semantic.py), read mostly over
the words the two texts do not share. Jargon and ops synonyms are first rewritten to one
spelling (lexicon.py). Token-F1 is shown as the naive baseline and never decides alone: it
punishes a rewording and rewards a wrong rule that shares the words.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
from contextlib import contextmanager, suppress

from .connectives import plain_order
from .directives import directive_stances, stance_conflicts
from .features import Evidence, field_texts, pair_evidence
from .framing import unframed
from .lexicon import canonical
from .model import load_model
from .style import plain_style
from .text import diff_runs, plain_spelling, token_f1, word_diff
from .triggers import declared_atoms, signature_agreement, trigger_atoms

__all__ = [
    "COMPONENTS",
    "FIELDS",
    "compare_many",
    "compare_rules",
    "directive_stances",
    "evidence_many",
    "signature_agreement",
    "stance_conflicts",
    "token_f1",
    "trigger_atoms",
    "word_diff",
]

FIELDS = ("trigger", "directive")

# What each number of a result means, in one line, for the page and the API.
COMPONENTS = {
    "score": (
        "probability that the extracted rule is the expected rule, from a model fitted on "
        "hand-labelled pairs; the verdict is read from it (uncertain in the band where the "
        "model is not sure: a reviewer decides)"
    ),
    "semantic": (
        "embedding similarity of the wording, taken mostly over the words the two texts do "
        "not share; a component only: shared words can make a different rule look close"
    ),
    "signature_agreement": (
        "how far the failure-mode atoms read from both triggers agree (error class, status, "
        "tool, action); 0.5 when neither names any"
    ),
    "token_f1": (
        "share of words in common, the naive baseline: low for a good rewording, high for a "
        "wrong rule in the same words; never decides"
    ),
}


def compare_rules(
    extracted: dict, expected: dict, *, extracted_signature: list[str] | None = None
) -> dict:
    """Score one extracted rule against its expected rule (semantics §12).

    `extracted` and `expected` are `{"trigger": str, "directive": str}`; the optional
    `extracted_signature` is the candidate's own atom list (semantics §1), compared with
    the atoms read from the expected trigger. Returns a JSON-serialisable dict led by the
    `score` (a probability) and the `verdict` read from it (`match`, `partial`, `miss`,
    or `uncertain` in the band where the model is not sure: a reviewer decides); `semantic`,
    `signature_agreement` and `token_f1` are components, described in `components`.
    """
    return compare_many([(extracted, expected)], signatures=[extracted_signature])[0]


def compare_many(
    pairs: list[tuple[dict, dict]],
    *,
    signatures: list[list[str] | None] | None = None,
    workers: int = 1,
) -> list[dict]:
    """`compare_rules` over many `(extracted, expected)` pairs, embedding in one batch.

    `workers` > 1 spreads a batch of at least `PARALLEL_MIN` pairs over that many child
    processes, forked once the model and the tables are loaded here so that they share
    them; the results are the same, in the same order, and an error in a child is raised
    here. Where the platform cannot fork, the batch runs here."""
    if workers > 1 and len(pairs) >= PARALLEL_MIN and hasattr(os, "fork"):
        return _compare_parallel(pairs, signatures, workers)
    with _collection_deferred():
        return _compare_many(pairs, signatures)


# Below this many pairs, forking costs more than it saves (the children start in ~20 ms
# each; a pair takes about 1 ms).
PARALLEL_MIN = 512


def _compare_parallel(
    pairs: list[tuple[dict, dict]], signatures: list[list[str] | None] | None, workers: int
) -> list[dict]:
    """The batch in `workers` shares, one a child process.

    Plain `os.fork`, not `multiprocessing`: a multiprocessing child first runs the hooks
    other libraries registered for it (kombu's closes the parent's Redis connections from
    the child, reading a reply the parent's own client is waiting for: the child hung), and
    a daemon process (a Celery worker's) may not start one. A child here runs only the
    comparator over its share, writes its pickled results (or its error) to a pipe and
    leaves with `os._exit`, running nothing of the parent's."""
    signatures = signatures if signatures is not None else [None] * len(pairs)
    if len(signatures) != len(pairs):
        raise ValueError("signatures must have one entry per pair")
    # Every table the comparator reads lazily is loaded before the fork, by comparing the
    # first pair here: each child would otherwise load its own (seconds, and the memory
    # twice).
    results = compare_many(pairs[:1], signatures=signatures[:1])
    rest, rest_signatures = pairs[1:], signatures[1:]
    # Child k takes every `workers`-th pair from the k-th: a batch in the order it came
    # (a file of one kind of rule, then another) is shared alike.
    workers = min(workers, len(rest))
    children: list[tuple[int, int]] = []
    received: dict[int, bytes] | None = None
    statuses: list[int] = []
    try:
        for k in range(workers):
            children.append(_fork_job((rest[k::workers], rest_signatures[k::workers])))
        received = _read_all([fd for _, fd in children])
    finally:
        # Each child has written everything and is leaving; if the parent was
        # interrupted before, the children still running are stopped.
        for pid, fd in children:
            if received is None:
                with suppress(OSError):
                    os.close(fd)
            statuses.append(_reap(pid, stop=received is None))
    # Read with the collector held off, as a batch is made: with it on, unpickling the
    # results cost more than a worker's share of the work.
    merged: list[dict] = [{}] * len(rest)
    with _collection_deferred():
        for k, (_, fd) in enumerate(children):
            if not received[fd]:
                # Killed, or out of memory: it wrote nothing, not even an error.
                raise RuntimeError(
                    f"a comparator worker ended without its results ({_ended(statuses[k])})"
                )
            ok, value = pickle.loads(received[fd])
            if not ok:
                raise value
            merged[k::workers] = value
    return results + merged


def _fork_job(part: tuple[list, list]) -> tuple[int, int]:
    """(the child's pid, the pipe its pickled `(ok, results or error)` comes down)."""
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        # No process to be had (a process or memory limit): the pipe goes with it.
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid:
        os.close(write_fd)
        return pid, read_fd
    try:  # the child
        os.close(read_fd)
        try:
            payload = pickle.dumps((True, _compare_job(part)), pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # noqa: BLE001 - any error is the parent's to raise
            try:
                payload = pickle.dumps((False, exc), pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 - an error that does not pickle, as text
                error = RuntimeError(f"{type(exc).__name__}: {exc}")
                payload = pickle.dumps((False, error), pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_fd, "wb") as out:
            out.write(payload)
    finally:
        os._exit(0)


def _read_all(fds: list[int]) -> dict[int, bytes]:
    """Every pipe read to its end, together: a child blocks on a full pipe until it is
    read, so reading one to its end before the next could wait forever."""
    import selectors

    chunks: dict[int, list[bytes]] = {fd: [] for fd in fds}
    with selectors.DefaultSelector() as selector:
        for fd in fds:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            for key, _ in selector.select():
                chunk = os.read(key.fd, 1 << 20)
                if chunk:
                    chunks[key.fd].append(chunk)
                else:
                    selector.unregister(key.fd)
                    os.close(key.fd)
    return {fd: b"".join(parts) for fd, parts in chunks.items()}


def _reap(pid: int, stop: bool) -> int:
    """The child's wait status, once it has ended."""
    if stop:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def _compare_job(job: tuple[list, list]) -> list[dict]:
    pairs, signatures = job
    with _collection_deferred():
        return _compare_many(pairs, signatures)


@contextmanager
def _collection_deferred():
    """The cyclic garbage collector held off for one batch. A batch makes many small
    objects and no reference cycles, so each collection during it only walks the memo
    tables again (0.17 ms of about 1.6 a pair measured, most of it full collections);
    reference counting still frees everything as it goes. Collection resumes after the
    batch unless something else had turned it off."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _compare_many(
    pairs: list[tuple[dict, dict]], signatures: list[list[str] | None] | None
) -> list[dict]:
    model = load_model()
    evidence = evidence_many(pairs, signatures=signatures)
    if not evidence:
        return []
    scores = model.probabilities([model.vector(found.features) for found in evidence])
    scores = [
        model.bounded(float(score), found.features, declared=False)
        for score, found in zip(scores, evidence, strict=True)
    ]
    declared = [i for i, found in enumerate(evidence) if found.declared_features]
    if declared:
        # As written and as it will match: the rule is only as likely as the lesser.
        as_declared = model.probabilities(
            [model.vector(evidence[i].declared_features) for i in declared]
        )
        for i, score in zip(declared, as_declared, strict=True):
            bounded = model.bounded(float(score), evidence[i].declared_features, declared=True)
            scores[i] = min(scores[i], bounded)
    return [
        _result(extracted, expected, found, float(score), model)
        for (extracted, expected), found, score in zip(pairs, evidence, scores, strict=True)
    ]


def evidence_many(
    pairs: list[tuple[dict, dict]], *, signatures: list[list[str] | None] | None = None
) -> list[Evidence]:
    """The features and findings of every `(extracted, expected)` pair (train.py fits on
    these)."""
    from .semantic import load_embedder

    embedder = load_embedder()
    signatures = signatures if signatures is not None else [None] * len(pairs)
    if len(signatures) != len(pairs):
        raise ValueError("signatures must have one entry per pair")
    evidence: list[Evidence] = []
    for start in range(0, len(pairs), _CHUNK):
        end = start + _CHUNK
        evidence += _evidence_chunk(pairs[start:end], signatures[start:end], embedder)
    return evidence


# Pairs read together, stage by stage (spelling, then the embedding of all their texts,
# then the features). Each stage asks again for what the one before memoised per text or
# per pair (the residual words, tokens, atoms); a whole batch of a few thousand unseen
# pairs pushed those out of the memo tables before the next stage came back for them.
_CHUNK = 256


def _evidence_chunk(
    pairs: list[tuple[dict, dict]], signatures: list[list[str] | None], embedder
) -> list[Evidence]:
    sides = [
        (_canonical_rule(expected), _canonical_rule(extracted)) for extracted, expected in pairs
    ]
    texts = [
        text
        for expected, extracted in sides
        for field in FIELDS
        for text in field_texts(expected[field], extracted[field])
    ]
    vectors = embedder.encode(texts)
    per_pair = 4 * len(FIELDS)
    return [
        pair_evidence(
            expected,
            extracted,
            vectors[i * per_pair : (i + 1) * per_pair],
            embedder,
            declared_atoms(signature or []),
        )
        for i, ((expected, extracted), signature) in enumerate(zip(sides, signatures, strict=True))
    ]


def _canonical_rule(rule: dict) -> dict[str, str]:
    plain = {
        field: plain_style(unframed(plain_spelling(_text(rule, field)), field)) for field in FIELDS
    }
    plain["directive"] = plain_order(plain["directive"])
    return {field: canonical(text) for field, text in plain.items()}


def _text(rule: dict, field: str) -> str:
    value = rule.get(field) if isinstance(rule, dict) else None
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"rule {field} must be a string, got {type(value).__name__}")
    return value


def _result(extracted: dict, expected: dict, found: Evidence, score: float, model) -> dict:
    verdict = model.verdict(score)
    fields = {}
    for field in FIELDS:
        exp, ext = _text(expected, field), _text(extracted, field)
        fields[field] = {
            "token_f1": round(token_f1(exp, ext), 4),
            "semantic": round(found.semantic[field], 4),
            "diff": _diff_lists(exp, ext),
        }
    semantic = (found.semantic["trigger"] + found.semantic["directive"]) / 2
    return {
        "score": round(score, 4),
        "verdict": verdict,
        "why": _why(verdict, score, found),
        "trigger": fields["trigger"],
        "directive": fields["directive"],
        "semantic": round(semantic, 4),
        "signature_agreement": round(found.agreement, 4),
        "token_f1": round((fields["trigger"]["token_f1"] + fields["directive"]["token_f1"]) / 2, 4),
        "conflicts": found.conflicts,
        "doubts": found.doubts,
        "components": COMPONENTS,
    }


def _diff_lists(expected: str, extracted: str) -> list[list[str]]:
    """`word_diff` with each operation a list, as the result carries it, made as lists
    rather than tuples converted one by one."""
    ops: list[list[str]] = []
    for gone, came, kept in diff_runs(expected, extracted):
        if gone:
            ops += [["delete", w] for w in gone.split()]
        if came:
            ops += [["insert", w] for w in came.split()]
        if kept:
            ops += [["keep", w] for w in kept.split()]
    return ops


def _why(verdict: str, score: float, found: Evidence) -> str:
    figures = f"p {score:.2f}; semantic {(found.semantic['trigger'] + found.semantic['directive']) / 2:.2f}, signature {found.agreement:.2f}"
    if verdict == "match":
        doubt = f"; but {found.conflicts[0]}" if found.conflicts else ""
        return f"same rule ({figures}){doubt}"
    if verdict == "uncertain":
        # The band where the fitted model is not sure: a reviewer decides, not a coin.
        found_text = f"; found {'; '.join(found.conflicts[:2])}" if found.conflicts else ""
        return f"uncertain, a reviewer decides ({figures}){found_text}"
    if found.conflicts:
        return f"different rule: {'; '.join(found.conflicts[:2])} ({figures})"
    if verdict == "partial":
        return f"close but not clearly the same ({figures})"
    return f"different rule ({figures})"
