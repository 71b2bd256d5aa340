"""Rules table, rule detail and reviewer actions. No promote view exists:
only the validation engine promotes (semantics §3).

A rule page opens on what decided the rule — its headline, built from the structured evidence
(dashboard/headlines.py) — and keeps the bulk folded: the per-replay detail and the timeline
are fragments of their own, read only when opened and paged (docs/dashboard.md)."""

import csv
import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from dashboard import figures, headlines, presenters
from dashboard.forms import EvidenceForm, RuleFilterForm
from lifecycle.models import Rule, RuleState
from lifecycle.selectors import rules as selectors
from lifecycle.services import rules as services
from lifecycle.states import Actor, WrongState
from lifecycle.validation import FilterError, InvalidRule
from replay import selectors as replay_selectors
from replay.trials import rule_trial

from . import fragment, is_reviewer, reviewer_required, vary_on_htmx

RULES_PER_PAGE = 50


@login_required
def rule_list(request):
    form = RuleFilterForm(request.GET, choices=selectors.rule_filter_choices())
    error = None
    try:
        rules = selectors.rule_list(filters=form.filters()).only(*selectors.RULE_TABLE_FIELDS)
    except FilterError as exc:
        error = exc
        rules = Rule.objects.none()
    page = Paginator(rules, RULES_PER_PAGE).get_page(request.GET.get("page"))
    replays = selectors.replay_counts([rule.id for rule in page.object_list])
    context = {"page": page, "form": form, "filter_error": error, "replays": replays}
    template_name = fragment(request, "dashboard/rules/list.html", "rule-table")
    return vary_on_htmx(render(request, template_name, context))


def thresholds() -> headlines.Thresholds:
    return headlines.Thresholds(
        promote=settings.CAUTERWEB_RULE_PROMOTE_MARGIN,
        regress=settings.CAUTERWEB_RULE_REGRESS_MARGIN,
        max_repeats=settings.CAUTERWEB_REPLAY_MAX_REPEATS,
        trial_sessions=settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS,
    )


def rule_headline(rule: Rule, *, decided_by, latest, paired_verdict) -> headlines.Headline:
    """What decided the rule (or what it waits for), from the evidence the page shows."""
    if decided_by is not None:
        return headlines.decision_headline(
            type_=decided_by.type,
            actor=decided_by.actor,
            evidence=decided_by.evidence,
            rule_metric=rule.metric,
            margins=thresholds(),
        )
    if rule.state != RuleState.CANDIDATE:
        # Decided before the journal kept its decisions' evidence: the engine's sentence.
        return headlines.Headline("neutral", rule.verdict_reason or "No reason recorded")
    return headlines.candidate_headline(
        latest=latest.evidence if latest else None,
        paired=paired_verdict,
        waiting=presenters.waiting_words(rule),
        rule_metric=rule.metric,
        margins=thresholds(),
    )


def _margins() -> dict:
    return {
        "promote_margin": settings.CAUTERWEB_RULE_PROMOTE_MARGIN,
        "regress_margin": settings.CAUTERWEB_RULE_REGRESS_MARGIN,
    }


def paired_panel(rule: Rule, stored, query, *, preferred: list[str | None]) -> dict | None:
    """The rule's paired evidence (semantics §17.5) as the page shows and exports it; None when
    the rule has no paired replay. The matrix shows first the metric the headline names."""
    if not stored.samples:
        return None
    paired = presenters.paired_figures(stored.verdict)
    metrics = presenters.metrics_measured(stored.samples)
    default = presenters.default_metric(metrics, preferred=[*preferred, rule.metric])
    form = EvidenceForm(query, metrics=metrics, default=default)
    metric, sort, error = form.view()
    replay = (stored.verdict or {}).get("details", {}).get("replay") or {}
    return {
        "metric": metric,
        "metrics": metrics,
        "default": default,
        "sort": sort,
        "sorts": EvidenceForm.base_fields["sort"].choices,
        "error": error,
        "rows": presenters.sample_matrix(
            stored.samples,
            figures=paired,
            metric=metric,
            lower_is_better=stored.lower_is_better,
            sort=sort,
        ),
        "noise": presenters.noise_floor(stored.samples),
        "figures": paired,
        "tests": presenters.paired_tests(paired) if paired else [],
        "figure": figures.paired_effect(paired, **_margins()) if paired else None,
        "verdict": stored.verdict,
        "replay": replay,
        "round_id": stored.round_id,
        "samples": len(stored.samples),
        **_margins(),
    }


