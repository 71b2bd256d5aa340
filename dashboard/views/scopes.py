"""Scope pages: every scope with its rule counts, and each scope file exactly as the
rule tool gives it to agents (semantics §4): active rules, then the provisional candidates."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render

from lifecycle.scopes import PROVISIONAL_HEADING, render_scope
from lifecycle.selectors import corpus as selectors_corpus


@login_required
def scope_list(request):
    return render(
        request, "dashboard/scopes/list.html", {"scopes": selectors_corpus.scope_counts()}
    )


@login_required
def scope_detail(request, scope: str):
    counts = {c.scope: c for c in selectors_corpus.scope_counts()}
    if scope not in counts:
        raise Http404(f"No rule has scope {scope!r}.")
    text = render_scope(scope)
    if request.GET.get("format") == "text":
        return HttpResponse(text, content_type="text/plain; charset=utf-8")
    context = {
        "scope": counts[scope],
        "scopes": counts.values(),
        "text": text,
        "provisional_heading": PROVISIONAL_HEADING,
    }
    return render(request, "dashboard/scopes/detail.html", context)
