"""Overview and charts pages (issue 5 §1, §9)."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from lifecycle.models import Rule


@login_required
def overview(request):
    return render(request, "lifecycle/overview.html", {"rule_count": Rule.objects.count()})


@login_required
def charts(request):
    return render(request, "lifecycle/charts.html", {})
