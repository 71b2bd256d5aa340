"""The dashboard's filters as Django forms: each form renders its own fields (the selected
option included) and checks what a query string says. A bad value never reaches a query: the
page shows the form's message instead, and the list is empty (`FilterError` names the field).

Each form's `filters()` gives the dict the lifecycle selectors take. The vocabularies (states,
sorts, pending reasons, metrics, event types) are lifecycle's; only their checking is here."""

import re
from datetime import UTC, datetime

from django import forms
from django.utils.dateparse import parse_date, parse_datetime

from dashboard.presenters import PENDING_WORDS
from lifecycle import atoms as atom_lib
from lifecycle.models import PendingReason, ReviewKind, RuleState, TrajectoryKind, WebhookFormat
from lifecycle.outbox import TOPIC_WORDS, TOPICS
from lifecycle.selectors import corpus as selectors_corpus
from lifecycle.selectors import rules as selectors
from lifecycle.validation import FilterError

ANY = [("", "any")]
PENDING_REASONS = [selectors.NOT_ATTEMPTED, *PendingReason.values]
YES_NO = ("yes", "true", "1", "no", "false", "0")
MAX_TEXT = 150


def _select(element_id: str, choices=()) -> forms.Select:
    return forms.Select(attrs={"id": element_id}, choices=choices)


def _text(element_id: str, placeholder: str, maxlength: int, **attrs) -> forms.TextInput:
    return forms.TextInput(
        attrs={"id": element_id, "placeholder": placeholder, "maxlength": maxlength, **attrs}
    )


class FilterForm(forms.Form):
    """A GET filter form: every field optional, values stripped."""

    def __init__(self, data, **kwargs):
        super().__init__(data, **kwargs)
        for field in self.fields.values():
            field.required = False
            field.error_messages["invalid_choice"] = "%(value)s is not one of the offered values"

    def filters(self) -> dict:
        """The cleaned filters; raises FilterError naming the first bad field."""
        if not self.is_valid():
            field, messages = next(iter(self.errors.items()))
            raise FilterError(f"{messages[0]}", field=field if field != "__all__" else "filters")
        return self.cleaned_data

    @property
    def filtered(self) -> bool:
        """Whether any filter is set (to word an empty table)."""
        return any(self.data.get(name) for name in self.fields if name != "sort")


RULE_SORT_LABELS = {
    "-recorded": "newest recorded",
    "recorded": "oldest recorded",
    "-decided": "latest decided",
    "decided": "earliest decided",
    "id": "id A→Z",
    "-id": "id Z→A",
    "state": "state A→Z",
    "-state": "state Z→A",
    "scope": "scope A→Z",
    "-scope": "scope Z→A",
    "-attempts": "most replay attempts",
    "attempts": "fewest replay attempts",
}


class RuleFilterForm(FilterForm):
    q = forms.CharField(
        max_length=selectors.MAX_QUERY_LENGTH,
        widget=forms.TextInput(
            attrs={
                "id": "f-q",
                "type": "search",
                "placeholder": "id, trigger or directive",
                "maxlength": selectors.MAX_QUERY_LENGTH,
            }
        ),
    )
    state = forms.ChoiceField(choices=ANY + [(s, s) for s in RuleState.values])
    # Any scope may be asked for (a link from a scope page); the menu offers those in use.
    scope = forms.CharField(max_length=128, widget=_select("f-scope"))
    validator = forms.ChoiceField(
        choices=ANY + [(v, v) for v in selectors.VALIDATORS] + [("none", "none yet")]
    )
    pending_reason = forms.ChoiceField(
        choices=ANY + [(reason, PENDING_WORDS[reason]) for reason in PENDING_REASONS]
    )
    # Aliases are accepted too (the selector resolves the family); the menu offers the names.
    metric = forms.CharField(max_length=64, widget=_select("f-metric"))
    has_ground_truth = forms.ChoiceField(
        choices=ANY
        + [("yes", "has expected rule"), ("no", "none")]
        + [(v, v) for v in ("true", "1", "false", "0")]
    )
    sort = forms.ChoiceField(choices=list(RULE_SORT_LABELS.items()))

    def __init__(self, data, *, choices: dict, **kwargs):
        if not data.get("sort"):
            # Bound forms ignore `initial`: the default order is written into the data instead,
            # so the menu shows it selected.
            data = data.copy()
            data["sort"] = selectors.DEFAULT_RULE_SORT
        super().__init__(data, **kwargs)
        ids = {"state": "f-state", "validator": "f-validator", "pending_reason": "f-pending"}
        ids |= {"has_ground_truth": "f-gt", "sort": "f-sort"}
        for name, element_id in ids.items():
            self.fields[name].widget.attrs["id"] = element_id
        # What the form falls back to when the URL says nothing: static/js/history.js puts it
        # back when the back button restores a page whose URL has no sort.
        self.fields["sort"].widget.attrs["data-default"] = selectors.DEFAULT_RULE_SORT
        self.fields["scope"].widget.choices = ANY + [(s, s) for s in choices["scopes"]]
        self.fields["metric"].widget.choices = ANY + [(m, m) for m in choices["metrics"]]
        # The alternative spellings are accepted, never offered.
        self.fields["has_ground_truth"].widget.choices = self.fields["has_ground_truth"].choices[:3]


