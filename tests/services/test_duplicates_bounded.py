"""The duplicate check costs the same whatever is stored (docs/api.md, "Limits"): a rule kept
from before the text limits may be 25 MB and a scope may hold thousands of live rules; the
comparator still sees at most DUPLICATE_COMPARE rules and the head of each text, and the
journal carries only that head."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lifecycle import limits
from lifecycle.journal import EventType
from lifecycle.models import JournalEvent, Rule
from lifecycle.services import duplicates
from lifecycle.services.duplicates import rule_check_duplicate

from ..builders import make_rule, make_rules

pytestmark = pytest.mark.django_db
HUGE = 25_000_000


@pytest.fixture
def compared(monkeypatch):
    """Every batch the comparator is given; it says `match` for the first pair it sees last."""
    batches: list[list[tuple[dict, dict]]] = []

    def compare_many(pairs):
        batches.append(pairs)
        return [
            {
                "verdict": "match",
                "semantic": 0.9 if i == 0 else 0.5,
                "token_f1": 0.1,
                "signature_agreement": 1.0,
                "trigger": {"token_f1": 0.1, "semantic": 0.9},
                "directive": {"token_f1": 0.1, "semantic": 0.9},
                "why": "test",
            }
            for i, _ in enumerate(pairs)
        ]

    monkeypatch.setattr(duplicates, "compare_many", compare_many)
    return batches


def test_a_huge_stored_rule_is_read_and_journaled_only_by_its_head(compared):
    make_rule("OLD-1", trigger="when " + "w" * HUGE, directive="do " + "d" * HUGE)
    make_rule("NEW-1", trigger="when git push fails", directive="pull first")
    with CaptureQueriesContext(connection) as queries:
        other = rule_check_duplicate(rule_id="NEW-1")
    assert other.id == "OLD-1"
    ((new, old),) = compared[0]
    assert len(old["trigger"]) == len(old["directive"]) == limits.DUPLICATE_TEXT
    assert new == {"trigger": "when git push fails", "directive": "pull first"}
    # No statement hands the whole text back: the heads are cut in SQL.
    assert all(len(q["sql"]) < 10_000 for q in queries.captured_queries)
    event = JournalEvent.objects.get(type=EventType.RULE_DUPLICATE_SUSPECTED)
    assert len(event.evidence["other"]["trigger"]) == limits.DUPLICATE_TEXT


def test_a_crowded_scope_is_compared_against_its_newest_rules_only(compared):
    make_rules(limits.DUPLICATE_COMPARE + 50)
    make_rule("NEW-1", trigger="when git push fails", directive="pull first")
    Rule.objects.filter(pk="NEW-1").update(
        recorded_at=Rule.objects.latest("recorded_at").recorded_at
    )
    other = rule_check_duplicate(rule_id="NEW-1")
    (batch,) = compared
    assert len(batch) == limits.DUPLICATE_COMPARE
    # The oldest 50 were never read; among those compared, the oldest comes first.
    assert other.id == f"R-{50:04d}"
