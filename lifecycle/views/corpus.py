"""Corpus pages: the trajectories with filters, and one trajectory with the rules
that match it by signature (semantics §11)."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render

from lifecycle.models import Trajectory
from lifecycle.selectors import corpus as selectors_corpus
from lifecycle.validation import FilterError

from . import fragment, vary_on_htmx

TRAJECTORIES_PER_PAGE = 50


@login_required
def trajectory_list(request):
    error = None
    try:
        filters = selectors_corpus.clean_corpus_filters(request.GET)
        trajectories = selectors_corpus.trajectory_list(filters=filters)
    except FilterError as exc:
        error = exc
        filters = {key: request.GET.get(key, "") for key in selectors_corpus.CORPUS_FILTER_KEYS}
        trajectories = Trajectory.objects.none()
    page = Paginator(trajectories, TRAJECTORIES_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "filters": filters,
        "filtered": any(filters.get(key) for key in selectors_corpus.CORPUS_FILTER_KEYS),
        "filter_error": error,
        "choices": selectors_corpus.corpus_filter_choices(),
    }
    template_name = fragment(request, "lifecycle/corpus/list.html", "trajectory-table")
    return vary_on_htmx(render(request, template_name, context))


@login_required
def trajectory_detail(request, trajectory_id: str):
    trajectory = get_object_or_404(Trajectory, pk=trajectory_id)
    return render(
        request, "lifecycle/corpus/detail.html", selectors_corpus.trajectory_detail(trajectory)
    )
