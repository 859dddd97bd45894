"""Plotly figure dicts for the live pages, built from the columnar series of telemetry.selectors.

Pure functions over plain data: no database, no request, so they are tested with exact values.
Who is responsible for a throttle comes from the reason registry (docs/contract.md §4), never from a guess.
"""

from __future__ import annotations

from typing import Any

from entitlements.reasons import REASONS
from portal.charts import style

ENTITLED = style.BLUE
ARRIVED = style.SLATE
ADMITTED = style.GREEN
ACTUAL = style.PURPLE
# admitted beyond the own bucket (issue 36): on lent pool room, or through the spillover target
SOURCES = {"borrowed": ("on borrowed capacity", style.LIGHT_BLUE), "spilled": ("spilled over", style.VIOLET)}
REASON_COLOURS = {
    "NOT_ENTITLED": style.AMBER_LIGHT,
    "OUTSIDE_ENVELOPE": style.AMBER,
    "CONCURRENCY_LIMIT": style.AMBER_DARK,
    "QUOTA_EXCEEDED": style.AMBER_DARKER,
    "BUDGET_EXHAUSTED": style.AMBER_DARKEST,
    "RECLAIMED": style.PINK,
    "PLATFORM_CAPACITY": style.RED,
    "PLACEMENT": style.RED_DARK,
    "ADMISSION_UNAVAILABLE": style.RED_DARKEST,
}


def is_tenant_caused(reason: str) -> bool:
    return REASONS[reason].responsible == "tenant" if reason in REASONS else False


def _layout(title: str, y: str, **extra: Any) -> dict[str, Any]:
    margin = {"l": 55, "r": 10, "t": 35, "b": 35}
    return style.titled(title, y, margin=margin, height=extra.pop("height", 260), xaxis={"type": "date"}, **extra)


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
        # Reserve debits the estimate (p95 output when max_output_tokens is absent) and complete refunds
        # the rest, so admitted estimates can outrun the entitled rate while what is used cannot.
        "layout": _layout("Entitled vs arrived vs admitted (reserved estimates, before refunds)", "weighted tokens/s"),
    }


def _reason_bars(usage: dict[str, Any], reasons: list[str]) -> list[dict[str, Any]]:
    s, t = usage["series"], usage["t"]
    return [
        {
            "type": "bar",
            "name": f"{r} ({REASONS[r].responsible if r in REASONS else '?'})",
            "x": t,
            "y": s["throttled_requests"][r],
            "marker": {"color": REASON_COLOURS.get(r, style.DARK_SLATE)},
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
    return (
        with_range(tenant_fig, usage, "No tenant-caused throttles in this range"),
        with_range(platform_fig, usage, "No platform-caused throttles in this range"),
    )


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


def by_source(usage: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per kind of SOURCES, requests admitted that way and the wt such requests settled, over the range."""
    s = usage["series"]
    return {
        k: {"label": label, "admitted": int(sum(s[f"admitted_{k}"])), "wt": sum(s[f"{k}_wt"])}
        for k, (label, _) in SOURCES.items()
    }


def sources_figure(usage: dict[str, Any], whose: str = "your") -> dict[str, Any]:
    """Requests admitted on borrowed capacity and spilled over, one line each, apart from the own ones;
    `whose` own capacity: "your" on a tenant's pages, "tenants'" on the operator's fleet."""
    s, t = usage["series"], usage["t"]
    fig = {
        "data": [_line(label, t, s[f"admitted_{k}"], colour) for k, (label, colour) in SOURCES.items()],
        "layout": _layout(f"Admitted beyond {whose} own capacity: borrowed and spilled over", "requests"),
    }
    return with_range(fig, usage, "Nothing borrowed or spilled over in this range")


def fleet_figures(series: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Three figures with one line per pool, so pools compare on one axis: accelerator utilisation,
    KV-cache use, and the healthy share of replicas (a zone failure shows as a step down)."""
    panels = {
        "util": ("Accelerator utilisation", "fraction", lambda p: p["util"]),
        "kv": ("KV-cache use", "fraction", lambda p: p["kv"]),
        "healthy": ("Healthy replicas (share of total)", "fraction",
                    lambda p: p["healthy"] / p["total"] if p.get("total") else None),
    }  # fmt: skip
    figs = {}
    for key, (title, unit, value) in panels.items():
        data = [
            _line(slug, [p["t"] for p in points], [value(p) for p in points], style.series_colour(i),
                  line={"color": style.series_colour(i), "shape": "hv" if key == "healthy" else "linear"})
            for i, (slug, points) in enumerate(sorted(series.items()))
        ]  # fmt: skip
        layout = _layout(title, unit, yaxis={"title": {"text": unit}, "range": [0, 1.05]}, height=300)
        layout["legend"] = {"orientation": "v", "font": {"size": 10}}
        figs[key] = {"data": data, "layout": layout}
    return figs


def with_range(fig: dict[str, Any], usage: dict[str, Any], empty_note: str) -> dict[str, Any]:
    """Pin the x axis to the chosen range, and say so plainly when nothing happened in it."""
    t = usage["t"]
    if t:
        fig["layout"]["xaxis"] = {"type": "date", "range": [t[0], t[-1]]}
    if not any(any(v for v in trace.get("y", [])) for trace in fig["data"]):
        fig["layout"]["annotations"] = [
            {"text": empty_note, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5,
             "font": {"size": 13, "color": style.SLATE}}
        ]  # fmt: skip
        fig["layout"]["yaxis"] = {"visible": False}
    return fig


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
