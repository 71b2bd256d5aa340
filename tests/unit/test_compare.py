"""Extraction accuracy (semantics §12): token-F1 baseline, word diff, atoms, the comparator.

Pure functions: no database, no Django settings needed.
"""

import json
import os
from pathlib import Path

import pytest

from comparison import compare as extraction
from comparison import semantic as comparator
from comparison.compare import (
    compare_many,
    compare_rules,
    token_f1,
    trigger_atoms,
    word_diff,
)

EVAL = Path(extraction.__file__).parent / "data" / "extraction_eval.jsonl"

F001 = {
    "trigger": "when git push fails with non-fast-forward",
    "directive": "fetch and rebase onto the remote branch, then push again",
}


def rule(trigger: str, directive: str) -> dict:
    return {"trigger": trigger, "directive": directive}


# --- token-F1, the naive baseline (semantics §12) ---------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("when git push fails", "when git push fails", 1.0),
        ("When Git push FAILS!", "when git push fails", 1.0),
        ("retry the request", "back off exponentially", 0.0),
        ("", "", 1.0),
        ("", "something", 0.0),
        # 2 shared of 4 and 2 tokens: precision 1.0, recall 0.5
        ("push the branch again", "push again", pytest.approx(2 / 3)),
    ],
)
def test_token_f1_counts_shared_words(a, b, expected):
    assert token_f1(a, b) == expected


# --- word diff for the dashboard (semantics §12) --------------------------------------


def test_word_diff_marks_kept_deleted_and_inserted_words_in_reading_order():
    ops = word_diff(
        "when git push fails with non-fast-forward",
        "when git push fails with authentication denied",
    )
    assert ops == [
        ("keep", "when"),
        ("keep", "git"),
        ("keep", "push"),
        ("keep", "fails"),
        ("keep", "with"),
        ("delete", "non-fast-forward"),
        ("insert", "authentication"),
        ("insert", "denied"),
    ]


def test_word_diff_of_identical_text_keeps_every_word():
    assert word_diff(F001["directive"], F001["directive"]) == [
        ("keep", w) for w in F001["directive"].split()
    ]


def test_word_diff_ignores_case_and_trailing_punctuation_but_shows_the_extracted_spelling():
    assert word_diff("Retry the push.", "retry the PUSH") == [
        ("keep", "retry"),
        ("keep", "the"),
        ("keep", "PUSH"),
    ]


def test_word_diff_handles_empty_sides():
    assert word_diff("", "back off") == [("insert", "back"), ("insert", "off")]
    assert word_diff("back off", "") == [("delete", "back"), ("delete", "off")]


# --- failure-mode atoms read from prose (semantics §1, §11) ---------------------------


@pytest.mark.parametrize(
    ("text", "must_have"),
    [
        (
            "when git push fails with non-fast-forward",
            {"tool:git", "action:git.push", "error:non_fast_forward"},
        ),
        (
            "if the remote rejects your push because it has commits you do not have locally",
            {"error:non_fast_forward"},
        ),
        ("when git push fails with authentication denied", {"tool:git", "error:auth_denied"}),
        ("when the API returns 429 Too Many Requests", {"status:429", "error:rate_limited"}),
        ("if you are being rate limited by the API", {"error:rate_limited"}),
        ("when nginx returns 502 Bad Gateway", {"tool:nginx", "status:502", "error:bad_gateway"}),
        ("when a container exits with code 137", {"exit:137", "error:out_of_memory"}),
        ("when aws cli fails with ExpiredToken", {"tool:aws", "error:token_expired"}),
        ("when npm ci complains the lockfile is out of sync", {"action:npm.ci"}),
        ("when OAuth login fails with invalid_grant", {"error:invalid_grant"}),
        ("when a transaction fails with deadlock detected", {"error:deadlock"}),
        ("when writing a file fails with No space left on device", {"error:disk_full"}),
    ],
)
def test_trigger_atoms_reads_failure_modes(text, must_have):
    assert must_have <= trigger_atoms(text)


def test_trigger_atoms_does_not_invent_status_codes_from_sizes():
    assert not any(a.startswith("status:") for a in trigger_atoms("when a file is over 400 MB"))


