"""The comparator's looser signals (semantics §12): everyday equivalents of computing words,
the literal names two rules share, and the findings they sharpen.

Pure functions: no database, no Django settings needed.
"""

import pytest

from comparison.compare import compare_rules, evidence_many
from comparison.features import monotone
from comparison.identifiers import literals, replaced, shared_share
from comparison.lexicon import opposite
from comparison.paraphrase import GROUPS, equivalent, paraphrase_share
from comparison.style import plain_style
from comparison.swaps import explained_share
from comparison.text import negation_only_difference
from comparison.thesaurus import antonyms
from comparison.triggers import other_message_quoted


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("start", "launch"),
        ("restarted", "rebooting"),
        ("fetch", "downloaded"),
        ("deletes", "erase"),
        ("folder", "directories"),
        ("photos", "images"),
        ("sluggish", "slow"),
    ],
)
def test_everyday_equivalents_are_found_in_any_inflection(a, b):
    assert equivalent(a, b) and equivalent(b, a)


@pytest.mark.parametrize(
    ("a", "b"), [("upload", "download"), ("start", "stop"), ("enable", "disable"), ("a", "a")]
)
def test_opposites_and_a_word_itself_are_not_equivalents(a, b):
    assert not equivalent(a, b)


def test_no_group_holds_a_pair_the_lexicon_calls_opposites():
    for group in GROUPS:
        assert not [(a, b) for a in group for b in group if opposite(a, b)]


def test_no_group_holds_many_wordnet_antonyms():
    # WordNet calls a few everyday equivalents opposites in a rare sense ("bump" /
    # "upgrade"); a group is only wrong when that is common.
    pairs = [(a, b) for g in GROUPS for a in g for b in g if a < b and antonyms(a, b)]
    assert len(pairs) <= 3


def test_the_paraphrase_share_counts_changed_words_with_an_equivalent_opposite():
    assert paraphrase_share(frozenset(), frozenset()) == 1.0
    assert paraphrase_share(frozenset({"launch"}), frozenset()) == 0.0
    assert paraphrase_share(frozenset({"launch", "folder"}), frozenset({"start", "directory"})) == 1
    half = paraphrase_share(frozenset({"launch", "vault"}), frozenset({"start", "become"}))
    assert half == 0.5
    inflected = paraphrase_share(frozenset({"redact", "shipping"}), frozenset({"scrub", "shipped"}))
    assert inflected == 1


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('when git push fails with "non-fast-forward"', {"non-fast-forward"}),
        ("run pg_dump --no-owner into db.sqlite3", {"pg_dump", "--no-owner", "db.sqlite3"}),
        ("when writes fail with ENOSPC after 30 retries", {"enospc", "30"}),
        ("set maxPoolSize in /etc/app.conf", {"maxpoolsize", "/etc/app.conf"}),
        ("when the user's build doesn't start", set()),
    ],
)
def test_the_literal_names_of_a_text_are_quoted_strings_flags_codes_and_paths(text, names):
    assert literals(text) == names


def test_a_name_kept_bare_or_quoted_is_shared_and_another_name_is_a_replacement():
    assert shared_share("when it exits with 137", "if the process dies with exit status 137") == 1
    assert shared_share("restart the service", "reboot the box") == 0.5
    assert shared_share("when writes fail with ENOSPC", "when the disk is full") == 0
    assert replaced("when writes fail with ENOSPC", "when the disk is full") == 0
    assert replaced("exit 137 with --force", "exit 143 with --force") == 1
    assert replaced("use 'git commit --no-verify'", "use git commit --no-verify") == 0


def test_an_apostrophe_quotes_nothing_and_a_quoted_message_may_hold_one():
    assert other_message_quoted("when the user's build doesn't start", "when it isn't done") is None
    found = other_message_quoted(
        "when alembic says 'can't locate revision'", "when alembic says 'multiple heads'"
    )
    assert found is not None and "locate revision" in found


def test_a_word_inflected_beside_a_swapped_term_does_not_excuse_the_swap():
    exp = "when a device's SNMP ifIndex values change after every reboot"
    ext = "when a device's SNMP community string changes after every reboot"
    explained, unexplained, _ = explained_share(exp, ext)
    assert unexplained > 0
    result = compare_rules(
        {"trigger": ext, "directive": "enable ifIndex persistence on the device"},
        {"trigger": exp, "directive": "enable ifIndex persistence on the device"},
    )
    assert any("replaced by" in c for c in result["conflicts"])


def test_cannot_against_can_is_a_negation():
    assert negation_only_difference(
        "when the server can't be changed", "when the server can be changed"
    )
    assert not negation_only_difference(
        "when the server can be changed", "when the server may be changed"
    )


