"""Template helpers shared by every dashboard page."""

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

register = template.Library()


@register.simple_tag(takes_context=True)
def navlink(context, url_name: str, label: str, fallback: str = "") -> str:
    """A navigation link marked `aria-current` on its own section (detail pages included).

    A page whose route is not registered yet falls back to its planned path instead of breaking
    every page: the navigation is shared by two engineers' routes."""
    try:
        href = reverse(url_name)
    except NoReverseMatch:
        href = fallback or "#"
    path = context["request"].path
    current = path == href if href == "/" else path.startswith(href)
    if current:
        return format_html('<a href="{}" aria-current="page">{}</a>', href, label)
    return format_html('<a href="{}">{}</a>', href, label)
