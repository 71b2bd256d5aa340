"""The comparator's parts (semantics §12): the equivalence lexicon, amounts and status
classes, the feature vector, the shipped model and the script that fits it.

Pure functions: no database, no Django settings needed.
"""

import json
import re

import numpy as np
import pytest

from comparison import model as model_lib
from comparison.compare import COMPONENTS, compare_many, compare_rules, evidence_many
from comparison.directives import directive_findings, forbidden_done, steps
from comparison.features import FEATURES, monotone
from comparison.lexicon import canonical
from comparison.quantities import quantities, quantity_agreement, status_class_agreement
from comparison.swaps import explained_share, related
from comparison.text import content, plain_spelling, stem
from comparison.triggers import atoms_of, signature_agreement


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("when CUDA runs out of memory", "when the GPU ran out of VRAM"),
        ("when the pod is OOMKilled", "when the pod is out of memory"),
        ("when open() fails with EMFILE", "when open() fails with too many open files"),
        ("raise the file descriptor limit", "raise ulimit -n"),
        ("when writes fail with ENOSPC", "when writes fail with no space left on device"),
        ("when the API answers 429", "when the API answers 429 Too Many Requests"),
        ("when the upstream returns 5xx", "when the upstream returns server-side errors"),
        ("when the worker gets SIGKILL", "when the worker gets killed"),
        ("when the read fails with ENOENT", "when the read fails with no such file or directory"),
        ("when chmod fails with EACCES", "when chmod fails with permission denied"),
        ("when the socket fails with ETIMEDOUT", "when the socket fails with timed-out"),
        ("raise the TTL of the cache", "raise the expiry of the cache"),
        ("turn the flag off", "disable the toggle"),
        ("scrub the token from the logs", "redact the token from the logs"),
    ],
)
def test_jargon_and_ops_synonyms_read_as_one_spelling(a, b):
    assert content(canonical(a)) == content(canonical(b))


def test_the_lexicon_leaves_a_verb_that_only_looks_like_jargon_alone():
    # "throttle the client" is advice; "throttled" is the server's state.
    assert canonical("throttle the client") == "throttle the client"
    assert canonical("when requests are throttled") == "when requests are rate limited"


@pytest.mark.parametrize(
    ("a", "b", "agreement"),
    [
        ("when the job failed five times", "when the job failed once", -1.0),
        ("retry after 30 seconds", "retry after 30 s", 1.0),
        ("wait 1 minute", "wait 60s", 1.0),
        ("cap the heap at 512 MB", "cap the heap at 1 GB", -1.0),
        ("retry three times", "back off", 0.0),
        # "once" opening a clause is "when", not a count.
        ("once the build finishes, deploy", "deploy after the build", 0.0),
        ("once in staging, run the smoke tests", "run the smoke tests in staging", 0.0),
        # ... and a count after a verb, before a preposition.
        ("when pickup fails 3 times in a row on a rack", "when pickup fails once on a rack", -1.0),
    ],
)
def test_amounts_agree_by_value_and_unit(a, b, agreement):
    assert quantity_agreement(a, b) == agreement


def test_a_version_number_is_not_an_amount():
    assert quantities("upgrade to python 3.12") == frozenset()


@pytest.mark.parametrize(
    ("a", "b", "agreement"),
    [
        ("when the API returns 502", "when the API returns 503", 1.0),
        ("when the API returns 503", "when the API returns 404", -1.0),
        ("when the API returns a server error", "when the API returns 500", 1.0),
        ("when the API fails", "when the API returns 500", 0.0),
    ],
)
def test_status_classes_agree_by_class(a, b, agreement):
    assert status_class_agreement(canonical(a), canonical(b)) == agreement


def test_plain_synonyms_and_shared_stems_are_related_terms():
    assert related({"required"}, {"needed"})
    assert related({"advisories"}, {"advisory"})
    assert not related({"vault"}, {"become"})
    assert stem("advisories") == "advisory"