def test_the_new_signals_are_features_of_every_pair():
    pair = (
        {"trigger": "if the app won't launch", "directive": "erase the cache folder"},
        {"trigger": "when the app fails to start", "directive": "delete the cache directory"},
    )
    features = evidence_many([pair])[0].features
    assert features["directive_paraphrase"] > 0.5
    assert features["pair_literals_shared"] == 0.5
    assert features["pair_literals_replaced"] == 0
    wordy = (
        {
            "trigger": "whenever the app will not launch, which happens after updates",
            "directive": "it is usually best to erase the cache folder and try again",
        },
        pair[1],
    )
    assert evidence_many([wordy])[0].features["pair_length_ratio"] > 0.5


@pytest.mark.parametrize(
    ("feature", "direction"),
    [
        ("trigger_paraphrase", 1),
        ("directive_paraphrase", 1),
        ("pair_literals_shared", 1),
        ("pair_literals_replaced", -1),
        ("pair_length_ratio", 0),
    ],
)
def test_each_new_signal_moves_the_probability_the_way_language_says(feature, direction):
    assert monotone(feature) == direction


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        ("open a support ticket w/ the quiz ID", "open a support ticket with the quiz ID"),
        ("stuck on 'grading' >24 hours", "stuck on 'grading' more than 24 hours"),
        ("it is usually best to lower the deviation", "lower the deviation"),
        ("the sensible fix is normally to grant write access", "grant write access"),
        ("one should really never launch the installer", "never launch the installer"),
        ("In situations where you find that the queue grows", "when the queue grows"),
        ("in the event that the disk fills", "when the disk fills"),
        ("restart the worker", "restart the worker"),
        ("keep x<3 and a->b as written", "keep x<3 and a->b as written"),
    ],
)
def test_shorthand_is_spelt_out_and_hedges_dropped(written, plain):
    assert plain_style(written) == plain


def test_a_hedged_rule_is_the_same_rule_as_its_plain_copy():
    expected = {"trigger": "when the archive is full", "directive": "add a new archive file"}
    hedged = {
        "trigger": "whenever you find that the archive is full",
        "directive": "it is usually best to add a new archive file",
    }
    assert compare_rules(hedged, expected)["verdict"] == "match"


def test_the_words_every_error_message_says_do_not_make_two_messages_one():
    # "Error: … failed" is how messages are written, not which message it is.
    assert other_message_quoted(
        "when spack install fails with 'Error: concretization failed'",
        "when 'Error: sha256 checksum failed' while fetching",
    )
    assert (
        other_message_quoted(
            "when it fails with 'Error: checksum failed'",
            'when it fails with "error: the checksum failed"',
        )
        is None
    )


def test_one_related_pair_does_not_explain_a_long_change():
    from comparison.swaps import explained_share

    # "crashed" and "fails" are related; the rest of the clause is another situation.
    explained, unexplained, _ = explained_share(
        "when zeekctl status shows a worker as crashed",
        "when zeekctl deploy fails with unknown identifier in local.zeek",
    )
    assert unexplained > explained
    # A short change is still explained by its one related pair.
    explained, unexplained, _ = explained_share("remove the file", "delete the file")
    assert explained > 0 and unexplained == 0


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        ("run it as a nonroot user", "run it as a non-root user"),
        ("Nonempty values only", "Non-empty values only"),
        ("keep the non-empty ones", "keep the non-empty ones"),
        ("the nonce is none", "the nonce is none"),
    ],
)
def test_non_joined_to_its_word_is_the_hyphenated_word(written, plain):
    from comparison.style import plain_style

    assert plain_style(written) == plain


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        ("more than 5,000 records", "more than 5000 records"),
        ("a 1,048,576-byte page", "a 1048576-byte page"),
        ("costs 1,234.50 a month", "costs 1234.50 a month"),
        # Not a number's thousands: a list, or a group of other length.
        ("ids 1,2 and 3, 4", "ids 1,2 and 3, 4"),
        ("values 10,000,5", "values 10,000,5"),
    ],
)
def test_a_comma_grouping_thousands_is_no_change_of_number(written, plain):
    from comparison.text import plain_spelling

    assert plain_spelling(written) == plain


def test_a_number_written_with_thousands_commas_is_the_same_number():
    result = compare_rules(
        {
            "trigger": "If a FetchXML query can return more than 5,000 records",
            "directive": "page through the results using the paging-cookie and page attributes",
        },
        {
            "trigger": "when a FetchXML query can return more than 5000 records",
            "directive": "page through the results with the paging-cookie and page attributes",
        },
    )
    assert not result["conflicts"]


