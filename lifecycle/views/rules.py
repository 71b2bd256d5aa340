"""Rules table, rule detail and reviewer actions (issue 5 §2, §3)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, render

from lifecycle.models import Rule


@login_required
def rule_list(request):
    rules = Rule.objects.order_by("recorded_at", "id")
    return render(request, "lifecycle/rule_list.html", {"rules": rules})


@login_required
def rule_detail(request, rule_id: str):
    rule = get_object_or_404(Rule, pk=rule_id)
    return render(request, "lifecycle/rule_detail.html", {"rule": rule})


@login_required
def rule_retire(request, rule_id: str):
    return HttpResponseNotAllowed(["POST"])


@login_required
def rule_requeue(request, rule_id: str):
    return HttpResponseNotAllowed(["POST"])
