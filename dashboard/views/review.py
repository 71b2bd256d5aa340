"""The review queue (docs/dashboard.md, "The review queue"): everything that needs a human,
each with the evidence to decide and its actions in place. One URL serves the page and its
list (filters by kind and scope, pushed to the URL); an action answers with the resolved card
and the navigation's new count (an out-of-band swap), or, without htmx, a redirect."""

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboard import headlines
from dashboard.context_processors import counts_with_total
from dashboard.forms import ReviewFilterForm
from lifecycle.models import ReviewItem, StagedPack
from lifecycle.selectors import review as selectors
from lifecycle.services import packs
from lifecycle.services.review import (
    BadAction,
    ItemClosed,
    ReviewItemNotFound,
    review_resolve,
)
from lifecycle.states import Actor, NotAllowed, WrongState
from lifecycle.validation import FilterError, InvalidRule

from . import fragment, is_reviewer, reviewer_required, vary_on_htmx
from .rules import thresholds

ITEMS_PER_PAGE = 25
# What an action can refuse with: each is said on the card, nothing is half-done.
REFUSALS = (
    BadAction,
    ItemClosed,
    ReviewItemNotFound,
    InvalidRule,
    WrongState,
    NotAllowed,
    packs.PackRejected,
)


def _cards(items: list) -> list[dict]:
    """Each item with what it needs beyond its rows: a harm item's headline, built from the
    evidence of the retirement (dashboard/headlines.py)."""
    decisions = selectors.decisions_of(items)
    cards = []
    for item in items:
        decision = decisions.get(item.rule_id)
        headline = None
        if decision is not None:
            headline = headlines.decision_headline(
                type_=decision.type,
                actor=decision.actor,
                evidence=decision.evidence,
                rule_metric=item.rule.metric if item.rule else "",
                margins=thresholds(),
            )
        cards.append({"item": item, "headline": headline})
    return cards


@login_required
def review_queue(request):
    form = ReviewFilterForm(request.GET, scopes=selectors.review_scopes())
    error = None
    try:
        items = selectors.review_items(filters=form.filters())
    except FilterError as exc:
        error, items = exc, ReviewItem.objects.none()
    page = Paginator(items, ITEMS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "form": form,
        "filter_error": error,
        "page": page,
        "cards": _cards(list(page.object_list)),
        "can_review": is_reviewer(request.user),
        "max_replay_attempts": settings.CAUTERWEB_MAX_REPLAY_ATTEMPTS,
        "trial_sessions": settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS,
    }
    template_name = fragment(request, "dashboard/review/queue.html", "review-list")
    return vary_on_htmx(render(request, template_name, context))


@require_POST
@reviewer_required
def review_action(request, item_id: int, action: str):
    """Resolve one item with one of its kind's actions."""
    error = ""
    try:
        review_resolve(
            item_id=item_id,
            action=action,
            actor=Actor.reviewer(request.user.get_username()),
            reason=request.POST.get("reason", ""),
            keep=request.POST.get("keep", ""),
        )
    except REFUSALS as exc:
        error = str(exc)
    if not request.htmx:
        if error:
            messages.error(request, f"Nothing done: {error}")
        else:
            messages.success(request, "Done.")
        return redirect(request.POST.get("next") or "review")
    item = selectors.review_item_get(item_id)
    if item is None:
        return vary_on_htmx(render(request, "includes/empty.html", {"message": error}))
    context = {
        "card": _cards([item])[0],
        "error": error,
        "can_review": True,
        "review_counts": counts_with_total(),
        "oob": True,
        "max_replay_attempts": settings.CAUTERWEB_MAX_REPLAY_ATTEMPTS,
        "trial_sessions": settings.CAUTERWEB_RULE_TRIAL_MIN_SESSIONS,
    }
    return vary_on_htmx(render(request, "dashboard/review/card.html", context))


@login_required
def extraction_labels_export(request):
    """The reviewers' answers about extractions as JSON Lines, in the shape of the comparator's
    labelled pairs (comparison/data/extraction_eval.jsonl)."""
    lines = (json.dumps(row, ensure_ascii=False) + "\n" for row in selectors.extraction_labels())
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="extraction-labels-{stamp}.jsonl"'
    return response


@login_required
def staged_pack(request, pack_id: int):
    """A waiting pack's preview: every rule, what importing it would do, and its errors."""
    pack = get_object_or_404(StagedPack, pk=pack_id)
    preview = packs.preview_pack(pack.text)
    item = pack.review_items.select_related("pack").first()
    context = {
        "pack": pack,
        "preview": preview,
        "card": _cards([item])[0] if item else None,
        "can_review": is_reviewer(request.user),
    }
    return render(request, "dashboard/review/pack.html", context)
