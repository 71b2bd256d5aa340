"""Overview and charts pages."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils import timezone

from dashboard import figures, presenters
from lifecycle.selectors import rules as selectors
from replay import selectors as round_selectors


def _funnel(now):
    counts = selectors.funnel_counts(now=now)
    series = figures.funnel_series(now=now, **counts) if counts else figures.EMPTY_FUNNEL
    return figures.lifecycle_funnel(series)


@login_required
def overview(request):
    counts = selectors.state_counts()
    context = {
        "counts": counts,
        "total": sum(counts.values()),
        "pending": presenters.pending_rows(selectors.pending_counts()),
        "transitions": selectors.latest_transitions(limit=10),
        "rounds": round_selectors.last_rounds(limit=5),
        "funnel": _funnel(timezone.now()),
    }
    return render(request, "dashboard/overview.html", context)


@login_required
def charts(request):
    # Imported here, not at start-up: extraction scoring loads the embedding model.
    from lifecycle.selectors.extraction import extraction_rows

    margins = {
        "promote_margin": settings.CAUTERWEB_RULE_PROMOTE_MARGIN,
        "regress_margin": settings.CAUTERWEB_RULE_REGRESS_MARGIN,
    }
    context = {
        "deltas": figures.delta_distributions(
            round_selectors.replay_case_evidence(),
            paired=round_selectors.paired_case_effects(),
            **margins,
        ),
        "extraction": figures.extraction_scatter(extraction_rows()),
        "verdicts": figures.verdicts_per_round(round_selectors.verdict_counts()),
        "funnel": _funnel(timezone.now()),
        **margins,
    }
    return render(request, "dashboard/charts.html", context)
