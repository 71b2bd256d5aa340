from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from .models import Rule


@login_required
def rule_list(request):
    rules = Rule.objects.order_by("recorded_at", "id")
    return render(request, "lifecycle/rule_list.html", {"rules": rules})
