"""Bounds on everything a client can make us store or compare (docs/api.md, "Limits").

Without them a single 25 MB trigger was stored in under a second and then made the duplicate
check of its scope run for half a minute and every rule-tool read of that scope return 26 MB.
Each limit is refused at the one validation point with a 422 (API) or a line-numbered error
(command line) naming the field; the database columns behind the identifiers are the same
width, so no value that passes can fail at write time.

Text is counted in characters (what a reader sees); free-form JSON (`steps`, `outcome`,
`meta`, `replay_input`) in bytes of its compact UTF-8 JSON encoding (what is stored). Pure: no
Django.
"""

import json

# ---- identifiers: the width of their database columns ------------------------------------
RULE_ID = 64
SCOPE = 128
METRIC_NAME = 64
TRAJECTORY_ID = 128
SESSION_ID = 128
CORPUS_NAME = 128
SOURCE_CASE = 128
SOURCE_NOTICE = 255
ATOM = 255

# ---- rule text ------------------------------------------------------------------------------
# A rule is one "when …, do …" sentence an agent reads on every call of the rule tool: two
# thousand characters is a long paragraph, ten times the longest rule we have seen.
TRIGGER = 2_000
DIRECTIVE = 2_000
TAG = 64
TAGS = 32
# Atoms in one signature or one list of notices.
ATOMS = 64
REVIEW_REASON = 2_000
# A pack's name and version label (docs/api.md#rule-packs).
PACK_NAME = 100
PACK_VERSION = 40

# ---- trajectories ---------------------------------------------------------------------------
TASK = 20_000
STEPS = 2_000
STEP_BYTES = 256 * 1024
STEPS_BYTES = 8 * 1024 * 1024
OUTCOME_BYTES = 64 * 1024
META_BYTES = 64 * 1024
REPLAY_INPUT_BYTES = 1024 * 1024
METRICS = 64

# ---- reports ----------------------------------------------------------------------------------
RULES_READ = 1_000

# ---- the duplicate check: bounded whatever is stored ---------------------------------------
# A new candidate is compared with the live rules of its scope filed under its signature's keys
# (lifecycle/duplicate_keys.py): at most DUPLICATE_COMPARE of them are read (the ones sharing
# the most words first when there are more), only the compatible ones go to the comparator, and
# only the first DUPLICATE_TEXT characters of each side's trigger and directive are read (rules
# stored before these limits may be longer).
DUPLICATE_COMPARE = 200
DUPLICATE_TEXT = TRIGGER

# The limits published in docs/api.md, by the field a client sends.
TEXT_LIMITS = {
    "candidate.id": RULE_ID,
    "candidate.trigger": TRIGGER,
    "candidate.directive": DIRECTIVE,
    "candidate.scope": SCOPE,
    "candidate.metric": METRIC_NAME,
    "candidate.tags": TAGS,
    "candidate.tags[]": TAG,
    "candidate.signature": ATOMS,
    "candidate.signature[]": ATOM,
    "candidate.source_case": SOURCE_CASE,
    "candidate.source_notice": SOURCE_NOTICE,
    "trajectory.id": TRAJECTORY_ID,
    "trajectory.task": TASK,
    "trajectory.steps": STEPS,
    "trajectory.steps[] (bytes)": STEP_BYTES,
    "trajectory.steps (bytes)": STEPS_BYTES,
    "trajectory.outcome (bytes)": OUTCOME_BYTES,
    "trajectory.meta (bytes)": META_BYTES,
    "trajectory.replay_input (bytes)": REPLAY_INPUT_BYTES,
    "trajectory.metrics": METRICS,
    "trajectory.session_id": SESSION_ID,
    "trajectory.corpus": CORPUS_NAME,
    "trajectory.expected_rule.trigger": TRIGGER,
    "trajectory.expected_rule.directive": DIRECTIVE,
    "report.session_id": SESSION_ID,
    "report.notices": ATOMS,
    "report.metrics": METRICS,
    "report.rules_read": RULES_READ,
    "retire.reason": REVIEW_REASON,
    "review.reason": REVIEW_REASON,
    "review.keep": RULE_ID,
    "pack.name": PACK_NAME,
    "pack.version": PACK_VERSION,
}


class TooLarge(ValueError):
    """A value over its limit; `field` names it and `limit` says how far it may go."""

    def __init__(self, message: str, *, field: str, limit: int):
        super().__init__(message)
        self.field, self.limit = field, limit


def check_length(value: str, *, field: str, limit: int) -> str:
    """`value` unchanged, or TooLarge when it has more than `limit` characters."""
    if len(value) > limit:
        raise TooLarge(
            f"{field} is {len(value):,} characters; the limit is {limit:,}",
            field=field,
            limit=limit,
        )
    return value


def check_count(items: list | dict, *, field: str, limit: int) -> None:
    if len(items) > limit:
        raise TooLarge(
            f"{field} has {len(items):,} items; the limit is {limit:,}", field=field, limit=limit
        )


def json_size(value: object) -> int:
    """Bytes of `value` as compact UTF-8 JSON: what a JSON column stores."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def check_json_size(value: object, *, field: str, limit: int) -> None:
    size = json_size(value)
    if size > limit:
        raise TooLarge(
            f"{field} is {size:,} bytes as JSON; the limit is {limit:,}", field=field, limit=limit
        )


def head(text: str, limit: int = DUPLICATE_TEXT) -> str:
    """The part of a stored text the duplicate check reads."""
    return text[:limit]
