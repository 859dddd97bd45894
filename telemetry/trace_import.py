"""Request traces (docs/contract.md §6): import a CSV into a Trace row (reads: telemetry.selectors).

Import is all or nothing: `capacity.traces.parse_trace` rejects the whole file with every bad line
listed, and the row is written in one transaction only after the file parsed. The arrays are kept
as compressed .npz bytes (about 8 bytes per request) so sizing can replay arrivals and paired
lengths without re-parsing the CSV.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable
from typing import Any

import numpy as np
from django.db import transaction

from capacity.traces import characterise, parse_trace_stream
from entitlements import roles
from entitlements.models import Tenant
from telemetry.models import Trace


def owner_tenant(user: Any) -> Tenant | None:
    """A tenant member's upload belongs to their tenant; platform staff uploads are platform-wide."""
    if roles.is_staff_role(user):
        return None
    return roles.tenant_of(user)


@transaction.atomic
def trace_import(*, data: bytes | Iterable[bytes], name: str, tenant: Tenant | None, uploaded_by: Any = None) -> Trace:
    """Parse, characterise and store one trace. Raises capacity.traces.TraceParseError (nothing stored).

    `data`: the file's bytes, or its chunks (`upload.chunks()`): an upload is parsed as it is read, so
    a request holds about 1 MiB of CSV at a time, not the file (docs/input-limits.md)."""
    parsed = parse_trace_stream([data] if isinstance(data, bytes | bytearray) else data)
    stats = characterise(parsed)
    data_npz = npz(arrival_s=parsed.arrival_s, prompt=parsed.prompt, output=parsed.output)
    return Trace.objects.create(
        name=name[:200] or "trace",
        tenant=tenant,
        uploaded_by=uploaded_by,
        requests=stats.requests,
        duration_s=stats.duration_s,
        characterisation={**stats.to_dict(), "first_timestamp": parsed.first_timestamp},
        data=data_npz,
    )


def npz(**arrays: np.ndarray) -> bytes:
    """The arrays as .npz bytes (np.load reads them) at zlib level 1: numpy's savez_compressed uses
    level 6, which spent 2.5 CPU-s of a 64 MB upload's request for 3 % smaller bytes (docs/input-limits.md)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, array in arrays.items():
            with z.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(array))
    return buf.getvalue()


def trace_summary(trace: Trace) -> dict[str, Any]:
    """id, name, owner and the characterisation (requests, duration_s, mean_rps, peak_rps_1m, prompt, output)."""
    c = dict(trace.characterisation)
    c.pop("first_timestamp", None)
    return {
        "id": str(trace.pk),
        "name": trace.name,
        "tenant": trace.tenant.slug if trace.tenant is not None else None,
        "created_at": trace.created_at.isoformat() if trace.created_at else None,
        **c,
    }
