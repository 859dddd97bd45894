"""One palette and one layout for every chart (issue 34.4): the figure modules name their colours and
build their layouts from here, so a colour or the chart frame is changed in one place.
"""

from __future__ import annotations

from typing import Any

# The palette. A hue means the same on every page: blue what is bought or entitled, green what is
# admitted or held, red a p99 or what is over, amber a warning line, ink a target.
BLUE = "#2563eb"
LIGHT_BLUE = "#93c5fd"
GREEN = "#16a34a"
RED = "#dc2626"
AMBER = "#f59e0b"
PURPLE = "#9333ea"
VIOLET = "#a855f7"
SLATE = "#64748b"
LIGHT_SLATE = "#cbd5e1"
DARK_SLATE = "#475569"
INK = "#0f172a"
# Throttle reasons, tenant-caused in ambers (lightest first), platform-caused in reds and pink.
AMBER_LIGHT = "#fbbf24"
AMBER_DARK = "#d97706"
AMBER_DARKER = "#b45309"
AMBER_DARKEST = "#92400e"
PINK = "#f472b6"
RED_DARK = "#991b1b"
RED_DARKEST = "#7f1d1d"
# plotly's own colours, which the review and planning pages draw with.
PLOTLY_BLUE = "#1f77b4"
PLOTLY_ORANGE = "#ff7f0e"
PLOTLY_GREEN = "#2ca02c"
PLOTLY_RED = "#d62728"
PLOTLY_GREY = "#8c8c8c"
GREY = "#555555"
CHARCOAL = "#333333"
# One line a colour in turn (one line per pool), repeating past the end.
SERIES = [BLUE, GREEN, "#ea580c", PURPLE, "#0891b2", "#db2777", "#65a30d", "#ca8a04", DARK_SLATE]


def series_colour(i: int) -> str:
    return SERIES[i % len(SERIES)]


def bare() -> dict[str, Any]:
    """The frame of an untitled chart: no background of its own (the page's shows), 12 px type."""
    return {"paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)", "font": {"size": 12}}


def legend_below(y: float = -0.2) -> dict[str, Any]:
    return {"orientation": "h", "y": y}


def titled(
    title: str, y: str, *, margin: dict[str, int], height: int, xaxis: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """The frame of a titled chart over time: the title, the y axis from zero, the legend below;
    `extra` replaces or adds keys."""
    layout: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 14}},
        "margin": margin,
        "height": height,
        "yaxis": {"title": {"text": y}, "rangemode": "tozero"},
    }
    if xaxis is not None:
        layout["xaxis"] = xaxis
    layout["legend"] = legend_below()
    return layout | extra


def vline(x: float, colour: str, text: str, y: float, *, anchor: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A dashed vertical line at `x` and its note at height `y` (0 to 1), on the `anchor` side."""
    shape = {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "line": {"color": colour, "width": 2, "dash": "dash"},
    }
    note = {
        "x": x,
        "y": y,
        "xref": "x",
        "yref": "paper",
        "text": text,
        "showarrow": False,
        "xanchor": anchor,
        "font": {"color": colour},
        "bgcolor": "rgba(255,255,255,0.8)",
    }
    return shape, note
