"""One rule for ordered quantities (p50 ≤ p95 ≤ max, p50 ≤ p95 ≤ p99), whoever checks them.

The entitlement API, the launch request's form and submission, and the sizing input each name
the field their own caller edits (the higher one or the lower one), but say the same thing:
"prompt_p50 (900) must be ≤ prompt_p95 (400)".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Literal


def _show(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def ordering_errors(
    values: Mapping[str, float | None],
    pairs: Iterable[tuple[str, str]],
    *,
    blame: Literal["lower", "higher"] = "lower",
    label: Callable[[str], str] = str,
) -> dict[str, str]:
    """{field: message} for each (lower, higher) pair whose values are both given and out of order;
    the field named is the pair's lower or higher one (`blame`), the first error per field kept.
    `label` says a field as the caller's people read it (e.g. "prompt p50" on a form)."""
    errors: dict[str, str] = {}
    for low, high in pairs:
        a, b = values.get(low), values.get(high)
        if a is None or b is None or a <= b:
            continue
        field = low if blame == "lower" else high
        errors.setdefault(field, f"{label(low)} ({_show(a)}) must be ≤ {label(high)} ({_show(b)})")
    return errors


def spaced(field: str) -> str:
    """A field as a form's reader says it: `prompt_p50` → "prompt p50"."""
    return field.replace("_", " ")
