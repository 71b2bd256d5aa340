"""Rules table, rule detail and reviewer actions. No promote view exists:
only the validation engine promotes (semantics §3)."""

import csv
import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from dashboard import figures, presenters
from dashboard.forms import EvidenceForm, RuleFilterForm
from lifecycle.models import Rule
from lifecycle.selectors import rules as selectors
from lifecycle.services import rules as services
from lifecycle.states import Actor, WrongState
from lifecycle.validation import InvalidRule
from replay.selectors import rule_paired_evidence
from replay.trials import rule_trial

from . import fragment, is_reviewer, reviewer_required, vary_on_htmx

RULES_PER_PAGE = 50


@login_required
def rule_list(request):
    form = RuleFilterForm(request.GET, choices=selectors.rule_filter_choices())
    error = None
    try:
        rules = selectors.rule_list(filters=form.filters()).only(*selectors.RULE_TABLE_FIELDS)
    except selectors.FilterError as exc:
        error = exc
        rules = Rule.objects.none()
    page = Paginator(rules, RULES_PER_PAGE).get_page(request.GET.get("page"))
    context = {"page": page, "form": form, "filter_error": error}
    template_name = fragment(request, "dashboard/rules/list.html", "rule-table")
    return vary_on_htmx(render(request, template_name, context))


def paired_panel(rule_id: str, query) -> dict | None:
    """The rule's paired evidence (semantics §17.5) as the page shows and exports it; None when
    the rule has no paired replay."""
    stored = rule_paired_evidence(rule_id)
    if not stored.samples:
        return None
    paired = presenters.paired_figures(stored.verdict)
    metrics = presenters.metrics_measured(stored.samples)
    form = EvidenceForm(
        query, metrics=metrics, default=presenters.deciding_metric(stored.verdict, stored.samples)
    )
    metric, sort, error = form.view()
    margins = {
        "promote_margin": settings.CAUTERWEB_RULE_PROMOTE_MARGIN,
        "regress_margin": settings.CAUTERWEB_RULE_REGRESS_MARGIN,
    }
    replay = (stored.verdict or {}).get("details", {}).get("replay") or {}
    return {
        "metric": metric,
        "metrics": metrics,
        "deciding": form.default,
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
        "figure": figures.paired_effect(paired, **margins) if paired else None,
        "verdict": stored.verdict,
        "replay": replay,
        "round_id": stored.round_id,
        "samples": len(stored.samples),
        **margins,
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


@login_required
def rule_detail(request, rule_id: str):
    rule = get_object_or_404(Rule, pk=rule_id)
    paired = paired_panel(rule.id, request.GET)
    template_name = fragment(request, "dashboard/rules/detail.html", "paired-matrix")
    if template_name.endswith("#paired-matrix"):
        # The matrix alone, re-sorted or on another metric: nothing else is read.
        return vary_on_htmx(render(request, template_name, {"rule": rule, "paired": paired}))
    context = selectors.rule_detail(rule)
    context["can_review"] = is_reviewer(request.user)
    context["paired"] = paired
    context["randomized"] = randomized_panel(rule)
    return vary_on_htmx(render(request, template_name, context))


@login_required
def rule_samples_export(request, rule_id: str, fmt: str):
    """The paired evidence matrix per case, as CSV or JSON (the page's metric and sort)."""
    rule = get_object_or_404(Rule, pk=rule_id)
    paired = paired_panel(rule.id, request.GET)
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
    """Re-queue a retired rule as a new candidate version (semantics §3), after a confirmation step."""
    rule = get_object_or_404(Rule, pk=rule_id)
    if request.POST.get("confirm") != "yes":
        return _confirm(request, rule, "requeue")
    try:
        version = services.rule_requeue(
            rule_id=rule.id, actor=Actor.reviewer(request.user.get_username())
        )
    except (InvalidRule, WrongState) as exc:
        messages.error(request, str(exc))
        return redirect("rule-detail", rule_id=rule.id)
    messages.success(request, f"{rule.id} re-queued as candidate {version.id}.")
    return redirect("rule-detail", rule_id=version.id)
