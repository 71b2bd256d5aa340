"""Template helpers shared by every dashboard page."""

import json

from django import template
from django.core.serializers.json import DjangoJSONEncoder
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from dashboard import presenters

register = template.Library()


@register.simple_tag(takes_context=True)
def navlink(context, url_name: str, label: str, count=None) -> str:
    """A navigation link marked `aria-current` on its own section, detail pages included; with
    `count`, the number of things waiting there (the review queue's)."""
    href = reverse(url_name)
    path = context["request"].path
    current = path == href if href == "/" else path.startswith(href)
    badge = count_badge(count) if count is not None else ""
    if current:
        return format_html('<a href="{}" aria-current="page">{}{}</a>', href, label, badge)
    return format_html('<a href="{}">{}{}</a>', href, label, badge)


def count_badge(count: int, *, oob: bool = False) -> str:
    """The review queue's count in the navigation; `oob` for an htmx out-of-band update."""
    return format_html(
        ' <span id="nav-review-count" class="count{}"{}>{}<span class="visually-hidden"> waiting'
        "</span></span>",
        " count-zero" if not count else "",
        mark_safe(' hx-swap-oob="true"') if oob else "",
        count,
    )


@register.simple_tag
def review_count_oob(count: int) -> str:
    return count_badge(count, oob=True)


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


@register.filter
def pair(first, second) -> list:
    """[first, second], for a loop over a pair (a suspected duplicate and its rule)."""
    return [x for x in (first, second) if x is not None]


@register.filter
def get_item(mapping, key):
    """mapping[key] in a template, or 0 when it has none."""
    try:
        return mapping[key]
    except (KeyError, TypeError):
        return 0