def test_trigger_atoms_of_empty_text_is_empty():
    assert trigger_atoms("") == set()


# --- the comparator (semantics §12) ---------------------------------------------------

REWORDINGS = [
    (
        F001,
        rule(
            "if the remote rejects your push because it has commits you do not have locally",
            "pull with --rebase to integrate upstream work before pushing",
        ),
    ),
    (
        rule(
            "when the API returns 429 Too Many Requests",
            "wait for the Retry-After interval and back off exponentially before retrying",
        ),
        rule(
            "if you are being rate limited by the API",
            "slow down: honour the retry-after header and increase the delay between attempts",
        ),
    ),
    # Steps in the same order, said the other way round; a rejected option reworded.
    (
        rule("when a webhook request arrives", "verify its signature before processing the event"),
        rule(
            "if a webhook call comes in",
            "after checking that the signature is valid, handle the event",
        ),
    ),
    (
        rule(
            "when package-lock.json has merge conflicts",
            "regenerate it with npm install instead of hand-editing the conflict markers",
        ),
        rule(
            "if the npm lock file is conflicted after a merge",
            "do not resolve the markers by hand; rerun npm install to rebuild it",
        ),
    ),
    (
        rule(
            "when a transaction fails with deadlock detected",
            "retry the whole transaction after a short randomized delay",
        ),
        rule(
            "if postgres aborts the transaction as a deadlock victim",
            "run the transaction again from the start after a small jittered pause",
        ),
    ),
]

SAME_WORDS_OTHER_MEANING = [
    (F001, rule("when git push fails with authentication denied", F001["directive"])),
    (F001, rule(F001["trigger"], "force push to overwrite the remote branch")),
    (
        rule(
            "when the API returns 429 Too Many Requests", "back off exponentially before retrying"
        ),
        rule("when the API returns 429 Too Many Requests", "retry immediately in a tight loop"),
    ),
    (
        rule(
            "when the API returns 429 Too Many Requests", "back off exponentially before retrying"
        ),
        rule(
            "when the API returns 503 Service Unavailable", "back off exponentially before retrying"
        ),
    ),
    (
        rule(
            "when a commit is rejected by the pre-commit hook", "run the formatter and commit again"
        ),
        rule(
            "when a commit is rejected by the pre-commit hook", "commit with --no-verify to skip it"
        ),
    ),
    (
        rule(
            "when comparing a column to NULL with = returns nothing",
            "use IS NULL instead of = NULL",
        ),
        rule(
            "when comparing a column to NULL with = returns nothing",
            "use = NULL instead of IS NULL",
        ),
    ),
    # Preferred and rejected flags swapped: a flag is one term, not three words.
    (
        rule(
            "when installing from a private index", "use --index-url instead of --extra-index-url"
        ),
        rule(
            "when installing from a private index", "use --extra-index-url instead of --index-url"
        ),
    ),
    # The extracted rule does what the expected one rules out.
    (
        rule(
            "when executing a script fails with permission denied",
            "add the execute bit with chmod +x instead of running it as root",
        ),
        rule("when executing a script fails with permission denied", "run the script with sudo"),
    ),
    # ... or the expected one does what the extracted one forbids; the negation ends with
    # its clause ("do not rebase; merge" does not forbid merging).
    (
        F001,
        rule(F001["trigger"], "do not rebase; merge the latest changes before pushing again"),
    ),
    (
        rule(
            "when the same webhook event is delivered twice",
            "deduplicate by event ID so the payment is processed once",
        ),
        rule(
            "when the same webhook event is delivered twice",
            "do not deduplicate; process every delivery as a new payment",
        ),
    ),
    # The same steps in the opposite order.
    (
        rule("when a webhook request arrives", "verify its signature before processing the event"),
        rule(
            "when a webhook request arrives",
            "process the event first and verify the signature afterwards",
        ),
    ),
    # A compound term with one part swapped.
    (
        rule("when ansible fails with 'Missing sudo password'", "rerun it with --ask-become-pass"),
        rule("when ansible fails with 'Missing sudo password'", "rerun it with --ask-vault-pass"),
    ),
    # The same switch set the other way.
    (
        rule(
            "when Celery tasks are lost if a worker is killed mid-task",
            "set acks_late=True and task_reject_on_worker_lost=True for those tasks",
        ),
        rule(
            "when Celery tasks are lost if a worker is killed mid-task",
            "set acks_late=False and task_reject_on_worker_lost=False for those tasks",
        ),
    ),
    # Another quoted message is another failure, whatever the advice says.
    (
        rule(
            "when alembic upgrade fails with 'Multiple head revisions are present'",
            "create a merge revision with alembic merge heads and then upgrade",
        ),
        rule(
            "when alembic upgrade fails with 'Can't locate revision identified by'",
            "create a merge revision with alembic merge heads and then upgrade",
        ),
    ),
    # Steps in the opposite order, the second one spelt with a doubled consonant.
    (
        rule(
            "when testing chart template changes",
            "render them locally with helm template before running helm upgrade",
        ),
        rule(
            "when testing chart template changes",
            "run helm upgrade before rendering them locally with helm template",
        ),
    ),
    # Turning the check off is not fixing what it found.
    (
        rule(
            "when all targets turn unhealthy right after a deploy",
            "check that the health check path and port match the new app",
        ),
        rule(
            "when all targets turn unhealthy right after a deploy",
            "disable the health check so traffic reaches the targets",
        ),
    ),
]


