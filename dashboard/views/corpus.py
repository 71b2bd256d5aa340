"""Corpus pages: the failure families of the imported sessions and the trajectories with
filters, one trajectory with the rules that match it by signature (semantics §11), and a
reviewer's request that the extractor propose the rule a family's recoveries teach."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from dashboard.forms import CorpusFilterForm
from lifecycle import extractors
from lifecycle.models import Trajectory
from lifecycle.selectors import corpus as selectors_corpus
from lifecycle.validation import FilterError

from . import fragment, is_reviewer, reviewer_required, vary_on_htmx

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
    if not request.htmx:
        context["families"], context["family_count"] = selectors_corpus.failure_families()
        context["can_review"] = is_reviewer(request.user)
    template_name = fragment(request, "dashboard/corpus/list.html", "trajectory-table")
    return vary_on_htmx(render(request, template_name, context))


@login_required
def trajectory_detail(request, trajectory_id: str):
    trajectory = get_object_or_404(Trajectory, pk=trajectory_id)
    return render(
        request, "dashboard/corpus/detail.html", selectors_corpus.trajectory_detail(trajectory)
    )


@require_POST
@reviewer_required
def family_propose(request):
    """The recovery extractor on one family (its atoms, as the families table lists them): the
    candidate it records is validated like any other, on evidence (semantics §3)."""
    atoms = request.POST.get("family", "").split()[: selectors_corpus.MAX_ATOMS]
    try:
        run = extractors.extract_from_family(atoms=atoms)
    except extractors.FamilyNotFound as exc:
        messages.error(request, str(exc))
        return redirect("corpus")
    if run.skipped:
        messages.warning(request, f"Nothing proposed: {run.skipped[0].why}.")
        return redirect("corpus")
    rule_id = (run.created or run.unchanged)[0]
    proposal = run.proposals[0]
    messages.success(
        request,
        f"{rule_id}: {proposal.trigger} → {proposal.directive} (support {proposal.provenance['support']}).",
    )
    return redirect("rule-detail", rule_id)