def randomized_panel(rule: Rule) -> dict | None:
    """The rule's randomized forward trial (semantics §20.5) as the page shows it; None under
    the baseline design for a rule never in one."""
    trial = rule_trial(rule.id)
    if trial is None:
        return None
    return {
        "trial": trial,
        "metric": rule.metric or "outcome_correct",
        "figure": figures.trial_interval(trial["path"], promote_margin=trial["margin"])
        if trial["path"]
        else None,
        **presenters.randomized_trial(trial),
    }


def _evidence(rule: Rule, query, *, decided_by, latest) -> tuple[headlines.Headline, dict | None]:
    stored = replay_selectors.rule_paired_evidence(rule.id)
    headline = rule_headline(
        rule, decided_by=decided_by, latest=latest, paired_verdict=stored.verdict
    )
    paired = paired_panel(rule, stored, query, preferred=[headline.metric])
    return headline, paired


@login_required
def rule_detail(request, rule_id: str):
    rule = get_object_or_404(Rule, pk=rule_id)
    template_name = fragment(request, "dashboard/rules/detail.html", "paired-matrix")
    if template_name.endswith("#paired-matrix"):
        # The matrix alone, re-sorted or on another metric.
        decided_by = selectors.rule_decision_event(rule)
        latest = None if decided_by else selectors.rule_latest_verdict(rule)
        _, paired = _evidence(rule, request.GET, decided_by=decided_by, latest=latest)
        return vary_on_htmx(render(request, template_name, {"rule": rule, "paired": paired}))
    context = selectors.rule_detail(rule)
    context["headline"], context["paired"] = _evidence(
        rule, request.GET, decided_by=context["decided_by"], latest=context["latest_verdict"]
    )
    context["notes"] = _notes(rule, context["headline"], context["paired"])
    context["can_review"] = is_reviewer(request.user)
    context["randomized"] = randomized_panel(rule)
    context["gate_columns"] = presenters.gate_columns(context["gate"])
    context["extraction_rows"] = presenters.extraction_rows(context["extraction_parts"])
    return vary_on_htmx(render(request, template_name, context))


def _notes(rule: Rule, headline: headlines.Headline, paired: dict | None) -> list[str]:
    """What the evidence alone cannot say: the scope's active rules changing while the rule's
    replays were taken (the control arm's baseline moved), and, for a candidate no treatment
    replay read, where the rules read on the same cases live."""
    if paired is None:
        return []
    changes = replay_selectors.active_set_changes(rule.id, scope=rule.scope)
    unread = headlines.treatment_unread(paired["figures"]) if paired["figures"] else False
    elsewhere = replay_selectors.scopes_read_on_cases(rule.id) if unread else []
    controls = (paired["figures"] or {}).get("controls")
    return presenters.evidence_notes(rule, changes=changes, elsewhere=elsewhere, controls=controls)


@login_required
def rule_replays(request, rule_id: str):
    """The per-replay detail, one page at a time (a fold of the rule page)."""
    rule = get_object_or_404(Rule, pk=rule_id)
    page, rounds = selectors.rule_replay_page(rule, page=request.GET.get("page"))
    views = [(r, [presenters.case_view(c, **_margins()) for c in r.cases]) for r in rounds]
    context = {"rule": rule, "page": page, "rounds": views, **_margins()}
    template_name = fragment(request, "dashboard/rules/replays.html", "replay-page")
    return vary_on_htmx(render(request, template_name, context))


