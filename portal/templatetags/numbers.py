"""`{% load numbers %}`: the filters every page prints numbers with (formats in portal/numbers.py).

    {{ x|num }}  {{ x|num:2 }}        plain, with separators
    {{ x|qty:"cu" }}                 with a unit: cu, cu_h, wt/s, wt, req/s, requests, tokens, usd, usd/M, ms, s, %
    {{ x|cu }}  {{ x|usd }}  {{ x|tokens }}  {{ x|usd_per_m }}   shorthands

An implausible value is shown with a warning sign and the reason in its title, never as a long integer.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from portal.numbers import UNITS, as_float, fmt

register = template.Library()


def _render(value: Any, unit: str, decimals: int | None = None) -> SafeString | str:
    f = fmt(value, unit, decimals)
    if f.implausible:
        return format_html('<span class="implausible" title="{}">⚠ {}</span>', f.why, f.text)
    return f.text


@register.filter
def num(value: Any, decimals: Any = None) -> SafeString | str:
    return _render(value, "", None if decimals in (None, "") else int(decimals))


@register.filter
def qty(value: Any, unit: str) -> SafeString | str:
    unit, _, places = unit.partition(":")
    if unit not in UNITS:
        raise template.TemplateSyntaxError(f"qty: unknown unit {unit!r} (one of {', '.join(UNITS)})")
    return _render(value, unit, int(places) if places else None)


def _shorthand(name: str, unit: str) -> None:
    """`{{ x|name }}` for `{{ x|qty:"unit" }}`."""

    def shorthand(value: Any) -> SafeString | str:
        return _render(value, unit)

    register.filter(name, shorthand)


for _name, _unit in (("cu", "cu"), ("usd", "usd"), ("usd_per_m", "usd/M"), ("tokens", "tokens")):
    _shorthand(_name, _unit)


@register.filter
def pct(share: Any) -> SafeString | str:
    """A share (0.226) as a percentage (22.6 %)."""
    x = as_float(share)
    return _render(None if x is None else x * 100, "%")
