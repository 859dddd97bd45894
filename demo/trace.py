"""The demo ships the Azure LLM inference conversation trace (2023) imported as a platform-wide trace, so
the sizing calculator's trace mode has one to choose from the first time anyone opens it (issue 22)."""

from __future__ import annotations

from django.conf import settings

from telemetry.models import Trace
from telemetry.trace_import import trace_import

NAME = "Azure LLM inference 2023, conversation"


def load_demo_trace() -> str:
    """Import it once (platform-wide); a second run changes nothing. Returns a summary line."""
    existing = Trace.objects.filter(name=NAME, tenant__isnull=True).first()
    if existing is not None:
        return f"trace: {NAME!r} already imported ({existing.requests:,} requests)"
    path = settings.DATA_DIR / "azure_llm_2023_conv.csv"
    if not path.exists():
        return f"trace: {path} not found, none imported"
    trace = trace_import(data=path.read_bytes(), name=NAME, tenant=None)
    return f"trace: {NAME!r} imported ({trace.requests:,} requests)"
