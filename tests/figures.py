"""Read the figures a page embeds the one way pages embed them (static/js/charts.js):

    <div id="X" class="chart" data-figure="X-fig"></div>{{ fig|json_script:"X-fig" }}

figures(html) maps each chart's element id to its parsed figure, and fails if a chart names a
JSON script the page does not hold (charts.js would draw nothing there)."""

from __future__ import annotations

import json
import re
from typing import Any

_CHART = re.compile(r'<div id="([^"]+)" class="chart" data-figure="([^"]+)"></div>')
_SCRIPT = re.compile(r'<script id="([^"]+)" type="application/json">(.*?)</script>', re.S)


def figures(html: str) -> dict[str, dict[str, Any]]:
    scripts = dict(_SCRIPT.findall(html))
    out = {}
    for chart_id, script_id in _CHART.findall(html):
        assert script_id in scripts, f"chart #{chart_id} names #{script_id}, which the page does not hold"
        out[chart_id] = json.loads(scripts[script_id])
    return out