def test_a_change_of_synonyms_is_explained_and_a_swapped_term_is_not():
    explained, unexplained, one_sided = explained_share(
        "delete node_modules and reinstall", "remove node_modules and reinstall"
    )
    assert explained > 0 and unexplained == one_sided == 0
    explained, unexplained, one_sided = explained_share(
        "rerun it with --ask-become-pass", "rerun it with --ask-vault-pass"
    )
    assert explained == one_sided == 0 and unexplained > 0
    explained, unexplained, one_sided = explained_share(
        "pull the latest changes", "pull the latest changes with rebase"
    )
    assert explained == unexplained == 0 and one_sided > 0


@pytest.mark.parametrize(
    ("expected", "extracted"),
    [
        ("stage the file and continue the merge", "stage the files and continue the merge"),
        ("when the cache is stale", "when the caches are stale"),
        ("when the pre-commit hook rejects it", "when the precommit hook rejects it"),
        ("set up the runner again", "setup the runner again"),
    ],
)
def test_another_inflection_or_a_compound_spelt_apart_is_the_same_word(expected, extracted):
    explained, unexplained, one_sided = explained_share(expected, extracted)
    assert explained > 0 and unexplained == one_sided == 0


def test_a_wordnet_opposite_is_never_a_related_term():
    # WordNet's opposites, none in the lexicon's own list.
    for a, b in (("slow", "fast"), ("empty", "full"), ("cheap", "expensive")):
        assert not related({a}, {b})
    assert related({"slow"}, {"slows"})


def test_two_triggers_naming_the_same_opposed_states_agree():
    rule = {
        "trigger": "when syncing between staging and production",
        "directive": "push code from staging to production, but pull the data the other way",
    }
    agreement, conflicts = signature_agreement(atoms_of(rule["trigger"]), atoms_of(rule["trigger"]))
    assert not conflicts and agreement == 1.0
    assert compare_rules(rule, rule)["verdict"] == "match"
    staging, production = "when the staging deploy fails", "when the production deploy fails"
    assert signature_agreement(atoms_of(staging), atoms_of(production))[1]


def test_a_rule_does_not_forbid_what_its_own_preferred_option_reads_as():
    # The preferred name starts with the rejected one: the rule itself "does" it.
    rule = {"trigger": "when an ISR hands data to a task", "directive": ""}
    for directive in ("use xQueueSendFromISR instead of xQueueSend", "use IS NULL, not = NULL"):
        assert forbidden_done(directive, directive) is None
        assert (
            compare_rules({**rule, "directive": directive}, {**rule, "directive": directive})[
                "verdict"
            ]
            == "match"
        )
    assert forbidden_done("do not retry at once; back off", "retry at once")


def test_a_rule_that_does_not_do_the_ruled_out_act_is_not_said_to_do_it():
    # Demo C-014: editing a file under its new name shares "file" and "new" with the
    # option ruled out ("creating a new file"), not its act.
    expected = {
        "trigger": "if the file to change is not found at the expected path",
        "directive": "locate it first with a repository search instead of creating a new file",
    }
    renamed = {
        "trigger": "when a file edit fails because the path does not exist",
        "directive": "check git log --follow for a rename and edit the file under its new name",
    }
    result = compare_rules(renamed, expected)
    assert not any("rules out" in c for c in result["conflicts"])
    assert "rules out" not in result["why"]
    # A rule that does create the file still does what the other rules out.
    created = {**renamed, "directive": "create a new file at the expected path"}
    assert any(
        "rules out (creating a new file)" in c
        for c in compare_rules(created, expected)["conflicts"]
    )


def test_a_rejected_option_is_not_a_step():
    assert steps("rebuild the lock file instead of editing it by hand") == ("rebuild",)
    assert steps("deploy only after the tests pass") == ("test", "deploy")


def test_doing_what_the_other_rule_does_without_is_a_finding():
    kinds = {
        kind
        for kind, _ in directive_findings(
            "review each advisory before running npm audit fix --force",
            "run npm audit fix --force immediately without reviewing the advisories",
        )
    }
    assert "forbidden" in kinds