class CorpusFilterForm(FilterForm):
    q = forms.CharField(
        max_length=selectors_corpus.MAX_QUERY_LENGTH,
        widget=forms.TextInput(
            attrs={"id": "c-q", "type": "search", "placeholder": "id or task", "maxlength": 200}
        ),
    )
    kind = forms.ChoiceField(choices=ANY + [(k, k) for k in TrajectoryKind.values])
    corpus = forms.CharField(max_length=MAX_TEXT, widget=_select("c-corpus"))
    atom = forms.CharField(max_length=600, widget=_text("c-atom", "error:non_fast_forward", 600))
    has_expected_rule = forms.ChoiceField(
        choices=ANY
        + [("yes", "has expected rule"), ("no", "none")]
        + [(v, v) for v in ("true", "1", "false", "0")]
    )

    def __init__(self, data, *, choices: dict, **kwargs):
        super().__init__(data, **kwargs)
        self.fields["kind"].widget.attrs["id"] = "c-kind"
        self.fields["has_expected_rule"].widget.attrs["id"] = "c-expected"
        self.fields["has_expected_rule"].widget.choices = self.fields["has_expected_rule"].choices[
            :3
        ]
        self.fields["corpus"].widget.choices = ANY + [(c, c) for c in choices["corpora"]]

    def clean(self):
        cleaned = super().clean()
        raw = (cleaned.get("atom") or "").replace(",", " ").split()
        if len(raw) > selectors_corpus.MAX_ATOMS:
            self.add_error("atom", f"give at most {selectors_corpus.MAX_ATOMS} atoms")
            return cleaned
        try:
            cleaned["atoms"] = [atom_lib.parse_atom(a) for a in raw]
        except atom_lib.BadAtom as exc:
            self.add_error("atom", str(exc))
        return cleaned


_DATE = re.compile(r"^\d{4}-\d\d-\d\d$")
_TYPE = re.compile(r"^[a-z][a-z0-9_.]{0,63}$")


def _moment(raw: str, *, end_of_day: bool) -> datetime | None:
    """An ISO date or date-time (UTC when no offset); a bare `until` date means up to the end
    of that day. Raises ValidationError."""
    if not raw:
        return None
    try:
        if _DATE.match(raw):
            moment = datetime.fromordinal(parse_date(raw).toordinal() + end_of_day)
        else:
            moment = parse_datetime(raw)
    except (ValueError, OverflowError):
        moment = None
    if moment is None:
        raise forms.ValidationError(
            f"an ISO date or date-time such as 2026-11-03 or 2026-11-03T09:00:00Z (got {raw!r})"
        )
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class JournalFilterForm(FilterForm):
    type = forms.RegexField(
        regex=_TYPE,
        max_length=64,
        error_messages={"invalid": "an event type such as rule_retired"},
        widget=_text("j-type", "any", 64, list="j-types"),
    )
    rule = forms.CharField(max_length=MAX_TEXT, widget=_text("j-rule", "rule id", MAX_TEXT))
    round = forms.RegexField(
        regex=r"^\d{1,18}$",
        error_messages={"invalid": "a round number"},
        widget=_text("j-round", "number", 18, inputmode="numeric"),
    )
    actor = forms.CharField(
        max_length=MAX_TEXT, widget=_text("j-actor", "engine, a token, a reviewer", MAX_TEXT)
    )
    since = forms.CharField(max_length=40, widget=_text("j-since", "2026-11-03 or …T09:00Z", 40))
    until = forms.CharField(max_length=40, widget=_text("j-until", "2026-11-04", 40))

    def clean(self):
        cleaned = super().clean()
        cleaned["round_id"] = int(cleaned["round"]) if cleaned.get("round") else None
        try:
            cleaned["since_at"] = _moment(cleaned.get("since", ""), end_of_day=False)
        except forms.ValidationError as exc:
            self.add_error("since", exc)
        try:
            cleaned["until_at"] = _moment(cleaned.get("until", ""), end_of_day=True)
        except forms.ValidationError as exc:
            self.add_error("until", exc)
        since, until = cleaned.get("since_at"), cleaned.get("until_at")
        if since and until and since >= until:
            self.add_error("since", "since must be before until")
        return cleaned


