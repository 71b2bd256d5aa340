"""Rounds pages (issue 5 §4)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, render

from .models import ValidationRound


@login_required
def round_list(request):
    return render(request, "replay/round_list.html", {"rounds": ValidationRound.objects.all()[:50]})


@login_required
def round_detail(request, round_id: int):
    vround = get_object_or_404(ValidationRound, pk=round_id)
    return render(request, "replay/round_detail.html", {"round": vround})


@login_required
def round_start(request):
    return HttpResponseNotAllowed(["POST"])