# --- the feature vector and the model ------------------------------------------------


def test_every_pair_gets_every_feature_as_a_finite_number():
    pairs = [
        ({"trigger": "when x fails", "directive": "retry"}, {"trigger": "", "directive": ""}),
        ({"trigger": "", "directive": ""}, {"trigger": "when x fails", "directive": "retry"}),
    ]
    for found in evidence_many(pairs):
        assert set(found.features) == set(FEATURES)
        assert all(np.isfinite(v) for v in found.features.values())


@pytest.mark.parametrize(
    ("feature", "direction"),
    [
        ("trigger_agreement", 1),
        ("directive_residual", 1),
        ("trigger_conflict_error", -1),
        ("directive_swapped", -1),
        ("trigger_unexplained", -1),
        ("trigger_changed", 0),
    ],
)
def test_the_model_may_only_move_each_signal_the_way_language_says(feature, direction):
    assert monotone(feature) == direction


def test_the_shipped_model_reads_the_features_the_comparator_computes():
    model = model_lib.load_model()
    assert model.features == list(FEATURES)
    assert 0.0 < model.partial_at < model.match_at < 1.0
    probabilities = model.probabilities(np.zeros((3, len(FEATURES))))
    assert probabilities.shape == (3,)
    assert ((probabilities >= 0) & (probabilities <= 1)).all()


def test_the_exported_trees_give_the_same_log_odds_as_the_fitted_classifier():
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] * X[:, 2] > 0).astype(int)
    fitted = HistGradientBoostingClassifier(max_iter=20, random_state=0).fit(X, y)
    spec = {
        "features": ["a", "b", "c", "d"],
        **model_lib.export_trees(fitted),
        "platt": {"a": 1.0, "b": 0.0},
        "thresholds": {"match": 0.5, "partial": 0.25},
    }
    exported = model_lib.Model(json.loads(json.dumps(spec)))
    assert exported.margins(X) == pytest.approx(fitted.decision_function(X), abs=1e-6)


def test_the_uncertain_band_is_chosen_on_left_out_pairs_and_read_as_a_verdict():
    from comparison import train

    rng = np.random.default_rng(0)
    # Sure pairs far from 0.5, and a muddle around it where the label is a coin.
    y = rng.integers(0, 2, 2000)
    p = np.where(y == 1, rng.uniform(0.7, 1.0, 2000), rng.uniform(0.0, 0.3, 2000))
    muddle = rng.random(2000) < 0.08
    p[muddle] = rng.uniform(0.4, 0.6, muddle.sum())
    band = train.uncertain_band(p, y, 0.5)
    assert band == train.uncertain_band(p, y, 0.5)
    assert band["low"] <= 0.5 < band["high"]
    assert band["accuracy_outside"] >= train.BAND_ACCURACY
    assert band["uncertain_share"] <= train.BAND_MAX_SHARE
    assert band["without_band"]["accuracy_outside"] < band["accuracy_outside"]
    inside = (p >= band["low"]) & (p < band["high"])
    assert band["uncertain_share"] == round(float(inside.mean()), 4)
    # The fewest inside: a band one step narrower on either side misses the target.
    for low, high in ((band["low"] + 0.01, band["high"]), (band["low"], band["high"] - 0.01)):
        if low <= 0.5 < high:
            narrower = train.band_figures(p, y, low, high)
            assert narrower["accuracy_outside"] < train.BAND_ACCURACY or (
                narrower["uncertain_share"] == band["uncertain_share"]
            )
    curve = band["curve"]
    assert [c["most_inside"] for c in curve] == sorted(c["most_inside"] for c in curve)
    accuracies = [c["accuracy_outside"] for c in curve]
    assert accuracies == sorted(accuracies)

    spec = {
        "features": ["a"],
        "baseline": 0.0,
        "roots": [0],
        "feature": [0],
        "threshold": [0.0],
        "left": [-1],
        "right": [-1],
        "value": [0.0],
        "platt": {"a": 1.0, "b": 0.0},
        "thresholds": {"match": 0.5, "partial": 0.25},
    }
    banded = model_lib.Model({**spec, "uncertain": {"low": 0.4, "high": 0.7}})
    verdicts = [banded.verdict(v) for v in (0.1, 0.3, 0.4, 0.5, 0.69, 0.7)]
    assert verdicts == ["miss", "partial", "uncertain", "uncertain", "uncertain", "match"]
    # A model fitted without the left-out step has no band.
    plain = model_lib.Model(spec)
    assert [plain.verdict(v) for v in (0.3, 0.49, 0.5)] == ["partial", "partial", "match"]