@pytest.mark.parametrize(("expected", "extracted"), REWORDINGS)
def test_a_rewording_is_a_match_although_it_shares_few_words(expected, extracted):
    result = compare_rules(extracted, expected)
    assert result["verdict"] == "match", result["why"]
    assert result["token_f1"] < 0.5  # the baseline would have failed it


@pytest.mark.parametrize(("expected", "extracted"), SAME_WORDS_OTHER_MEANING)
def test_same_words_with_another_meaning_is_a_miss(expected, extracted):
    result = compare_rules(extracted, expected)
    assert result["verdict"] == "miss", result
    assert result["conflicts"], "a miss on shared words must say what differs"


def test_an_identical_rule_is_a_match_with_token_f1_one():
    result = compare_rules(dict(F001), F001)
    assert result["verdict"] == "match"
    assert result["token_f1"] == 1.0
    assert result["trigger"]["token_f1"] == result["directive"]["token_f1"] == 1.0
    assert result["semantic"] == pytest.approx(1.0)
    assert result["signature_agreement"] == 1.0
    assert all(op == "keep" for op, _ in result["trigger"]["diff"])


def test_result_has_every_score_per_field_and_is_json_serialisable():
    result = compare_rules(*REWORDINGS[0][::-1])
    for field in ("trigger", "directive"):
        assert set(result[field]) >= {"token_f1", "semantic", "diff"}
        assert 0.0 <= result[field]["semantic"] <= 1.0
    assert 0.0 <= result["semantic"] <= 1.0
    assert 0.0 <= result["signature_agreement"] <= 1.0
    assert result["verdict"] in {"match", "partial", "miss"}
    assert isinstance(result["why"], str) and result["why"]
    assert json.loads(json.dumps(result)) == result


def test_the_verdict_does_not_read_the_token_f1_it_shows(monkeypatch):
    pairs = [(x, e) for e, x in REWORDINGS + SAME_WORDS_OTHER_MEANING]
    before = [r["verdict"] for r in compare_many(pairs)]
    for forced in (0.0, 1.0):
        monkeypatch.setattr(extraction, "token_f1", lambda a, b, forced=forced: forced)
        assert [r["verdict"] for r in compare_many(pairs)] == before


def test_high_token_f1_can_miss_and_low_token_f1_can_match():
    expected, extracted = SAME_WORDS_OTHER_MEANING[0]
    miss = compare_rules(extracted, expected)
    expected, extracted = REWORDINGS[0]
    match = compare_rules(extracted, expected)
    assert miss["token_f1"] > match["token_f1"]
    assert (miss["verdict"], match["verdict"]) == ("miss", "match")


