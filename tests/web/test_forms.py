"""The filter forms: they render the selected options themselves, keep the ids their labels
point at, and turn every bad value into a message naming the field."""

import pytest
from django.urls import reverse

from dashboard.forms import CorpusFilterForm, JournalFilterForm, RuleFilterForm
from lifecycle.validation import FilterError
from tests.builders import candidate

pytestmark = pytest.mark.django_db

CHOICES = {"scopes": ["git", "repo:acme/payments"], "metrics": ["task_completion"]}


def test_the_rules_form_renders_what_was_asked_as_selected(viewer_client):
    candidate("R-1", scope="repo:acme/payments")
    query = {"state": "candidate", "scope": "repo:acme/payments", "sort": "id", "q": "push"}
    body = viewer_client.get(reverse("rule-list"), query).content.decode()
    assert '<option value="candidate" selected>candidate</option>' in body
    assert '<option value="repo:acme/payments" selected>repo:acme/payments</option>' in body
    assert '<option value="id" selected>id A→Z</option>' in body
    assert 'id="f-q"' in body and 'value="push"' in body
    for element_id in ("f-state", "f-scope", "f-validator", "f-pending", "f-metric", "f-gt"):
        assert f'<label for="{element_id}">' in body and f'id="{element_id}"' in body


def test_the_default_sort_is_selected_when_none_is_asked(viewer_client):
    body = viewer_client.get(reverse("rule-list")).content.decode()
    assert '<option value="-recorded" selected>newest recorded</option>' in body


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"state": "promoted"}, "state"),
        ({"validator": "magic"}, "validator"),
        ({"pending_reason": "bored"}, "pending_reason"),
        ({"has_ground_truth": "maybe"}, "has_ground_truth"),
        ({"sort": "random"}, "sort"),
        ({"q": "x" * 201}, "q"),
    ],
)
def test_a_bad_rule_filter_names_its_field(data, field):
    with pytest.raises(FilterError) as raised:
        RuleFilterForm(data, choices=CHOICES).filters()
    assert raised.value.field == field


def test_the_rule_filters_are_what_the_selector_takes():
    data = {"state": "active", "has_ground_truth": "true", "q": "  push  "}
    filters = RuleFilterForm(data, choices=CHOICES).filters()
    assert filters["state"] == "active" and filters["q"] == "push"
    assert filters["sort"] == "-recorded"


def test_the_corpus_form_parses_atoms():
    filters = CorpusFilterForm(
        {"atom": "action:git.push, error:non_fast_forward"}, choices={"corpora": []}
    ).filters()
    assert [str(a) for a in filters["atoms"]] == ["action:git.push", "error:non_fast_forward"]


def test_the_journal_form_reads_times_and_rounds():
    filters = JournalFilterForm(
        {"round": "7", "since": "2026-11-01", "until": "2026-11-01"}
    ).filters()
    assert filters["round_id"] == 7
    assert (filters["until_at"] - filters["since_at"]).days == 1