@pytest.mark.parametrize(
    "refused",
    [
        "map on GCN_SEQNO, not on the drug name text",
        "map on GCN_SEQNO - not on the drug name text",
        "map on GCN_SEQNO but not on the drug name text",
    ],
)
def test_not_after_a_comma_a_dash_or_but_refuses_what_follows(refused):
    from comparison.directives import forbidden_done

    rather = "map on GCN_SEQNO rather than on the drug name text"
    # One refusal for another: neither rule does what the other forbids.
    assert forbidden_done(rather, refused) is None
    assert explained_share(rather, refused)[1] == 0
    # A rule that does the refused act is still caught.
    assert forbidden_done("map on the drug name text", refused) is not None


def test_a_not_elsewhere_refuses_nothing():
    from comparison.directives import forbidden_done

    # "do not" is a negation already; a bare "not" inside a clause negates no act.
    assert forbidden_done("restart it if it is not healthy", "restart it") is None


@pytest.mark.parametrize(
    ("short", "long", "same"),
    [
        ("DIN", "donation identification number's", True),
        ("RCA", "root cause analysis", True),
        ("PR", "pull request", True),
        ("DIN", "data in network", False),  # initials of other words
        ("DNS", "domain name", False),  # one initial short
    ],
)
def test_an_abbreviation_spelling_the_other_sides_initials_is_the_same_term(short, long, same):
    from comparison.swaps import related
    from comparison.text import content

    assert related(content(short), content(long)) is same
    assert related(content(long), content(short)) is same


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("removed", "deleted"),
        ("deleting", "removes"),
        ("verified", "confirming"),
        # A word in two groups is in both: "error" fails and is a failure.
        ("error", "failure"),
        ("error", "crashed"),
        ("passing", "supplies"),
        ("cut", "reduced"),
    ],
)
def test_the_lexicons_plain_synonyms_hold_in_any_inflection(a, b):
    from comparison.swaps import related

    assert related({a}, {b})


def test_a_word_inflected_is_not_related_to_its_opposite():
    from comparison.swaps import related

    assert not related({"enabled"}, {"disabled"})
    assert not related({"uploaded"}, {"downloaded"})


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        (
            "stash the changes prior to switching branches",
            "stash the changes before switching branches",
        ),
        ("take a BR backup beforehand", "take a BR backup first"),
        ("when disk usage is above 90%", "when disk usage is more than 90%"),
        ("when a job runs for over an hour", "when a job runs for more than an hour"),
        ("keep it under 10 workers", "keep it less than 10 workers"),
        ("when the build errors out", "when the build fails"),
        ("when the pod crashes following a restart", "when the pod crashes after a restart"),
        ("when the webhook does not work", "when the webhook fails"),
        ("when the hooks stopped working", "when the hooks failed"),
        ("get rid of the stale lock", "remove the stale lock"),
        ("take a look at the logs", "inspect the logs"),
        ("switch to the v2 API", "use the v2 API"),
        ("switch the traffic to blue", "switch the traffic to blue"),
        # The same words saying something else stay.
        ("tunnel it over HTTP", "tunnel it over HTTP"),
        ("when the node is under load", "when the node is under load"),
        ("run the following steps", "run the following steps"),
        ("when following the upgrade guide", "when following the upgrade guide"),
    ],
)
def test_a_longer_phrase_for_a_plain_word_is_the_plain_word(written, plain):
    assert plain_style(written) == plain


@pytest.mark.parametrize(
    ("expected", "extracted"),
    [
        (
            "stash the changes before switching branches",
            "stash the changes prior to switching branches",
        ),
        ("restart the worker after a failover", "restart the worker following a failover"),
        (
            "drop connections idle for more than 5 minutes",
            "drop connections idle for over 5 minutes",
        ),
    ],
)
def test_a_rule_copied_with_a_phrase_for_a_word_is_the_same_rule(expected, extracted):
    trigger = "when the nightly job is about to run"
    result = compare_rules(
        {"trigger": trigger, "directive": extracted}, {"trigger": trigger, "directive": expected}
    )
    assert result["verdict"] == "match", result["conflicts"]


def test_what_one_side_quotes_and_the_other_says_unquoted_is_no_other_message():
    assert (
        other_message_quoted(
            "when adb devices shows the device as 'unauthorized'",
            "if `adb devices` lists the device as unauthorized",
        )
        is None
    )
    # Two messages, each quoted, still differ.
    assert other_message_quoted(
        "when the copy fails with 'permission denied' on 'backup.tar'",
        "when the copy fails with 'disk quota exceeded' on 'backup.tar'",
    )
