"""Template helpers shared by every dashboard page."""

import json

from django import template
from django.core.serializers.json import DjangoJSONEncoder
from django.urls import reverse
from django.utils.html import format_html

register = template.Library()


@register.simple_tag(takes_context=True)
def navlink(context, url_name: str, label: str) -> str:
    """A navigation link marked `aria-current` on its own section, detail pages included."""
    href = reverse(url_name)
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