def test_a_conflicting_extracted_signature_turns_a_match_into_a_miss():
    expected, extracted = REWORDINGS[0]
    assert compare_rules(extracted, expected)["verdict"] == "match"
    conflicting = compare_rules(
        extracted, expected, extracted_signature=["tool:git", "error:auth_denied"]
    )
    assert conflicting["verdict"] == "miss"
    agreeing = compare_rules(
        extracted,
        expected,
        extracted_signature=["action:git.push", "error:non_fast_forward", "breach:task_completion"],
    )
    assert agreeing["verdict"] == "match"
    assert (
        agreeing["signature_agreement"] >= compare_rules(extracted, expected)["signature_agreement"]
    )


def test_compare_many_gives_the_same_answers_as_one_by_one():
    pairs = [(x, e) for e, x in REWORDINGS + SAME_WORDS_OTHER_MEANING]
    assert compare_many(pairs) == [compare_rules(x, e) for x, e in pairs]
    assert compare_many([]) == []


def test_compare_many_over_several_processes_gives_the_same_answers_in_order():
    rows = eval_rows()[: extraction.PARALLEL_MIN + 40]
    pairs = [(r["extracted"], r["expected"]) for r in rows]
    signatures = [None, ["error:non_fast_forward"]] + [None] * (len(pairs) - 2)
    assert compare_many(pairs, signatures=signatures, workers=2) == compare_many(
        pairs, signatures=signatures
    )


def test_a_bad_pair_in_a_batch_over_several_processes_is_refused_as_in_one():
    pairs = [(r["extracted"], r["expected"]) for r in eval_rows()[: extraction.PARALLEL_MIN]]
    pairs.append(({"trigger": "x", "directive": 3}, F001))
    with pytest.raises(TypeError, match="directive must be a string"):
        compare_many(pairs, workers=2)


def _verdicts_in_a_daemon(pairs, queue):
    queue.put([r["verdict"] for r in compare_many(pairs, workers=2)])


def test_a_daemon_process_spreads_a_large_batch_too():
    """A Celery worker's process is a daemon, which multiprocessing forbids children."""
    import multiprocessing

    pairs = [(r["extracted"], r["expected"]) for r in eval_rows()[: extraction.PARALLEL_MIN]]
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    daemon = context.Process(target=_verdicts_in_a_daemon, args=(pairs, queue), daemon=True)
    daemon.start()
    # A few kilobytes of verdicts: the queue's pipe holds them until they are read.
    daemon.join(timeout=120)
    assert daemon.exitcode == 0
    assert queue.get(timeout=5) == [r["verdict"] for r in compare_many(pairs)]


def test_a_worker_that_ends_without_results_is_an_error_naming_how_it_ended(monkeypatch):
    monkeypatch.setattr(extraction, "_compare_job", lambda job: os._exit(3))
    pairs = [(r["extracted"], r["expected"]) for r in eval_rows()[: extraction.PARALLEL_MIN]]
    with pytest.raises(RuntimeError, match="ended without its results \\(exit status 3\\)"):
        compare_many(pairs, workers=2)


def test_a_fork_refused_stops_the_children_already_started_and_leaks_no_pipe(monkeypatch):
    real_fork, forks = os.fork, []

    def fork_once():
        if forks:
            raise OSError(11, "Resource temporarily unavailable")
        forks.append(real_fork())
        return forks[-1]

    open_before = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(os, "fork", fork_once)
    pairs = [(r["extracted"], r["expected"]) for r in eval_rows()[: extraction.PARALLEL_MIN]]
    with pytest.raises(OSError, match="Resource temporarily unavailable"):
        compare_many(pairs, workers=2)
    if forks[0] == 0:  # the child that was started, should it ever get here
        os._exit(0)
    assert len(os.listdir("/proc/self/fd")) == open_before
    with pytest.raises(ChildProcessError):
        os.waitpid(forks[0], os.WNOHANG)


class _Connection:
    """Stands for a library's client that registers a hook for multiprocessing's children
    (kombu does, and its hook hung a child on the parent's Redis socket)."""


def test_the_children_run_none_of_the_hooks_registered_for_multiprocessings(tmp_path):
    from multiprocessing.util import register_after_fork

    ran = tmp_path / "hook ran"
    connection = _Connection()
    register_after_fork(connection, lambda _: ran.write_text(str(os.getpid())))
    pairs = [(r["extracted"], r["expected"]) for r in eval_rows()[: extraction.PARALLEL_MIN]]
    assert compare_many(pairs, workers=2) == compare_many(pairs)
    assert not ran.exists()
    del connection


