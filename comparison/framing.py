"""The framing an extractor wraps around a rule, taken off before the rule is compared
(semantics §12, docs/semantics.md#s12-1).

An extractor writing lessons from an agent's trace says the same rule as an engineer but
frames it: "Lesson: the agent hit X while doing Y" for "when X while doing Y", "Rule: the
agent should always Z" or "Next time, Z" for "Z". The frame carries no meaning the
comparison needs, yet its words count: they sit among the words the two texts do not
share, where the comparator looks for what differs, and a rule wrapped in them read as
reworded even when its content had changed (a timeout of 12h against 12m, the opposite
mode of a setting). Taking the frame off leaves each side in the form an engineer writes.

Only a frame at the very start is taken off, and only words that never carry the rule:
a label ("Rule:", "Lesson:", "Fix:"), a narrating subject and its verb of meeting
something ("the agent hit", "we ran into", "the agent found") or of being busy with the task
("the agent was replicating", "the agent had to choose"), a time phrase ("next time", "going
forward"), a modal with its subject ("the agent should", "you must"), an adverb of
insistence ("always", "make sure to"). A negation is kept as one: "the agent should never
X" becomes "never X", "you must not X" becomes "do not X". "When" and "if" stay as written.
"""

from __future__ import annotations

import re

# "Label:" at the start of either field.
_LABEL = (
    r"(?:lesson(?:\s+learned)?|rule|learned\s+rule|trigger|situation|context|condition|"
    r"symptom|problem|issue|failure|observation|observed|scenario|when|if|fix|action|"
    r"directive|do|resolution|remedy|solution|recommendation|recommended\s+action|"
    r"guideline|instruction|takeaway|advice|next\s+step|correct\s+action|what\s+to\s+do|"
    r"note|tip|policy|guidance)\s*[:\-–—]\s+"
)

# Who narrates or is told: an agent, an assistant, I, we, you — never "the model" or "a bot",
# which a rule's own situation or object can be ("the model should be exported in fp16").
_SUBJECT = r"(?:the\s+|an?\s+|this\s+|our\s+)?(?:agent|assistant|ai\s+agent)s?|i|we|you"

# A narrating subject meeting the situation: the trigger reads "when <the situation>".
_MET = (
    r"(?:hit|hits|encountered|encounters|ran\s+into|runs\s+into|run\s+into|ran\s+up\s+against|"
    r"saw|sees|see|got|gets|faced|faces|observed|observes|noticed|notices|came\s+across|"
    r"comes\s+across|experienced|experiences|was\s+hit\s+by|is\s+hit\s+by|hit\s+upon|"
    r"stumbled\s+on|stumbled\s+into|triggered|triggers|found(?:\s+that)?|finds(?:\s+that)?|heard|hears)"
)
_WHERE = (
    r"(?:(?:an?|the)\s+(?:error|case|failure|situation|problem|issue|scenario)\s+"
    r"(?:where|in\s+which|when)\s+)?"
)
_NARRATED = re.compile(rf"(?:{_SUBJECT})\s+{_MET}\s+{_WHERE}", re.IGNORECASE)
# A narrating subject busy with the task the situation arose in: "the agent was
# replicating X" and "the agent had to choose X" read "when replicating X", "when choose X"
# (the crude stems compare "choose" with "choosing").
_BUSY = re.compile(
    rf"(?:{_SUBJECT})\s+(?:was|were|is|are|am)\s+(?=\w+ing\b)|"
    rf"(?:{_SUBJECT})\s+(?:had|has|have|needed|needs|need|wanted|wants|was\s+trying|"
    rf"tried|is\s+trying|were\s+trying)\s+to\s+",
    re.IGNORECASE,
)
# A time phrase before the situation ("Going forward, whenever X").
_TRIGGER_TIME = re.compile(
    r"(?:next\s+time|in\s+(?:the\s+)?future|going\s+forward|from\s+now\s+on)\s*,?\s+"
    r"(?=(?:when|whenever|if|each|every|any)\b)",
    re.IGNORECASE,
)
_WHEN_NARRATED = re.compile(
    rf"(?:when|if|whenever)\s+(?:the\s+)?(?:agent|assistant)s?\s+{_MET}\s+{_WHERE}",
    re.IGNORECASE,
)
# "Whenever", and what only says who meets the situation after it ("whenever you find that").
_WHENEVER = re.compile(
    r"(?:whenever|any\s*time|every\s+time|each\s+time|in\s+(?:the\s+)?cases?\s+(?:where|when)|"
    r"in\s+case(?!\s+of\b)|if\s+ever|on\s+any\s+occasion\s+(?:where|when))\b\s*"
    r"(?:(?:you|we)\s+(?:find|notice|see|intend\s+to|want\s+to|are\s+about\s+to)\s+"
    r"(?:that\s+)?)?",
    re.IGNORECASE,
)