def test_an_uncertain_verdict_says_a_reviewer_decides(monkeypatch):
    model = model_lib.load_model()
    monkeypatch.setattr(model, "uncertain_low", 0.0)
    monkeypatch.setattr(model, "uncertain_high", 1.01)
    rule = {"trigger": "when git push fails", "directive": "pull and rebase"}
    result = compare_rules(rule, {**rule, "directive": "fetch, then rebase"})
    assert result["verdict"] == "uncertain"
    assert result["why"].startswith("uncertain, a reviewer decides (p ")


def test_a_missing_model_file_fails_loudly_naming_it(tmp_path, monkeypatch):
    from comparison.semantic import ComparatorUnavailable

    monkeypatch.setattr(model_lib, "MODEL_JSON", tmp_path / "model.json")
    monkeypatch.setattr(model_lib, "_model", None)
    with pytest.raises(ComparatorUnavailable, match="model.json"):
        model_lib.load_model()


def test_a_result_leads_with_the_score_and_verdict_and_describes_its_components():
    rule = {"trigger": "when git push fails", "directive": "pull and rebase"}
    result = compare_rules(rule, rule)
    assert list(result)[:2] == ["score", "verdict"]
    assert set(result["components"]) == {"score", "semantic", "signature_agreement", "token_f1"}
    assert result["components"] == COMPONENTS
    assert all(isinstance(line, str) and line for line in COMPONENTS.values())


def test_the_fit_is_deterministic_and_trains_on_every_split_but_the_held_out_ones(tmp_path):
    from comparison import train

    rows = train.read_rows()
    assert not {r["split"] for r in rows} & set(train.HELD_OUT)
    assert {"dev", "train_a", "train_b", *train.BLIND} <= {r["split"] for r in rows}
    held_out = [{**rows[0], "split": train.HELD_OUT[0]}, rows[1]]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in held_out) + "\n")
    assert train.read_rows(path) == [rows[1]]
    small = [r for r in rows if r["split"] == "dev"]
    params = {**train.PARAMS, "max_iter": 10}
    first, report = train.fit(small, params)
    second, _ = train.fit(small, params)
    assert first == second
    assert first["features"] == list(FEATURES)
    assert 0.5 < report["cv_auc"] <= 1.0


def test_each_blind_split_is_scored_by_a_fit_made_without_it(monkeypatch):
    from comparison import train

    rows = [r for r in train.read_rows() if r["split"] in ("dev", "blind_a")]
    X = train.feature_matrix(rows)
    fitted_on = []
    real_fit = train.fit_matrix

    def spy(keep, X_keep, params):
        fitted_on.append({r["split"] for r in keep})
        return real_fit(keep, X_keep, params)

    monkeypatch.setattr(train, "fit_matrix", spy)
    found = train.leave_one_split_out(rows, X, {**train.PARAMS, "max_iter": 10})
    assert fitted_on == [{"dev"}]
    assert set(found) == {"blind_a", "all"}
    assert found["blind_a"]["pairs"] == found["all"]["pairs"] == 150
    assert 0.5 < found["blind_a"]["auc"] <= 1.0
    assert found["all"]["accuracy"] == found["blind_a"]["accuracy"]