class AnyOf(forms.MultipleChoiceField):
    """A menu whose values are checked by the domain, not by the menu: the export answers a
    value it cannot use with the same message as the API."""

    def valid_value(self, value) -> bool:
        return True


class PackExportForm(forms.Form):
    """What to export; `pack_text` (shared with the API) checks the selection."""

    scope = AnyOf(required=False, widget=forms.SelectMultiple(attrs={"id": "p-scope"}))
    state = AnyOf(required=False, widget=forms.CheckboxSelectMultiple)
    format = forms.CharField(required=False, widget=_select("p-format"))

    def __init__(self, data=None, *, scopes: list[str], formats: list[tuple[str, str]]):
        super().__init__(data, initial={"state": ["active"], "format": "yaml"})
        self.fields["scope"].choices = [(s, s) for s in scopes]
        self.fields["scope"].widget.attrs["size"] = min(max(len(scopes), 1), 6)
        self.fields["state"].choices = [(s, s) for s in RuleState.values]
        self.fields["format"].widget.choices = formats

    def selection(self) -> dict:
        """scopes, states (default: active) and format (default: yaml) as the export takes them."""
        self.is_valid()
        data = self.cleaned_data
        return {
            "scopes": [s for s in data.get("scope", []) if s],
            "states": data.get("state") or ["active"],
            "fmt": data.get("format") or "yaml",
        }


class EvidenceForm(forms.Form):
    """The paired evidence matrix's view (semantics §17.5): which metric its chips show (the
    deciding metric unless asked) and the row order. A bad value falls back to the default and
    says so; it never reaches a query."""

    metric = forms.ChoiceField(required=False, widget=_select("f-ev-metric"))
    sort = forms.ChoiceField(
        required=False,
        choices=[
            ("cases", "failing cases first, then wins"),
            ("regression", "worst regression first"),
        ],
        widget=_select("f-ev-sort"),
    )

    def __init__(self, data, *, metrics: list[str], default: str | None):
        super().__init__(data)
        self.fields["metric"].choices = [(m, m) for m in metrics]
        self.default = default
        for field in self.fields.values():
            field.error_messages["invalid_choice"] = "%(value)s is not one of the offered values"

    def view(self) -> tuple[str | None, str, str]:
        """(metric, sort, error): the defaults for what did not check out."""
        error = "" if self.is_valid() else next(iter(self.errors.values()))[0]
        data = self.cleaned_data
        metric = data.get("metric") or self.default
        return metric, data.get("sort") or "cases", error


class ReviewFilterForm(FilterForm):
    """The review queue's filters (lifecycle.selectors.review): what kind of item, which scope."""

    kind = forms.ChoiceField(choices=ANY + list(ReviewKind.choices), widget=_select("r-kind"))
    # Any scope may be asked for (a link from a rule page); the menu offers those in the queue.
    scope = forms.CharField(max_length=128, widget=_select("r-scope"))

    def __init__(self, data, *, scopes: list[str], **kwargs):
        super().__init__(data, **kwargs)
        self.fields["scope"].widget.choices = ANY + [(s, s) for s in scopes]


class WebhookForm(forms.Form):
    """An endpoint's settings; lifecycle.services.webhooks checks them again (one rule)."""

    name = forms.CharField(max_length=100, widget=_text("w-name", "ops-alerts", 100))
    url = forms.URLField(
        max_length=500,
        assume_scheme="https",
        widget=forms.URLInput(attrs={"id": "w-url", "placeholder": "https://hooks.example/x"}),
    )
    format = forms.ChoiceField(choices=WebhookFormat.choices, widget=_select("w-format"))
    topics = forms.MultipleChoiceField(
        choices=[(t, f"{t}: {TOPIC_WORDS[t]}") for t in TOPICS],
        widget=forms.CheckboxSelectMultiple,
    )
    active = forms.BooleanField(required=False, initial=True)
