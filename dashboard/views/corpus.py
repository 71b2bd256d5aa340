"""Corpus pages: the trajectories with filters, and one trajectory with the rules
that match it by signature (semantics §11)."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render

from dashboard.forms import CorpusFilterForm
from lifecycle.models import Trajectory
from lifecycle.selectors import corpus as selectors_corpus
from lifecycle.validation import FilterError

from . import fragment, vary_on_htmx

TRAJECTORIES_PER_PAGE = 50


@login_required
def trajectory_list(request):
    form = CorpusFilterForm(request.GET, choices=selectors_corpus.corpus_filter_choices())
    error = None
    try:
        trajectories = selectors_corpus.trajectory_list(filters=form.filters())
    except FilterError as exc:
        error = exc
        trajectories = Trajectory.objects.none()
    page = Paginator(trajectories, TRAJECTORIES_PER_PAGE).get_page(request.GET.get("page"))
    context = {"page": page, "form": form, "filter_error": error}
    template_name = fragment(request, "dashboard/corpus/list.html", "trajectory-table")
    return vary_on_htmx(render(request, template_name, context))


@login_required
def trajectory_detail(request, trajectory_id: str):
    trajectory = get_object_or_404(Trajectory, pk=trajectory_id)
    return render(
        request, "dashboard/corpus/detail.html", selectors_corpus.trajectory_detail(trajectory)
    )