def test_pairs_made_from_the_labelled_ones_keep_their_label_and_leave_with_their_split(
    monkeypatch,
):
    from comparison import train

    def pair(split, label, extracted_trigger, directive, expected_trigger="when X fails"):
        return {
            "expected": {"trigger": expected_trigger, "directive": "retry with backoff"},
            "extracted": {"trigger": extracted_trigger, "directive": directive},
            "label": label,
            "split": split,
            "domain": "d",
            "category": "c",
        }

    rows = [
        pair("blind_a", 1, "if X does not work", "back off, then retry"),
        pair("blind_a", 0, "when X fails", "retry at once"),
        pair("blind_a", 0, "when Y fails", "retry at once"),  # another trigger: nothing made
        pair("blind_b", 0, "when X fails", "give up"),  # no rewording of X in its split
    ]
    made = train.made_pairs(rows)
    # The same rule with the expected trigger copied is the same rule still.
    assert made[0]["extracted"] == {"trigger": "when X fails", "directive": "back off, then retry"}
    assert (made[0]["label"], made[0]["made"], made[0]["split"]) == (1, "trigger_copied", "blind_a")
    # Another directive under a trigger its split rewords is another rule still.
    assert made[1]["extracted"] == {"trigger": "if X does not work", "directive": "retry at once"}
    assert (made[1]["label"], made[1]["made"]) == (0, "trigger_reworded")
    assert len(made) == 2
    assert train.made_pairs(rows) == made
    assert train.training_rows(rows, train.ALL_READINGS) == rows + made

    labelled = [r for r in train.read_rows() if r["split"] in ("dev", "blind_a")]
    both = train.training_rows(labelled, train.ALL_READINGS)
    X = train.feature_matrix(both)
    fitted = []
    real_fit = train.fit_matrix

    def spy(keep, X_keep, params):
        fitted.append(keep)
        return real_fit(keep, X_keep, params)

    monkeypatch.setattr(train, "fit_matrix", spy)
    found = train.leave_one_split_out(both, X, {**train.PARAMS, "max_iter": 10})
    # blind_a's made pairs leave with it; only its labelled pairs are scored.
    assert {r["split"] for r in fitted[0]} == {"dev"}
    assert any(r.get("made") for r in fitted[0])
    assert found["blind_a"]["pairs"] == 150


def test_the_opposite_words_looked_up_as_a_set_are_the_pairs_opposite_accepts():
    from comparison.lexicon import ANTONYMS, opposite, opposites_of

    words = {w for pair in ANTONYMS for w in pair} | {"documented", "undocumented", "valid"}
    words |= {"invalid", "nonzero", "zero", "unit", "it", "disable", "able", "import", "port"}
    for a in sorted(words):
        assert opposites_of(a) & words == {b for b in words if opposite(a, b)}, a


def test_a_text_embeds_the_same_alone_as_in_a_batch_and_from_the_cache():
    from comparison.semantic import load_embedder

    embedder = load_embedder()
    texts = ["when git push fails with non-fast-forward", "pull --rebase, then push", ""]
    batch = embedder.encode(texts)
    embedder._vectors.clear()
    alone = np.stack([embedder.encode([t])[0] for t in texts])
    assert np.array_equal(batch, alone)
    assert np.array_equal(embedder.encode(texts), batch)
    unit, weight = embedder.pieces("scrub the token")
    rows = embedder.matrix[embedder.piece_ids("scrub the token")]
    norms = np.linalg.norm(rows, axis=1)
    assert np.array_equal(weight, norms)
    assert np.array_equal(unit, rows / np.maximum(norms, 1e-9)[:, None])


