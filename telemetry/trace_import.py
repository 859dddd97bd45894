"""Request traces (CONTRACT §6): import a CSV into a Trace row, read back what a person may see.

Import is all or nothing: `capacity.traces.parse_trace` rejects the whole file with every bad line
listed, and the row is written in one transaction only after the file parsed. The arrays are kept
as compressed .npz bytes (about 8 bytes per request) so sizing can replay arrivals and paired
lengths without re-parsing the CSV.
"""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from django.db import transaction
from django.db.models import Q, QuerySet

from capacity.traces import characterise, parse_trace
from entitlements import roles
from entitlements.models import Tenant
from telemetry.models import Trace


class TraceNotFound(LookupError):
    """No trace with that id is visible to the caller (it may exist for another tenant: say nothing)."""

    def __init__(self, field: str, trace_id: object) -> None:
        super().__init__(f"{field}: no trace {str(trace_id)[:40]!r}")
        self.field = field
        self.message = f"no trace {str(trace_id)[:40]!r}"


@dataclass(frozen=True, eq=False)
class TraceArrays:
    arrival_s: npt.NDArray[np.float64]
    prompt: npt.NDArray[np.int64]
    output: npt.NDArray[np.int64]


def owner_tenant(user: Any) -> Tenant | None:
    """A tenant member's upload belongs to their tenant; platform staff uploads are platform-wide."""
    if roles.is_staff_role(user):
        return None
    return roles.tenant_of(user)


@transaction.atomic
def trace_import(*, data: bytes, name: str, tenant: Tenant | None, uploaded_by: Any = None) -> Trace:
    """Parse, characterise and store one trace. Raises capacity.traces.TraceParseError (nothing stored)."""
    parsed = parse_trace(data)
    stats = characterise(parsed)
    buf = io.BytesIO()
    np.savez_compressed(buf, arrival_s=parsed.arrival_s, prompt=parsed.prompt, output=parsed.output)
    return Trace.objects.create(
        name=name[:200] or "trace",
        tenant=tenant,
        uploaded_by=uploaded_by,
        requests=stats.requests,
        duration_s=stats.duration_s,
        characterisation={**stats.to_dict(), "first_timestamp": parsed.first_timestamp},
        data=buf.getvalue(),
    )


def traces_visible_to(user: Any) -> QuerySet[Trace]:
    """Platform-wide traces for everyone signed in; a tenant's traces for its members and staff."""
    qs = Trace.objects.select_related("tenant").defer("data")
    if roles.is_staff_role(user):
        return qs
    tenant = roles.tenant_of(user)
    if tenant is None:
        return qs.filter(tenant__isnull=True)
    return qs.filter(Q(tenant__isnull=True) | Q(tenant=tenant))


def visible_trace(user: Any, trace_id: object, *, field: str = "trace") -> Trace:
    """The trace if the user may see it, else TraceNotFound naming `field` (same answer whether
    it does not exist or belongs to another tenant)."""
    try:
        key = uuid.UUID(str(trace_id))
    except ValueError:
        raise TraceNotFound(field, trace_id)
    trace = traces_visible_to(user).filter(pk=key).first()
    if trace is None:
        raise TraceNotFound(field, trace_id)
    return trace


def trace_arrays(trace: Trace) -> TraceArrays:
    raw = Trace.objects.filter(pk=trace.pk).values_list("data", flat=True).get()
    with np.load(io.BytesIO(bytes(raw)), allow_pickle=False) as z:
        return TraceArrays(
            arrival_s=z["arrival_s"].astype(np.float64),
            prompt=z["prompt"].astype(np.int64),
            output=z["output"].astype(np.int64),
        )


def trace_summary(trace: Trace) -> dict[str, Any]:
    """id, name, owner and the characterisation (requests, duration_s, mean_rps, peak_rps_1m, prompt, output)."""
    c = dict(trace.characterisation)
    c.pop("first_timestamp", None)
    return {
        "id": str(trace.pk),
        "name": trace.name,
        "tenant": trace.tenant.slug if trace.tenant_id else None,
        "created_at": trace.created_at.isoformat() if trace.created_at else None,
        **c,
    }