_TIME = (
    r"(?:next\s+time|in\s+(?:the\s+)?future|going\s+forward|from\s+now\s+on|henceforth|"
    r"from\s+here\s+on|in\s+that\s+case|in\s+this\s+case|in\s+future\s+runs|then)\s*,?\s+"
)
_MODAL = (
    r"(?:should|must|needs?\s+to|has\s+to|have\s+to|ought\s+to|is\s+to|are\s+to|shall|"
    r"will\s+need\s+to|would\s+do\s+well\s+to|is\s+expected\s+to|want\s+to|'ll\s+want\s+to)"
)
_NEVER = re.compile(
    rf"(?:{_SUBJECT})\s+(?:should|must|shall|will|is\s+to|are\s+to)\s+never\s+", re.IGNORECASE
)
_NOT = re.compile(
    rf"(?:{_SUBJECT})\s+(?:(?:should|must|shall|ought)\s+not\s+(?:to\s+)?|(?:is|are)\s+not\s+to\s+)"
    rf"|(?:{_SUBJECT})\s+(?:does|do)\s+not\s+need\s+to\s+",
    re.IGNORECASE,
)
_MODAL_SUBJECT = re.compile(rf"(?:{_SUBJECT})\s+{_MODAL}\s+", re.IGNORECASE)
_INSISTENCE = re.compile(
    r"(?:always|be\s+sure\s+to|make\s+sure\s+to|remember\s+to|take\s+care\s+to|"
    r"(?:it\s+is|it's)\s+(?:usually\s+|generally\s+|often\s+|always\s+)?"
    r"(?:best|better|safest|safer|wise|wisest|recommended|advisable|preferable)\s+to|"
    r"please|just|simply)\s+",
    re.IGNORECASE,
)

_TRIGGER_STEPS = (
    (re.compile(_LABEL, re.IGNORECASE), ""),
    (_TRIGGER_TIME, ""),
    (_WHEN_NARRATED, "when "),
    (_NARRATED, "when "),
    (_BUSY, "when "),
    (_WHENEVER, "when "),
)
_DIRECTIVE_STEPS = (
    (re.compile(_LABEL, re.IGNORECASE), ""),
    (re.compile(_TIME, re.IGNORECASE), ""),
    (_NEVER, "never "),
    (_NOT, "do not "),
    (_MODAL_SUBJECT, ""),
    (_INSISTENCE, ""),
)
# A text can only hold a frame if one of these starts it (lower-cased): most texts skip
# every expression.
_STARTS = (
    *[
        "lesson",
        "rule",
        "learned",
        "trigger",
        "situation",
        "context",
        "condition",
        "symptom",
        "problem",
        "issue",
        "failure",
        "observ",
        "scenario",
        "when",
        "if",
        "fix",
        "action",
        "directive",
        "do",
        "resolution",
        "remedy",
        "solution",
        "recommend",
        "guideline",
        "instruction",
        "takeaway",
        "advice",
        "next",
        "correct",
        "what",
        "note",
        "tip",
        "policy",
        "guidance",
        "the",
        "an",
        "this",
        "our",
        "agent",
        "assistant",
        "ai",
        "we",
        "you",
        "any",
        "every",
        "each",
        "going",
        "from",
        "hence",
        "then",
        "always",
        "make",
        "remember",
        "take",
        "it",
        "please",
        "just",
        "simply",
    ],
    *("a ", "i ", "in ", "on ", "be "),
)


def unframed(text: str, field: str) -> str:
    """`text` (a rule's `field`, "trigger" or "directive") without the extractor's frame at
    its start; unchanged when it has none. A first letter made the start by the cut is
    lower-cased, as `text.plain_spelling` does for a sentence's start."""
    if not text.lower().startswith(_STARTS):
        return text
    steps = _TRIGGER_STEPS if field == "trigger" else _DIRECTIVE_STEPS
    original = text
    changed = True
    while changed:
        changed = False
        for rx, replacement in steps:
            m = rx.match(text)
            if m and m.end() < len(text):
                rest = text[m.end() :]
                if field == "trigger" and replacement and rest.lower().startswith(("when ", "if ")):
                    replacement = ""
                text = replacement + rest
                changed = True
    if text is original:
        return text
    if len(text) > 1 and text[0].isupper() and text[1:2].islower():
        text = text[0].lower() + text[1:]
    return text