def test_a_vocabulary_finds_exactly_what_searching_every_pattern_finds():
    from comparison.lexicon import ERROR_LEXICON, STANCE_LEXICON, TOOL_LEXICON, VERB_LEXICON

    texts = [
        r[side][field]
        for r in _rows()[:400]
        for side in ("expected", "extracted")
        for field in ("trigger", "directive")
    ]
    texts += ["git push --force", "CONFLICT (content)", "ENOSPC", ""]
    for lexicon in (ERROR_LEXICON, STANCE_LEXICON, TOOL_LEXICON, VERB_LEXICON):
        for text in texts:
            low = text.lower()
            every = [
                name for name, rx, exact in lexicon.members if rx.search(text if exact else low)
            ]
            assert lexicon.found(text) == every, text


def test_the_strings_a_pattern_needs_are_in_every_text_it_matches():
    from comparison.literals import Prefilter, required

    assert required(r"\bretr(?:y|ies|ying)\b") == {"retr"}
    assert required(r"\bgit\b|\bgithub\b(?! actions)|\bgitlab\b") == {"git"}
    assert required(r"(?:cuda |gpu )?oom|out of memory") == {"oom", "out of memory"}
    assert required(r"\w+ing") == {"ing"}
    assert required(r"\d+(?:s|ms)?") is None
    assert required(r"(?i)abc") is None  # an inline flag: either case matches
    assert required(r"Abc", ignore_case=True) == {"abc"}
    prefilter = Prefilter([required("failure"), required("fail"), None, required("x{2}y")])
    assert prefilter.candidates("it failed") == [1, 2]
    assert prefilter.candidates("a failure, xxy") == [0, 1, 2, 3]


def test_a_prefilter_made_after_a_text_was_scanned_still_finds_its_strings():
    from comparison.literals import Prefilter, required

    # One scan serves every prefilter and is memoised per text: a prefilter added later
    # must not be handed what the text held for the earlier ones only.
    first = Prefilter([required("alphabet"), required("zulu")])
    assert first.candidates("an alphabet of yankees and zulus") == [0, 1]
    later = Prefilter([required("yankee"), required("omega"), required("alpha")])
    assert later.candidates("an alphabet of yankees and zulus") == [0, 2]
    assert first.candidates("an alphabet of yankees and zulus") == [0, 1]
    assert later.candidates("omegas") == [1]


def test_the_word_diff_finds_difflibs_blocks():
    import difflib
    import random

    from comparison.text import matching_blocks

    rng = random.Random(0)
    for _ in range(2000):
        a = tuple(rng.choice("abcd") for _ in range(rng.randint(0, 12)))
        b = tuple(rng.choice("abcd") for _ in range(rng.randint(0, 12)))
        matcher = difflib.SequenceMatcher(a=list(a), b=list(b), autojunk=False)
        assert matching_blocks(a, b) == [tuple(m) for m in matcher.get_matching_blocks()]


def test_sentence_vectors_are_summed_exactly_as_reduceat_sums_them():
    from comparison.semantic import _segment_sums

    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((500, 16)).astype(np.float32)
    lengths = np.array([*range(1, 300), *rng.integers(1, 30, 200)])
    flat = rng.integers(0, 500, lengths.sum())
    expected = np.add.reduceat(matrix[flat], np.cumsum(lengths) - lengths, axis=0)
    assert np.array_equal(_segment_sums(matrix, flat, lengths), expected)


def test_the_vector_cache_restarting_mid_call_keeps_the_texts_of_that_call(monkeypatch):
    from comparison import semantic

    embedder = semantic.load_embedder()
    first = embedder.encode(["the disk is full", "retry later"])
    monkeypatch.setattr(semantic, "_VECTOR_CACHE", len(embedder._vectors) + 1)
    again = embedder.encode(["the disk is full", "a text never seen", "one more new text"])
    assert np.array_equal(again[0], first[0])


def test_the_vector_cache_drops_the_texts_least_recently_asked_for(monkeypatch):
    from comparison import semantic

    embedder = semantic.load_embedder()
    embedder._vectors.clear()
    embedder.encode(["an expected rule", "a candidate seen once"])
    embedder.encode(["an expected rule"])
    monkeypatch.setattr(semantic, "_VECTOR_CACHE", 3)
    embedder.encode(["another candidate", "yet another candidate"])
    assert set(embedder._vectors) == {
        "an expected rule",
        "another candidate",
        "yet another candidate",
    }


