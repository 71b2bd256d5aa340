"""Dashboard views, one module per page family. Views stay thin: parse the request,
make one call into selectors/services, render. Shared helpers for every page live here."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.utils.cache import patch_vary_headers

REVIEWERS_GROUP = "reviewers"


def is_reviewer(user) -> bool:
    """Reviewers may retire and re-queue rules and start rounds; viewers only look (semantics §3)."""
    return user.is_authenticated and user.groups.filter(name=REVIEWERS_GROUP).exists()


def reviewer_required(view):
    """Login first (anonymous users go to the login page), then 403 for anyone who is not a
    reviewer."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not is_reviewer(request.user):
            raise PermissionDenied("Only reviewers may do this.")
        return view(request, *args, **kwargs)

    return login_required(wrapped)


def staff_required(view):
    """Login first, then 403 for anyone who is not staff: webhooks send the engine's news
    outside, so only an administrator configures them."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_staff:
            raise PermissionDenied("Only administrators (staff) may configure webhooks.")
        return view(request, *args, **kwargs)

    return login_required(wrapped)


def fragment(request, template_name: str, partial: str) -> str:
    """The page's template, or only its `partial` for an htmx swap. A history-restore request
    (back button after the cache expired) needs the whole page, not the fragment."""
    if request.htmx and not request.htmx.history_restore_request:
        return f"{template_name}#{partial}"
    return template_name


def vary_on_htmx(response):
    """One URL serves a page and a fragment: caches must key on the htmx header."""
    patch_vary_headers(response, ("HX-Request",))
    return response
