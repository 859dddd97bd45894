"""Whose latency miss is it, per request (issue 33, docs/contract.md §8): the envelope each settled request is
judged against, read once per ingest batch, before its rows are summed into the minute rollups.

A served request (not error, cancelled or expired) that reported whether it met its latency SLO is
*inside the envelope* when its prompt and output are within its entitlement's maximum prompt and
output (as the gateway reported them: admission caps a settled length at the envelope's maximum and
says so on the event with `prompt_capped` / `output_capped`, and a capped request ran past it) and it
was not served on borrowed capacity (the promise covers the rate bought; admission admits a request
on its own bucket only while that bucket has room, so what it admits there is within that rate).
Its miss is then the platform's; any other miss is outside the envelope. Per request, not per
minute: a neighbour refused OUTSIDE_ENVELOPE in the same minute says nothing about this one.

The envelope is the named entitlement's; an event that names none (docs/contract.md §6 does not require it)
takes the widest envelope of the unrevoked entitlements of its exact scope, as admission does for a
scope (admission.scope_sums); a request whose scope holds no entitlement had no promise: outside.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from entitlements.models import Entitlement

Scope = tuple[str, str, str, str, str]  # tenant, project, model, region, traffic class
Limits = tuple[int, int]  # max prompt, max output tokens


@dataclass(frozen=True)
class Envelopes:
    by_entitlement: dict[str, Limits] = field(default_factory=dict)
    by_scope: dict[Scope, Limits] = field(default_factory=dict)

    def limits(self, entitlement: str, scope: Scope) -> Limits | None:
        if entitlement:
            return self.by_entitlement.get(entitlement)
        return self.by_scope.get(scope)

    def inside(self, entitlement: str, scope: Scope, prompt: int, output: int, capped: bool, source_kind: str) -> bool:
        lim = self.limits(entitlement, scope)
        return lim is not None and not capped and source_kind != "borrowed" and prompt <= lim[0] and output <= lim[1]


def _uuid(value: Any) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        return None  # the validator names it


def envelopes_for(events: Iterable[Any]) -> Envelopes:
    """The envelopes a batch's settled requests are judged against: at most two queries, before any
    row is written (on PostgreSQL the connection is busy with the COPY while the rollups are summed)."""
    done = [e for e in events if isinstance(e, dict) and e.get("decision") == "complete"]
    if not done:
        return Envelopes()
    named = {u for u in map(_uuid, filter(None, map(dict.get, done, repeat("entitlement")))) if u is not None}
    by_entitlement = {
        str(u): (p, o)
        for u, p, o in Entitlement.objects.filter(uuid__in=named).values_list(
            "uuid", "max_prompt_tokens", "max_output_tokens"
        )
    }
    tenants = {e.get("tenant") for e in done if not e.get("entitlement") and isinstance(e.get("tenant"), str)}
    by_scope: dict[Scope, Limits] = {}
    if tenants:
        rows = Entitlement.objects.filter(tenant__slug__in=tenants, revoked_at__isnull=True).values_list(
            "tenant__slug", "project__slug", "model__slug", "region__slug", "traffic_class_id",
            "max_prompt_tokens", "max_output_tokens",
        )  # fmt: skip
        for tenant, project, model, region, cls, p, o in rows:
            key = (tenant, project or "", model, region, str(cls))
            have = by_scope.get(key, (0, 0))
            by_scope[key] = (max(have[0], p), max(have[1], o))
    return Envelopes(by_entitlement, by_scope)


def envelopes_of_rows(rows: list[dict[str, Any]]) -> Envelopes:
    """envelopes_for over cleaned rows (entitlement as a UUID or None): backfills."""
    return envelopes_for({**r, "entitlement": str(r["entitlement"]) if r.get("entitlement") else ""} for r in rows)
