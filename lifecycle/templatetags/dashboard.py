"""Template helpers shared by every dashboard page."""

import json
from urllib.parse import urlencode

from django import template
from django.core.serializers.json import DjangoJSONEncoder
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


@register.filter
def as_json(value) -> str:
    """A value as compact JSON, for a `data-plotly` attribute (autoescaping quotes it)."""
    return json.dumps(value, cls=DjangoJSONEncoder, separators=(",", ":"))


@register.filter
def pretty_json(value) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, indent=2, sort_keys=True, ensure_ascii=False)


@register.simple_tag
def trajectory_url(trajectory_id: str) -> str:
    """The corpus page of a trajectory (dashboard-2's route), or its planned path."""
    try:
        return reverse("trajectory-detail", args=[trajectory_id])
    except NoReverseMatch:
        return f"/corpus/{trajectory_id}/"


@register.simple_tag
def journal_url(rule_id: str) -> str:
    """The journal page (dashboard-2's route) filtered to one rule."""
    try:
        base = reverse("journal")
    except NoReverseMatch:
        base = "/journal/"
    return f"{base}?{urlencode({'rule': rule_id})}"


@register.filter
def percent(value) -> str:
    if not isinstance(value, int | float):
        return "—"
    return f"{value:.0%}"


@register.filter
def number(value, digits: int = 2) -> str:
    if not isinstance(value, int | float):
        return "—"
    return f"{value:.{digits}f}"
