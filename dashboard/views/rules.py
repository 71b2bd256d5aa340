"""Rules table, rule detail and reviewer actions. No promote view exists:
only the validation engine promotes (semantics §3)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from dashboard.forms import RuleFilterForm
from lifecycle.models import Rule
from lifecycle.selectors import rules as selectors
from lifecycle.services import rules as services
from lifecycle.states import Actor, WrongState
from lifecycle.validation import InvalidRule

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


@login_required
def rule_detail(request, rule_id: str):
    rule = get_object_or_404(Rule, pk=rule_id)
    context = selectors.rule_detail(rule)
    context["can_review"] = is_reviewer(request.user)
    return render(request, "dashboard/rules/detail.html", context)


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