def _rows() -> list[dict]:
    from comparison import train

    return train.read_rows()


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        ("when the first layer doesn't stick", "when the first layer does not stick"),
        (
            "Re-run bed leveling before restarting the print.",
            "re-run bed leveling before restarting the print",
        ),
        ("pause; don’t retry", "pause; do not retry"),
        ("it won't start and can't connect", "it will not start and cannot connect"),
        ("List outstanding cheques", "list outstanding checks"),
        ("normalise the behaviour", "normalize the behavior"),
        ("HTTP 500 from the API.", "HTTP 500 from the API"),
        ("OOM kills the worker", "OOM kills the worker"),
        # British endings by rule, not word by word
        ("materialise the CTE", "materialize the CTE"),
        ("the virtualisation extensions", "the virtualization extensions"),
        ("a colourful, favourable neighbour", "a colorful, favorable neighbor"),
        ("a behavioural test", "a behavioral test"),
        ("labelling and modelling, cancelled", "labeling and modeling, canceled"),
        ("the paediatric dose in metres", "the pediatric dose in meters"),
        ("pop them afterwards", "pop them afterward"),
        # words that only look British keep their spelling
        ("advise, revise and raise the noise", "advise, revise and raise the noise"),
        ("promised expertise, otherwise surprising", "promised expertise, otherwise surprising"),
        ("pour the flour for four hours", "pour the flour for four hours"),
        (
            "the controlled rollout installed and filled",
            "the controlled rollout installed and filled",
        ),
        # contractions in any case and either apostrophe; outside ASCII every pattern is
        # tried, as a case-blind "s" also matches the long s
        ("WE'VE retried, they’re down", "WE have retried, they are down"),
        ("it'ſ broken", "it is broken"),
        # quotation marks of every kind quote alike
        ('fails with "Resources exceeded"', "fails with 'Resources exceeded'"),
        ("run `qm stop` first", "run 'qm stop' first"),
        ("the “no space left” error", "the 'no space left' error"),
        ("errors with \"fixture 'db' not found\"", "errors with \"fixture 'db' not found\""),
    ],
)
def test_spelling_that_carries_no_meaning_is_made_one(written, plain):
    assert plain_spelling(written) == plain


def test_a_contraction_is_the_same_rule_as_its_two_words():
    # A negation spelt "n't" on one side only must not read as a negation added.
    expected = {
        "trigger": "when samtools index fails because the BAM file is not coordinate-sorted",
        "directive": "run samtools sort on the BAM first, then index the sorted output",
    }
    extracted = {
        "trigger": "when samtools index fails because the BAM file isn't coordinate-sorted",
        "directive": "Run samtools sort on the BAM first, then index the sorted output.",
    }
    assert compare_rules(extracted, expected)["verdict"] == "match"


def _trivially_rewritten(text: str) -> str:
    """What a writer copying a rule may change without changing it: an example introduced
    another way, the quotation marks, a capital and a full stop."""
    text = re.sub(r"\bsuch as\b", "like", text)
    text = re.sub(r"'([^']+)'", r'"\1"', text) if "n't" not in text else text
    return text[:1].upper() + text[1:] + "."


def test_a_rule_copied_with_trivial_changes_is_the_same_rule():
    """Every expected rule of the labelled pairs against itself rewritten trivially: all
    match (a near copy that differs in no word of meaning is no trap)."""
    rules = {json.dumps(r["expected"], sort_keys=True): r["expected"] for r in _rows()}
    pairs = []
    for rule in rules.values():
        copy = {field: _trivially_rewritten(rule[field]) for field in ("trigger", "directive")}
        pairs.append((copy, rule))
    verdicts = [result["verdict"] for result in compare_many(pairs)]
    missed = [pair for pair, verdict in zip(pairs, verdicts, strict=True) if verdict != "match"]
    assert len(pairs) > 500
    assert len(missed) <= len(pairs) // 200, missed[:5]