def test_a_missing_field_counts_as_empty_text():
    result = compare_rules({"trigger": F001["trigger"]}, F001)
    assert result["directive"]["token_f1"] == 0.0
    assert result["verdict"] != "match"


def test_a_non_string_field_is_refused():
    with pytest.raises(TypeError, match="directive must be a string"):
        compare_rules({"trigger": "x", "directive": 3}, F001)


def test_a_missing_model_file_fails_loudly_naming_it(monkeypatch, tmp_path):
    monkeypatch.setattr(comparator, "MODEL_BIN", tmp_path / "minilm_static.bin")
    monkeypatch.setattr(comparator, "_model", None)
    with pytest.raises(comparator.ComparatorUnavailable, match="minilm_static.bin"):
        compare_rules(F001, F001)


def test_the_model_loads_once_per_process():
    assert comparator.load_embedder() is comparator.load_embedder()


# --- the shipped evaluation set (semantics §12) ---------------------------------------


def eval_rows() -> list[dict]:
    return [json.loads(line) for line in EVAL.read_text().splitlines() if line.strip()]


# blind_a to blind_j and blind_m to blind_r, each scored once, and blind_t to blind_w
# (scored once by the model of the round before, then written in) train; blind_k, blind_l,
# blind_s, blind_x, blind_y and blind_z are held out (train.HELD_OUT) and appended to the
# data once scored: absent or present, both pass.
SPLITS = {"dev", "heldout", "fresh", "fresh2", "train_a", "train_b"}
SPLITS |= {"blind_a", "blind_b", "blind_c", "blind_d", "blind_e", "blind_f"}
SPLITS |= {"blind_g", "blind_h", "blind_i", "blind_j"}
SPLITS |= {"blind_m", "blind_n", "blind_o", "blind_p", "blind_q", "blind_r"}
SPLITS |= {"blind_t", "blind_u", "blind_v", "blind_w"}
SPLITS |= {"blind_k", "blind_l", "blind_s", "blind_x", "blind_y", "blind_z"}
SPLITS |= {"blind_aa", "blind_ab", "blind_ac", "blind_ad", "blind_ae", "blind_af"}
SPLITS |= {"blind_ba", "blind_bb", "blind_bc", "blind_bd", "blind_be", "blind_bf"}
SPLITS |= {"blind_ca", "blind_cb", "blind_cc", "blind_cd", "blind_ce", "blind_cf"}
# Pairs in other writers' styles (shorthand, non-native English, narratives, tickets,
# flags for words) with same-domain hard negatives; blind_style_x is held out.
SPLITS |= {f"train_style_{c}" for c in "abcdefg"} | {"blind_style_x"}


def test_the_eval_set_is_large_varied_and_well_formed():
    rows = eval_rows()
    assert len(rows) >= 800
    assert len({r["domain"] for r in rows}) >= 60
    for r in rows:
        for side in ("expected", "extracted"):
            assert set(r[side]) == {"trigger", "directive"}
        assert r["label"] == (1 if r["kind"] in {"reworded", "identical"} else 0)
        assert r["split"] in SPLITS
        assert r["category"]
    kinds = {r["kind"] for r in rows}
    assert kinds == {"reworded", "same_words_other_meaning", "identical", "unrelated"}


@pytest.mark.parametrize(("train", "blind"), [("train_a", "blind_a"), ("train_b", "blind_b")])
def test_each_blind_split_is_written_over_domains_its_training_split_lacks(train, blind):
    rows = eval_rows()
    train_domains = {r["domain"] for r in rows if r["split"] == train}
    blind_domains = {r["domain"] for r in rows if r["split"] == blind}
    assert len(blind_domains) >= 15
    assert not train_domains & blind_domains


def test_every_error_category_is_in_the_blind_splits():
    rows = eval_rows()
    blind = {r["category"] for r in rows if r["split"].startswith("blind")}
    assert {
        "jargon_equivalence",
        "reworded_connective",
        "plain_synonym",
        "same_trigger_different_advice",
        "opposite_advice",
        "number_or_class_changed",
        "roles_swapped",
        "different_precondition",
    } <= blind


