"""Template helpers shared by every dashboard page."""

import json

from django import template
from django.core.serializers.json import DjangoJSONEncoder
from django.urls import reverse
from django.utils.html import format_html

from dashboard import presenters

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


@register.filter
def signed(value, digits: int = 2) -> str:
    """+0.18 / −0.04, with a real minus sign."""
    return presenters.signed(value, digits)


@register.filter
def interval_text(ci) -> str:
    """An interval as [low, high]; "" for none (a test not run)."""
    return presenters.interval(*ci) if ci else ""


@register.filter
def validator(value: str) -> str:
    """`forward_trial` as people write it."""
    return presenters.validator_words(value or "")


@register.filter
def extraction_words(extraction: dict) -> str:
    return presenters.extraction_words(extraction)


@register.filter
def negate(value):
    return -value if isinstance(value, int | float) else value


@register.filter
def short_outcome(value: str) -> str:
    """A replay outcome that scored nothing, in a chip's few words."""
    return presenters.short_outcome(value)
