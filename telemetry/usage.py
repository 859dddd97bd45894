"""Usage evidence, read one way (issue 34.1): an entitlement's scope, the hour/minute split of a period,
and rollup sums by field and step. The statement, budgets, live series, alert rules, reconciliation, the
usage meters and the demo all read the rollups through here.

- `scope(ent)`: an entitlement's events are its own, plus the unattributed events of its exact scope
  (e.g. platform throttles, which no entitlement is named on); `Scopes` answers the same for many
  entitlements read at once.
- `pieces(start, end)`: hour rollups for the whole hours of a period, minute rollups for its ragged
  edges, so a read is bounded by the period's length, not by traffic.
- `sums(...)` / `period_sums(...)`: one grouped read of the rollups of one level, or of a period split as
  above; fields are named once here (`FIELDS`), so every reader sums the same columns under the same
  names.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db.models import DateTimeField, F, IntegerField, Max, Q, Sum, Value
from django.db.models.functions import Cast

from entitlements.bought import when
from entitlements.models import Entitlement
from telemetry.models import DayRollup, HourRollup, MinuteRollup

HOUR = timedelta(hours=1)
ROLLUPS: dict[str, Any] = {"minute": MinuteRollup, "hour": HourRollup, "day": DayRollup}

# The summed columns under their one name each; any other rollup column (histogram bins, outcomes)
# is summed under its own name.
FIELDS = {
    "n": "requests",
    "est": "estimated_wt",
    "act": "actual_wt",
    "prompt": "prompt_tokens",
    "out": "output_tokens",
    "slo": "slo_met",
    "slo_n": "slo_total",
}

# The columns that say which scope a rollup row is of (Scopes.owners reads them).
SCOPE_COLUMNS = ("entitlement", "tenant", "project", "model", "region", "traffic_class")

Key = tuple[str, str, str, str, str]  # (tenant, project, model, region, traffic class)
WindowSums = dict[Hashable, dict[int, dict[str, dict[str, float]]]]  # label → pk → decision → field → sum
MinuteSums = dict[Hashable, dict[int, dict[datetime, float]]]  # label → pk → minute → settled wt


def scope_key(ent: Entitlement) -> Key:
    """The exact scope whose unattributed rows count for the entitlement."""
    project = ent.project.slug if ent.project is not None else ""
    return (ent.tenant.slug, project, ent.model.slug, ent.region.slug, ent.traffic_class_id)


def scope(ent: Entitlement) -> Q:
    """Its own events, plus unattributed events of its exact scope (e.g. platform throttles)."""
    tenant, project, model, region, traffic_class = scope_key(ent)
    return Q(entitlement=str(ent.uuid)) | Q(
        entitlement="", tenant=tenant, project=project, model=model, region=region, traffic_class=traffic_class
    )


def own(ent: Entitlement) -> Q:
    """Only the events the entitlement is named on (no unattributed ones)."""
    return Q(entitlement=str(ent.uuid))


class Scopes:
    """`scope` for many entitlements at once: one filter that covers them all (`q`), and which of them a
    row grouped by SCOPE_COLUMNS counts for (`owners`: its own entitlement, or every entitlement of the
    exact scope of an unattributed row)."""

    def __init__(self, ents: Iterable[Entitlement]) -> None:
        ents = list(ents)
        self.by_uuid = {str(e.uuid): e.pk for e in ents}
        self.by_key: dict[Key, list[int]] = defaultdict(list)
        for e in ents:
            self.by_key[scope_key(e)].append(e.pk)
        self.q = Q(entitlement__in=list(self.by_uuid)) | Q(entitlement="", tenant__in={e.tenant.slug for e in ents})

    def owners(self, row: dict[str, Any]) -> list[int]:
        if row["entitlement"]:
            pk = self.by_uuid.get(row["entitlement"])
            return [pk] if pk is not None else []
        return self.by_key.get((row["tenant"], row["project"], row["model"], row["region"], row["traffic_class"]), [])

    def read(
        self,
        windows: dict[Hashable, tuple[datetime, datetime]],
        minutes: dict[Hashable, tuple[datetime, datetime]],
        *,
        fields: Sequence[str],
        decisions: Sequence[str],
    ) -> tuple[WindowSums, MinuteSums]:
        """Every window's sums for every entitlement, in ONE grouped query (a UNION ALL of one grouped
        read per rollup piece):

        - `windows`: label → period; per label, pk → decision → field → sum over the period's hour and
          minute pieces (`pieces`), for the `decisions`;
        - `minutes`: label → period; per label, pk → minute → settled wt ("act"), minutes with none
          left out.

        Each piece is grouped by SCOPE_COLUMNS as `period_sums` groups one entitlement's, and the rows
        are added up per owner in piece order, so a window's figure is the one `period_sums(scope(ent),
        …)` gives."""
        labels: list[tuple[str, Hashable]] = []
        branches: list[Any] = []
        for label, (start, end) in windows.items():
            for model, a, b in pieces(start, end):
                piece = self._branch(model, a, b, len(labels), len(branches), False, fields, decision__in=decisions)
                branches.append(piece)
            labels.append(("window", label))
        for label, (start, end) in minutes.items():
            n = len(branches)
            branches.append(self._branch(MinuteRollup, start, end, len(labels), n, True, fields, decision="complete"))
            labels.append(("minute", label))
        by_window: WindowSums = {
            label: defaultdict(lambda: defaultdict(lambda: defaultdict(float))) for label in windows
        }
        per_minute: dict[Hashable, dict[int, dict[datetime, float]]] = {
            label: defaultdict(lambda: defaultdict(float)) for label in minutes
        }
        rows = list(branches[0].union(*branches[1:], all=True)) if branches else []
        # UNION ALL keeps each branch's rows together in branch order, but SQL promises no order: sort
        # by branch so every window adds its pieces up early edge, whole hours, late edge.
        rows.sort(key=lambda r: r["branch"])
        for r in rows:
            kind, label = labels[r["w"]]
            for pk in self.owners(r):
                if kind == "window":
                    acc = by_window[label][pk][r["decision"]]
                    for f in fields:
                        acc[f] += r[f] or 0
                else:
                    per_minute[label][pk][when(r["t"])] += float(r["act"] or 0)  # type: ignore[index]  # never NULL here
        got_minutes: MinuteSums = {
            label: {pk: {t: wt for t, wt in m.items() if wt} for pk, m in by_pk.items()}
            for label, by_pk in per_minute.items()
        }
        return by_window, got_minutes

    def _branch(
        self,
        model: Any,
        a: datetime,
        b: datetime,
        w: int,
        n: int,
        by_minute: bool,
        fields: Sequence[str],
        **filters: Any,
    ) -> Any:
        """Piece n of the union: its rows for window w, grouped by scope and decision (and, for a minute
        window, by minute: `t`, which is NULL on window rows)."""
        return (
            model.objects.filter(self.q, bucket__gte=a, bucket__lt=b, **filters)
            .annotate(
                w=Value(w, output_field=IntegerField()),
                branch=Value(n, output_field=IntegerField()),
                t=F("bucket") if by_minute else Cast(Value(None), DateTimeField()),
            )
            .values(*SCOPE_COLUMNS, "decision", "w", "branch", "t")
            .annotate(**{f: Sum(FIELDS.get(f, f)) for f in fields})
            .order_by()
        )


def pieces(start: datetime, end: datetime) -> list[tuple[Any, datetime, datetime]]:
    """Hour rollups for the whole hours inside [start, end), minute rollups for the edges; empty pieces
    are left out."""
    first = start.replace(minute=0, second=0, microsecond=0)
    first = first if first == start else first + HOUR
    last = end.replace(minute=0, second=0, microsecond=0)
    split: list[tuple[Any, datetime, datetime]]
    if last <= first:
        split = [(MinuteRollup, start, end)]
    else:
        split = [(MinuteRollup, start, first), (HourRollup, first, last), (MinuteRollup, last, end)]
    return [(model, a, b) for model, a, b in split if b > a]


def sums(
    level: str | Any,
    where: Q,
    start: datetime,
    end: datetime,
    *,
    by: Sequence[str],
    fields: Sequence[str] = (),
    maxima: Sequence[str] = (),
    **filters: Any,
) -> list[dict[str, Any]]:
    """Rollup rows of one level ("minute" | "hour" | "day", or the model) in [start, end), matching
    `where` and `filters`, grouped by `by`: each field summed (FIELDS names, or a column's own name) and
    each of `maxima` its largest value. With `by` empty, one row of totals."""
    model = ROLLUPS[level] if isinstance(level, str) else level
    named = {f: Sum(FIELDS.get(f, f)) for f in fields} | {f: Max(f) for f in maxima}
    qs = model.objects.filter(where, bucket__gte=start, bucket__lt=end, **filters)
    if not by:
        return [qs.aggregate(**named)]
    return list(qs.values(*by).annotate(**named).order_by())


def period_sums(where: Q, start: datetime, end: datetime, **how: Any) -> list[dict[str, Any]]:
    """`sums` (`how`: its by, fields, maxima and filters) over a period split into hour and minute
    rollups (`pieces`): the rows of every piece in order (early edge, whole hours, late edge); the caller
    adds them up by its own key."""
    rows: list[dict[str, Any]] = []
    for model, a, b in pieces(start, end):
        rows += sums(model, where, a, b, **how)
    return rows


def step_of(bucket: datetime, start: datetime, step_s: int) -> int:
    """Which step of `step_s` seconds from `start` a bucket falls in."""
    return int((bucket - start).total_seconds() // step_s)


def ratio(a: float, b: float) -> float | None:
    """a ÷ b to 6 places (a used ÷ bought share, an attainment); None when b is 0."""
    return round(a / b, 6) if b else None