@login_required
def rule_timeline(request, rule_id: str):
    """The rule's journal, one page at a time, runs of alike events folded (a fold of the rule
    page)."""
    rule = get_object_or_404(Rule, pk=rule_id)
    error = None
    try:
        page = selectors.rule_timeline_page(
            rule, before=request.GET.get("before", ""), after=request.GET.get("after", "")
        )
    except FilterError as exc:
        error, page = exc, None
    context = {
        "rule": rule,
        "page": page,
        "groups": presenters.timeline_groups(page.events) if page else [],
        "error": error,
    }
    template_name = fragment(request, "dashboard/rules/timeline.html", "timeline-page")
    return vary_on_htmx(render(request, template_name, context))


@login_required
def rule_samples_export(request, rule_id: str, fmt: str):
    """The paired evidence matrix per case, as CSV or JSON (the page's metric and sort)."""
    rule = get_object_or_404(Rule, pk=rule_id)
    decided_by = selectors.rule_decision_event(rule)
    latest = None if decided_by else selectors.rule_latest_verdict(rule)
    _, paired = _evidence(rule, request.GET, decided_by=decided_by, latest=latest)
    rows, metric = (paired["rows"], paired["metric"]) if paired else ([], None)
    filename = f"{rule.id.replace('/', '_')}-samples.{fmt}"
    if fmt == "json":
        body = presenters.matrix_export(rows, rule_id=rule.id, metric=metric)
        response = HttpResponse(
            json.dumps(body, ensure_ascii=False, indent=2), content_type="application/json"
        )
    else:
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        writer = csv.writer(response)
        writer.writerow(presenters.CSV_HEADER)
        writer.writerows(presenters.matrix_csv_rows(rows, metric=metric or ""))
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _confirm(request, rule: Rule, action: str, reason: str = ""):
    return render(
        request, "dashboard/rules/confirm.html", {"rule": rule, "action": action, "reason": reason}
    )


@require_POST
@reviewer_required
def rule_retire(request, rule_id: str):
    """Retire by hand with a reason (semantics §3), after a confirmation step."""
    rule = get_object_or_404(Rule, pk=rule_id)
    reason = request.POST.get("reason", "").strip()
    if not reason:
        messages.error(request, "Give a reason to retire a rule by hand.")
        return redirect("rule-detail", rule_id=rule.id)
    if request.POST.get("confirm") != "yes":
        return _confirm(request, rule, "retire", reason)
    try:
        retired = services.rule_retire_by_reviewer(
            rule_id=rule.id, actor=Actor.reviewer(request.user.get_username()), reason=reason
        )
    except (InvalidRule, WrongState) as exc:
        messages.error(request, str(exc))
    else:
        if retired:
            messages.success(request, f"{rule.id} retired: {reason}")
        else:
            messages.info(request, f"{rule.id} was already retired.")
    return redirect("rule-detail", rule_id=rule.id)


@require_POST
@reviewer_required
def rule_requeue(request, rule_id: str):
    """Re-queue a retired rule as a new candidate version (semantics §3), after a confirmation
    step. The message says what the version is now: with the embedded default a round may
    already have decided it by the time the request ends."""
    rule = get_object_or_404(Rule, pk=rule_id)
    if request.POST.get("confirm") != "yes":
        return _confirm(request, rule, "requeue")
    try:
        version, created = services.rule_requeue(
            rule_id=rule.id, actor=Actor.reviewer(request.user.get_username())
        )
    except (InvalidRule, WrongState) as exc:
        messages.error(request, str(exc))
        return redirect("rule-detail", rule_id=rule.id)
    version.refresh_from_db()
    messages.success(request, presenters.requeue_words(rule.id, version, created=created))
    return redirect("rule-detail", rule_id=version.id)
