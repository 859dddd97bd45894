"""A used ÷ bought meter's figure stays on one line beside its bar. The demo's spilling grant (issue 36's
demo) peaks at 227.8 % of what it bought in a minute: in a 3.4 rem column that figure wrapped its "%"
under the number (seen on the entitlement live page, 1400 px wide)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string

from portal.usage_meters import Meter, Usage

SHARES = [0.084, 2.278, 12.345]  # 8.4 %, 227.8 %, 1,234.5 %: the widest a peak minute plausibly shows


def test_each_meter_figure_is_one_line_inside_its_row(browser: Any) -> None:
    t = datetime(2026, 12, 2, tzinfo=UTC)
    meters = [Meter(f"m{i}", "24 h peak minute", t, t, s, "used.peak_share_1m") for i, s in enumerate(SHARES)]
    html = render_to_string("portal/home/_meters.html", {"usage": Usage(meters=meters)})
    page = browser.new_page(viewport={"width": 1400, "height": 600})
    page.set_content(f"<section style='width: 30rem'>{html}</section>")
    for sheet in ("vendor/pico.min.css", "css/app.css"):  # base.html's two, in its order
        page.add_style_tag(content=(Path(settings.BASE_DIR) / "static" / sheet).read_text())
    texts = page.locator(".meter-value").all_inner_texts()
    assert texts == ["8.4 %", "227.8 %", "1,234.5 %"]
    heights = [round(b["height"]) for b in (v.bounding_box() for v in page.locator(".meter-value").all())]
    assert heights == [heights[0]] * 3  # the same one line as 8.4 %'s
    for row in page.locator(".meter-row").all():
        value, box = row.locator(".meter-value").bounding_box(), row.bounding_box()
        assert value["x"] + value["width"] <= box["x"] + box["width"]  # inside the row, not spilling past it
