"""Plotly figure dicts for the live pages, built from the columnar series of telemetry.selectors.

Pure functions over plain data: no database, no request, so they are tested with exact values.
Who is responsible for a throttle comes from the reason registry (CONTRACT §4), never from a guess.
"""

from __future__ import annotations

from typing import Any

from entitlements.reasons import REASONS

ENTITLED = "#2563eb"
ARRIVED = "#64748b"
ADMITTED = "#16a34a"
ACTUAL = "#9333ea"
REASON_COLOURS = {
    "NOT_ENTITLED": "#fbbf24",
    "OUTSIDE_ENVELOPE": "#f59e0b",
    "CONCURRENCY_LIMIT": "#d97706",
    "QUOTA_EXCEEDED": "#b45309",
    "RECLAIMED": "#f472b6",
    "PLATFORM_CAPACITY": "#dc2626",
    "PLACEMENT": "#991b1b",
    "ADMISSION_UNAVAILABLE": "#7f1d1d",
}


def is_tenant_caused(reason: str) -> bool:
    return REASONS[reason].responsible == "tenant" if reason in REASONS else False


def _layout(title: str, y: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "font": {"size": 14}},
        "margin": {"l": 55, "r": 10, "t": 35, "b": 35},
        "height": 260,
        "yaxis": {"title": {"text": y}, "rangemode": "tozero"},
        "xaxis": {"type": "date"},
        "legend": {"orientation": "h", "y": -0.2},
        **extra,
    }


def _line(name: str, x: list, y: list, colour: str, **extra: Any) -> dict[str, Any]:
    return {"type": "scatter", "mode": "lines", "name": name, "x": x, "y": y, "line": {"color": colour}, **extra}


def rate_figure(usage: dict[str, Any]) -> dict[str, Any]:
    """Entitled rate (the promise) against what arrived and what was admitted, in weighted tokens/s."""
    s, t = usage["series"], usage["t"]
    return {
        "data": [
            _line("entitled", t, s["entitled_wt_per_s"], ENTITLED, line={"color": ENTITLED, "dash": "dash"}),
            _line("arrived", t, s["arrived_wt_per_s"], ARRIVED),
            _line("admitted", t, s["admitted_wt_per_s"], ADMITTED),
        ],
        "layout": _layout("Entitled vs arrived vs admitted", "weighted tokens/s"),
    }


def _reason_bars(usage: dict[str, Any], reasons: list[str]) -> list[dict[str, Any]]:
    s, t = usage["series"], usage["t"]
    return [
        {
            "type": "bar",
            "name": f"{r} ({REASONS[r].responsible if r in REASONS else '?'})",
            "x": t,
            "y": s["throttled_requests"][r],
            "marker": {"color": REASON_COLOURS.get(r, "#475569")},
        }
        for r in reasons
    ]


def decisions_figure(usage: dict[str, Any]) -> dict[str, Any]:
    """Admitted requests with throttled requests stacked on top, one colour per reason."""
    s, t = usage["series"], usage["t"]
    admitted = {"type": "bar", "name": "admitted", "x": t, "y": s["admitted_requests"], "marker": {"color": ADMITTED}}
    return {
        "data": [admitted, *_reason_bars(usage, sorted(s["throttled_requests"]))],
        "layout": _layout("Admitted and throttled by reason", "requests", barmode="stack"),
    }


def throttle_split(usage: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two figures, never one: throttles the tenant caused, and throttles the platform caused."""
    reasons = sorted(usage["series"]["throttled_requests"])
    mine = [r for r in reasons if is_tenant_caused(r)]
    ours = [r for r in reasons if not is_tenant_caused(r)]
    tenant_fig = {
        "data": _reason_bars(usage, mine),
        "layout": _layout("Tenant-caused: limits of the entitlement were hit", "requests", barmode="stack"),
    }
    platform_fig = {
        "data": _reason_bars(usage, ours),
        "layout": _layout("Platform-caused: supply was short or capacity reclaimed", "requests", barmode="stack"),
    }
    return tenant_fig, platform_fig


def tokens_figure(usage: dict[str, Any]) -> dict[str, Any]:
    """Estimated weighted tokens reserved at admission against the actual ones settled at completion."""
    s, t = usage["series"], usage["t"]
    return {
        "data": [
            {
                "type": "bar",
                "name": "estimated (admitted)",
                "x": t,
                "y": s["estimated_wt"],
                "marker": {"color": ENTITLED},
            },
            {"type": "bar", "name": "actual (completed)", "x": t, "y": s["actual_wt"], "marker": {"color": ACTUAL}},
        ],
        "layout": _layout("Estimated vs actual weighted tokens", "weighted tokens", barmode="group"),
    }


def pool_figure(pool: str, points: list[dict[str, Any]]) -> dict[str, Any]:
    """Accelerator utilisation and KV-cache use (0–1) of one pool, plus healthy replicas on a second axis."""
    x = [p["t"] for p in points]
    return {
        "data": [
            _line("accelerator util", x, [p["util"] for p in points], "#ea580c"),
            _line("KV cache", x, [p["kv"] for p in points], ACTUAL),
            _line(
                "healthy replicas",
                x,
                [p["healthy"] for p in points],
                ADMITTED,
                yaxis="y2",
                line={"color": ADMITTED, "shape": "hv"},
            ),
        ],
        "layout": _layout(
            pool,
            "fraction",
            yaxis={"title": {"text": "fraction"}, "range": [0, 1]},
            yaxis2={"title": {"text": "replicas"}, "overlaying": "y", "side": "right", "rangemode": "tozero"},
        ),
    }


def totals(usage: dict[str, Any]) -> dict[str, Any]:
    """Sums over the range for the headline numbers, split by who caused the throttles."""
    s = usage["series"]
    by_reason = {r: int(sum(v)) for r, v in s["throttled_requests"].items()}
    return {
        "arrived": int(sum(s["arrived_requests"])),
        "admitted": int(sum(s["admitted_requests"])),
        "tenant_throttled": sum(n for r, n in by_reason.items() if is_tenant_caused(r)),
        "platform_throttled": sum(n for r, n in by_reason.items() if not is_tenant_caused(r)),
        "by_reason": [
            {"reason": r, "n": n, "responsible": REASONS[r].responsible if r in REASONS else "?"}
            for r, n in sorted(by_reason.items())
        ],
        "estimated_wt": sum(s["estimated_wt"]),
        "actual_wt": sum(s["actual_wt"]),
    }