def auc(labels, scores):
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def test_the_comparator_ranks_the_eval_set_far_better_than_token_f1():
    rows = eval_rows()
    results = compare_many([(r["extracted"], r["expected"]) for r in rows])
    labels = [r["label"] for r in rows]
    comparator_auc = auc(labels, [r["score"] for r in results])
    assert comparator_auc >= 0.9
    assert comparator_auc > auc(labels, [r["token_f1"] for r in results]) + 0.3
    hits = [(r["verdict"] == "match") == bool(y) for r, y in zip(results, labels, strict=True)]
    assert sum(hits) / len(hits) >= 0.85


# --- the error categories of the labelled pairs, on rules written for these tests ---------

CATEGORY_CASES = [
    # plain synonyms and ops jargon
    (
        "match",
        rule("when logs contain API keys", "redact the keys before shipping the logs"),
        rule("if API keys show up in the logs", "scrub the keys before the logs are shipped"),
    ),
    (
        "match",
        rule("when the new checkout page breaks orders", "turn the feature flag off"),
        rule("if orders fail on the new checkout page", "disable the toggle for it"),
    ),
    # a status class or a number changed
    (
        "miss",
        rule("when the upstream returns 5xx", "retry with exponential backoff"),
        rule("when the upstream returns 4xx", "retry with exponential backoff"),
    ),
    (
        "miss",
        rule("when a job failed five times", "page the on-call engineer"),
        rule("when a job failed once", "page the on-call engineer"),
    ),
    # the same trigger with other or opposite advice
    (
        "miss",
        rule("when the connection pool is exhausted", "find and fix the leaked connections"),
        rule("when the connection pool is exhausted", "raise the pool size limit"),
    ),
    (
        "miss",
        rule(
            "when autovacuum falls behind on a busy table",
            "tune autovacuum to run more often on that table",
        ),
        rule("when autovacuum falls behind on a busy table", "disable autovacuum on that table"),
    ),
]


@pytest.mark.parametrize(("verdict", "expected", "extracted"), CATEGORY_CASES)
def test_each_error_category_gets_its_verdict(verdict, expected, extracted):
    result = compare_rules(extracted, expected)
    assert result["verdict"] == verdict, result["why"]


def test_the_score_is_a_probability_above_one_half_for_the_same_rule_only():
    expected, reworded = REWORDINGS[1]
    wrong = SAME_WORDS_OTHER_MEANING[2][1]
    copy, rewording, other = (
        compare_rules(x, expected)["score"] for x in (expected, reworded, wrong)
    )
    assert min(copy, rewording) > 0.5 > other >= 0.0
    assert max(copy, rewording) <= 1.0


def test_the_last_blind_splits_and_any_held_out_one_are_over_domains_no_other_split_has():
    from comparison.train import BLIND, HELD_OUT

    rows = eval_rows()
    present = {r["split"] for r in rows}
    assert {"blind_g", "blind_h"} <= set(BLIND) <= present
    assert not set(HELD_OUT) & set(BLIND)
    # The held-out splits are written while this runs: each is checked once it is there.
    written = ("blind_g", "blind_h", "blind_m", "blind_n", "blind_o", "blind_p", "blind_q")
    written += ("blind_r", "blind_t", "blind_u", "blind_v", "blind_w")
    written += ("blind_k", "blind_l", "blind_s", "blind_x", "blind_y", "blind_z")
    written += ("blind_aa", "blind_ab", "blind_ac", "blind_ad", "blind_ae", "blind_af")
    for split in (*written, *(s for s in HELD_OUT if s in present)):
        held = [r for r in rows if r["split"] == split]
        others = {r["domain"] for r in rows if r["split"] != split}
        # blind_q lost the four domains it shared with a held-out split (12 are left).
        assert len(held) >= 120
        assert all(sum(r["domain"] == d for r in held) == 10 for d in {r["domain"] for r in held})
        assert len({r["category"] for r in held}) >= 10
        assert not {r["domain"] for r in held} & others