@pytest.mark.parametrize(
    ("edit", "budget"),
    [
        # "the file" -> "the files": the crude stem of "files" is "fil"; a quarter missed before.
        (
            lambda t: re.sub(
                r"\bthe (file|job|request|error|test|build|node|query)\b", r"the \1s", t
            ),
            0.05,
        ),
        # "pre-commit" -> "precommit" (flags left alone); a third missed before. What is
        # left is mostly "non-" before a word ("non-empty" -> "nonempty"), which reads as
        # the word's opposite.
        (lambda t: re.sub(r"(?<![-\w])([a-z]+)-([a-z]+)\b", r"\1\2", t), 0.10),
        # Each of these was missed on nearly every rule it changed (the copy probe, docs in
        # comparison/README.md#copies-in-other-everyday-words).
        (lambda t: re.sub(r"\bbefore\b", "prior to", t), 0.02),
        (lambda t: re.sub(r"\bfirst\b", "beforehand", t), 0.02),
        (lambda t: re.sub(r"\s+(?:instead of|rather than)\s+", ", not ", t), 0.02),
        (lambda t: re.sub(r"\bfails\b", "does not work", t), 0.02),
        (lambda t: re.sub(r"\bfails\b", "errors out", t), 0.02),
        (lambda t: re.sub(r"\bremove\b", "get rid of", t), 0.02),
        (lambda t: re.sub(r"\bcheck\b", "look at", t), 0.02),
        (lambda t: re.sub(r"\bmore than\b", "over", t), 0.05),
        (lambda t: re.sub(r"\bpass\b", "supply", t), 0.02),
        (lambda t: re.sub(r"\berror\b", "failure", t), 0.05),
        (lambda t: re.sub(r"(?<![\d.,])(\d{1,3})(\d{3})(?![\d.,])", r"\1,\2", t), 0.05),
    ],
    ids=[
        "a noun made plural",
        "a hyphenated word joined",
        "before as prior to",
        "first as beforehand",
        "instead of as a comma and not",
        "fails as does not work",
        "fails as errors out",
        "remove as get rid of",
        "check as look at",
        "more than as over",
        "pass as supply",
        "error as failure",
        "thousands with a comma",
    ],
)
def test_a_rule_copied_with_one_word_respelt_is_the_same_rule(edit, budget):
    rules = {json.dumps(r["expected"], sort_keys=True): r["expected"] for r in _rows()}
    pairs = []
    for rule in rules.values():
        copy = {field: edit(rule[field]) for field in ("trigger", "directive")}
        if copy != rule:
            pairs.append((copy, rule))
    verdicts = [result["verdict"] for result in compare_many(pairs)]
    missed = [pair for pair, verdict in zip(pairs, verdicts, strict=True) if verdict != "match"]
    assert len(pairs) > 50
    assert len(missed) <= budget * len(pairs), missed[:5]


@pytest.mark.parametrize(
    ("expected", "extracted", "negated"),
    [
        ("when the service is running", "when the service is not running", True),
        (
            "when a job with checkpointing is preempted",
            "when a job without checkpointing is preempted",
            True,
        ),
        ("when the job is preempted", "when the job is preempted again", False),
        (
            "when a job with checkpointing is preempted",
            "when a job checkpointing is preempted",
            False,
        ),
    ],
)
def test_a_negation_against_its_positive_word_is_a_negation_only_difference(
    expected, extracted, negated
):
    from comparison.text import negation_only_difference

    assert negation_only_difference(expected, extracted) is negated


@pytest.mark.parametrize("enabled", [True, False])
def test_a_batch_leaves_garbage_collection_as_it_found_it(enabled):
    import gc

    from comparison.compare import compare_many

    rule = {"trigger": "when git push fails", "directive": "pull and rebase"}
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        assert compare_many([(rule, rule)])[0]["verdict"] == "match"
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
