"""Journal page and exports (semantics §10): filter by type, rule, round, actor and time;
page by keyset; export the filtered events as JSON Lines or CSV, streamed."""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from dashboard import presenters
from dashboard.forms import JournalFilterForm
from lifecycle.selectors import journal as selectors_journal
from lifecycle.validation import FilterError

from . import fragment, vary_on_htmx

EXPORT_FORMATS = {
    "jsonl": ("application/x-ndjson; charset=utf-8", selectors_journal.jsonl_lines),
    "csv": ("text/csv; charset=utf-8", selectors_journal.csv_lines),
}


@login_required
def journal(request):
    form = JournalFilterForm(request.GET)
    error, filters = None, {}
    try:
        filters = form.filters()
        page = selectors_journal.journal_page(
            selectors_journal.journal_events(filters=filters),
            before=request.GET.get("before", ""),
            after=request.GET.get("after", ""),
        )
    except FilterError as exc:
        error = exc
        page = selectors_journal.JournalPage(events=[], older=None, newer=None)
    context = {
        "page": page,
        "form": form,
        "filter_error": error,
        "known_types": selectors_journal.KNOWN_TYPES,
        "export_query": _filter_query(request),
        "export_words": presenters.journal_export_words(filters),
    }
    template_name = fragment(request, "dashboard/journal/journal.html", "journal-table")
    return vary_on_htmx(render(request, template_name, context))


def _filter_query(request) -> str:
    """The filters of this page as a query string, without the page position."""
    query = request.GET.copy()
    for key in ("before", "after"):
        query.pop(key, None)
    return query.urlencode()


@login_required
def journal_export(request, fmt: str):
    """Every event the filters select, oldest first, streamed so a million rows never sit in
    memory. A bad filter is a 400 with the message, never a 500 or a silently empty file."""
    content_type, lines = EXPORT_FORMATS[fmt]
    try:
        filters = JournalFilterForm(request.GET).filters()
    except FilterError as exc:
        return HttpResponseBadRequest(
            f"Bad filter {exc.field}: {exc}\n", content_type="text/plain; charset=utf-8"
        )
    rows = selectors_journal.export_rows(selectors_journal.journal_events(filters=filters))
    response = StreamingHttpResponse(lines(rows), content_type=content_type)
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="cauterweb-journal-{stamp}.{fmt}"'
    return response
