"""Rounds pages: the list, a round's detail (polled live while it runs) and the
reviewers' "Start a round" button."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from lifecycle.states import Actor
from replay import selectors
from replay.models import RoundStatus, ValidationRound
from replay.reviewer import round_kick

from . import fragment, is_reviewer, reviewer_required, vary_on_htmx

ROUNDS_PER_PAGE = 30


@login_required
def round_list(request):
    page = Paginator(selectors.round_list(), ROUNDS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "any_running": any(r.status == RoundStatus.RUNNING for r in page.object_list),
        "can_review": is_reviewer(request.user),
    }
    template_name = fragment(request, "dashboard/rounds/list.html", "round-table")
    return vary_on_htmx(render(request, template_name, context))


@login_required
def round_detail(request, round_id: int):
    vround = get_object_or_404(ValidationRound, pk=round_id)
    template_name = fragment(request, "dashboard/rounds/detail.html", "round-status")
    context = selectors.round_detail(vround, page=request.GET.get("page"))
    return vary_on_htmx(render(request, template_name, context))


@require_POST
@reviewer_required
def round_start(request):
    """Ask for a round (semantics §9.1). The kick never raises; its detail tells the reviewer
    whether it was queued."""
    result = round_kick(actor=Actor.reviewer(request.user.get_username()), via="dashboard")
    if result["queued"]:
        messages.success(request, f"Round requested: {result['detail']}.")
    else:
        messages.warning(request, f"No round started: {result['detail']}.")
    return redirect("round-list")
