"""Text for people, not machines (issue 28.8, docs/pages.md): loaded into every template (settings
TEMPLATES builtins), so no page needs a `{% load %}` for it.

- `when`: the one date format, `2026-12-01 14:05 UTC` (a date alone: `2026-12-01`); takes a datetime,
  a date or an ISO string.
- `words`: a stored key in words (`partially_approved` → `partially approved`).
- `reason_meaning`: a reason code's one-line meaning, from entitlements.reasons (the registry).
- `evidence_rows`: a finding's evidence or recommendation as (label, value) rows, in words, numbers
  formatted, nested figures flattened one level.
- `forecast_words`: forecast method keys and "MASE" in words, inside any text (`ets_damped` → `exponential
  smoothing, damped trend`), from forecasting.candidates.METHOD_WORDS.
- `code_keys`: API field names inside a sentence marked as <code> (the calculator mirrors the sizing API).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from entitlements.reasons import REASONS

register = template.Library()

SNAKE = re.compile(r"(?<![\w./-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w/-])")
# Labels a plain underscore-to-space would get wrong or leave unclear.
LABELS = {
    "cu": "CU",
    "bought_cu": "CU bought",
    "p95_hourly_use_share": "busiest 5 % of hours: share of what was bought used",
    "peak_hourly_use_share": "busiest hour: share of what was bought used",
    "p95_hourly_use_cu": "busiest 5 % of hours: CU used",
    "p95_hourly_demand_cu": "busiest 5 % of hours: CU asked for",
    "hours": "hours read",
    "threshold": "threshold",
    "target_utilisation": "target utilisation",
    "tenant_throttles": "requests refused for quota, concurrency or budget",
    "tenant_throttle_share": "share of arrivals refused for quota, concurrency or budget",
    "attempted": "requests attempted",
    "borrow_days": "days it borrowed",
    "days": "days read",
    "launch_request": "needs a launch request",
    "traffic_class": "traffic class",
    "share_outside": "share of requests outside the envelope",
    "outside": "requests outside the envelope",
    "outside_share": "share outside the envelope",
    "concurrency_limit_throttles": "requests refused at the concurrency cap",
    "refused_prompt_max": "longest refused prompt",
    "concurrency_peak": "peak in flight",
    "max_concurrency": "concurrency cap",
    "max_prompt_tokens": "prompt tokens max",
    "max_output_tokens": "output tokens max",
    "prompt_max": "prompt tokens max",
    "output_max": "output tokens max",
    "arrival_rate_rps": "arrival rate (req/s)",
    "capacity_units": "CU",
    "ttft_p99_s": "TTFT p99 (s)",
    "tpot_p99_s": "TPOT p99 (s)",
    "ttft_p99_ms": "TTFT p99 (ms)",
    "tpot_p99_ms": "TPOT p99 (ms)",
}
_WORDS = {"cu": "CU", "wt": "weighted tokens", "ttft": "TTFT", "tpot": "TPOT", "rps": "req/s", "kv": "KV"}
_SHARES = ("share", "threshold", "utilisation", "target_utilisation")


_ISO_SHAPE = re.compile(r"\d{4}-\d\d-\d\d")


def _iso(text: str) -> bool:
    # fromisoformat alone also takes "20261130" and "2026-W48": only a date-shaped key is a time here.
    if not _ISO_SHAPE.match(text):
        return False
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def label(key: Any) -> str:
    k = str(key)
    if _iso(k):  # evidence keyed by hour (a pool in review's hours) reads as a time
        return when(k)
    return LABELS.get(k) or " ".join(_WORDS.get(p, p) for p in k.split("_"))


def _forecast_pattern() -> re.Pattern[str]:
    from forecasting.candidates import METHOD_WORDS

    return re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, METHOD_WORDS)) + r")(?![\w-])")


@register.filter
def forecast_words(value: Any) -> str:
    from forecasting.candidates import METHOD_WORDS

    text = "" if value is None else str(value)
    return _forecast_pattern().sub(lambda m: METHOD_WORDS[m.group(1)], text)


@register.filter
def words(value: Any) -> str:
    """`partially_approved` → `partially approved`; anything else unchanged."""
    return label(value) if isinstance(value, str) and SNAKE.fullmatch(value) else ("" if value is None else str(value))


@register.filter
def when(value: Any) -> str:
    if value in (None, ""):
        return ""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if isinstance(value, datetime):
        t = value if value.tzinfo else value.replace(tzinfo=UTC)
        return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


@register.filter
def reason_meaning(code: Any) -> str:
    r = REASONS.get(str(code))
    return r.when if r else ""


def number(value: float | int, key: str = "") -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if any(key == s or key.endswith("_" + s) for s in _SHARES) and abs(value) <= 10:
        return f"{value * 100:,.1f} %"
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:,.4f}".rstrip("0").rstrip(".") if value else "0"


def _value(value: Any, key: str, depth: int = 0) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool | int | float):
        return number(value, key)
    if isinstance(value, dict):
        if depth:
            return "…"
        return "; ".join(f"{label(k)} {_value(v, str(k), depth + 1)}" for k, v in value.items()) or "—"
    if isinstance(value, list | tuple):
        return ", ".join(_value(v, key, depth + 1) for v in value) or "—"
    text = str(value)
    return when(text) if _iso(text) else words(text)


@register.filter
def evidence_rows(figures: Any, prefix: str = "") -> list[tuple[str, str]]:
    if not isinstance(figures, dict):
        return []
    head = f"{prefix} " if prefix else ""
    return [(head + label(k), _value(v, str(k))) for k, v in figures.items()]


@register.filter(needs_autoescape=True)
def code_keys(text: Any, autoescape: bool = True) -> SafeString:
    """Escape the text, then mark each snake_case name in it as code."""
    escaped = str(conditional_escape(text)) if autoescape else str(text)
    return mark_safe(SNAKE.sub(lambda m: f"<code>{m.group(1)}</code>", escaped))  # noqa: S308 - escaped above


@register.simple_tag
def reason(code: Any) -> SafeString:
    """A reason code with its one-line meaning beside it."""
    meaning = reason_meaning(code)
    if not meaning:
        return format_html("<code>{}</code>", code)
    return format_html('<code>{}</code> <small class="reason-meaning">{}</small>', code, meaning)


_LONG_INT = re.compile(r"(?<![\w.,])\d{5,}(?![\d,])")


@register.filter
def digits(text: Any) -> str:
    """Thousands separators in the long integers of a sentence built elsewhere (a formula's working)."""
    return _LONG_INT.sub(lambda m: f"{int(m.group(0)):,}", "" if text is None else str(text))
