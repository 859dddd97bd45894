"""The one number format (issue 22): separators, units, decimals per unit, implausible values flagged."""

from decimal import Decimal

import pytest
from django.template import Context, Template, TemplateSyntaxError

from portal.numbers import fmt


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (1234567.891, "", "1,234,568"),
        (Decimal("1234.56"), "cu", "1,234.6 CU"),
        ("1234.5", "cu", "1,234.5 CU"),
        (0, "cu", "0.0 CU"),
        (-0.01, "", "0"),
        (52345.4, "wt/s", "52,345 wt/s"),
        (1153156278600, "tokens", "1.15 T tokens"),
        (43_210_000, "tokens", "43.2 M tokens"),
        (950, "tokens", "950 tokens"),
        (1234.5, "usd", "$1,234.50"),
        (-3.5, "usd", "-$3.50"),
        (0.123456, "usd/M", "$0.1235 per M tokens"),
        (12.345, "req/s", "12.35 req/s"),
        (None, "cu", "—"),
        ("", "", "—"),
        ("n/a", "", "n/a"),
    ],
)
def test_formats(value, unit, text):
    f = fmt(value, unit)
    assert f.text == text
    assert not f.implausible


def test_decimals_override():
    assert fmt(2.5, "cu", 3).text == "2.500 CU"


@pytest.mark.parametrize(("value", "unit"), [(10**20, ""), (2e7, "cu"), (float("inf"), "usd"), (float("nan"), "")])
def test_implausible_values_are_flagged_not_printed_long(value, unit):
    f = fmt(value, unit)
    assert f.implausible
    assert "outside the plausible range" in f.why
    assert not any(len(run) > 7 for run in "".join(c if c.isdigit() else " " for c in f.text).split())


def test_template_filters():
    t = Template(
        '{% load numbers %}{{ a|cu }}|{{ b|qty:"usd/M" }}|{{ c|tokens }}|{{ d|num }}|{{ e|num:2 }}|{{ a|qty:"cu:3" }}'
    )
    out = t.render(Context({"a": Decimal("12.25"), "b": 0.5, "c": 2_500_000_000, "d": 10**21, "e": 3}))
    assert out.startswith("12.2 CU|$0.5000 per M tokens|2.50 B tokens|")
    assert '<span class="implausible" title="outside the plausible range' in out
    assert out.endswith("|3.00|12.250 CU")


def test_unknown_unit_is_refused():
    with pytest.raises(TemplateSyntaxError, match="unknown unit 'furlongs'"):
        Template('{% load numbers %}{{ 1|qty:"furlongs" }}').render(Context({}))
