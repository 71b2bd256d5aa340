"""The extractor's frame taken off a rule before comparison (semantics §12,
docs/semantics.md#s12-1): a label, a narrating subject, a time phrase, a modal with its
subject, an adverb of insistence; never a word that carries the rule.

Pure functions: no database, no Django settings needed.
"""

import pytest

from comparison.compare import compare_rules
from comparison.framing import unframed


@pytest.mark.parametrize(
    ("framed", "plain"),
    [
        (
            "The agent hit the sidecar being OOMKilled under load",
            "when the sidecar being OOMKilled under load",
        ),
        ("the agent ran into a 429 from the billing API", "when a 429 from the billing API"),
        ("We saw an error where the lock file was stale", "when the lock file was stale"),
        ("Whenever the build cache is cold", "when the build cache is cold"),
        ("Each time the token expires mid-upload", "when the token expires mid-upload"),
        ("In case the lock file is stale", "when the lock file is stale"),
        ("Whenever you find that the queue grows", "when the queue grows"),
        ("each time we notice that the cache is cold", "when the cache is cold"),
        ("Lesson: if the index is missing", "if the index is missing"),
        ("Lesson learned: when the disk fills up", "when the disk fills up"),
        ("Trigger: the agent encountered a merge conflict", "when a merge conflict"),
        ("when the agent gets 'Error 500' from the catalog", "when 'Error 500' from the catalog"),
        ("The agent found that the cache was stale", "when the cache was stale"),
        (
            "The agent was replicating a volume across zones",
            "when replicating a volume across zones",
        ),
        ("the agent had to pick a base image for CI", "when pick a base image for CI"),
        ("The agent was trying to shrink the image", "when trying to shrink the image"),
        ("Going forward, whenever the queue backs up", "when the queue backs up"),
        ("Next time, if the build cache is cold", "if the build cache is cold"),
    ],
)
def test_a_trigger_loses_its_frame_and_keeps_its_situation(framed, plain):
    assert unframed(framed, "trigger") == plain


@pytest.mark.parametrize(
    ("framed", "plain"),
    [
        ("The agent should raise the proxy memory limit", "raise the proxy memory limit"),
        ("Rule: keep the bucket in ReadWrite mode", "keep the bucket in ReadWrite mode"),
        ("Next time, the agent should always run a dry run first", "run a dry run first"),
        ("Going forward, make sure to pin the version", "pin the version"),
        ("Fix: Restart the worker", "restart the worker"),
        ("It is usually best to re-establish the session first", "re-establish the session first"),
        ("You must re-run the migration", "re-run the migration"),
        ("Agents should just retry once", "retry once"),
    ],
)
def test_a_directive_loses_its_frame_and_keeps_its_action(framed, plain):
    assert unframed(framed, "directive") == plain


@pytest.mark.parametrize(
    ("framed", "plain"),
    [
        ("The agent should never force-push to main", "never force-push to main"),
        ("The agent should not delete the volume", "do not delete the volume"),
        ("you must not skip the dry run", "do not skip the dry run"),
        ("The agent is not to touch the prod database", "do not touch the prod database"),
        ("Rule: the agent must never disable TLS checks", "never disable TLS checks"),
    ],
)
def test_a_negation_in_the_frame_is_kept(framed, plain):
    assert unframed(framed, "directive") == plain


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("when the model hits NaN loss", "trigger"),  # the model is the situation here
        ("in case of a power cut during the flash", "trigger"),  # "when of" would be wrong
        ("if you see 'permission denied'", "trigger"),
        ("when a bot gets rate limited", "trigger"),
        ("then-branch fails to compile", "trigger"),
        ("always-on replicas drift", "trigger"),
        ("rule out a stale cache before rebuilding", "directive"),
        ("the model should be exported in fp16", "directive"),
        ("you are not allowed to push to main", "directive"),
        ("do not retry a 4xx", "directive"),
        ("never run it as root", "directive"),
        ("Always", "directive"),  # nothing left after the frame: kept whole
        ("", "directive"),
    ],
)
def test_words_that_carry_the_rule_are_left_alone(text, field):
    assert unframed(text, field) == text


def test_a_framed_copy_of_a_rule_with_a_changed_amount_is_a_different_rule():
    expected = {
        "trigger": "when a file-system backup of a large volume times out",
        "directive": "set --fs-backup-timeout to 12h on the backup server",
    }
    framed_same = {
        "trigger": "The agent hit a file-system backup of a large volume timing out",
        "directive": "Rule: always set --fs-backup-timeout to 12h on the backup server.",
    }
    framed_changed = {
        "trigger": "The agent hit a file-system backup of a large volume timing out",
        "directive": "Rule: always set --fs-backup-timeout to 12m on the backup server.",
    }
    same, changed = compare_rules(framed_same, expected), compare_rules(framed_changed, expected)
    assert same["verdict"] == "match"
    assert changed["verdict"] != "match"
    assert changed["score"] < same["score"]


def test_the_frame_changes_nothing_in_the_displayed_diff():
    expected = {"trigger": "when the cache is cold", "directive": "warm it before the load test"}
    framed = {
        "trigger": "Whenever the cache is cold",
        "directive": "The agent should warm it before the load test",
    }
    result = compare_rules(framed, expected)
    # The page shows what the extractor wrote; only the scoring reads the rule unframed.
    inserted = [word for op, word in result["directive"]["diff"] if op == "insert"]
    assert inserted == ["The", "agent", "should"]
    assert result["verdict"] == "match"
