"""The column-wise fast paths give exactly what the row-by-row reference gives, or step aside."""

from __future__ import annotations

import math
import uuid
from bisect import bisect_right
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telemetry.columns import clean_columns, rows_to_columns
from telemetry.envelopes import Envelopes
from telemetry.histogram import EDGES_MS, N_BINS
from telemetry.models import MIN_REV_BASE, ROLLUP_ADDITIVE, ROLLUP_VALUES
from telemetry.rollups import minute_deltas
from telemetry.validation import Catalogue, FieldError, clean_event
from tests.telemetry.helpers import T0, event

CAT = Catalogue(
    tenants=frozenset({"acme", "globex"}),
    models=frozenset({"llama-test"}),
    regions=frozenset({"us-test"}),
    classes=frozenset({"reserved", "shared", "best_effort"}),
    projects=frozenset({("acme", "chat")}),
    earliest=T0 - timedelta(days=1),
    latest=T0 + timedelta(days=1),
)
ENT = str(uuid.UUID(int=7))


ODD = st.one_of(
    st.none(), st.booleans(), st.just(""), st.just([1]), st.just({}), st.just("x"), st.just(-1), st.just(2.5),
    st.just(3.0), st.just(math.inf), st.just(math.nan), st.just("z" * 161), st.just("2026-01-05T12:00:00"),
    st.just("initech"), st.just("not-a-uuid"), st.just("NOPE"), st.just(10**400), st.just(10**9 + 1), st.just(2**63),
    st.just(1e12 + 1), st.just(86_400_001.0),
    # control characters: a NUL, a newline, DEL, a C1 code, and a UUID that UUID() would take with a tab
    st.just("ac\x00me"), st.just("a\nb"), st.just("del\x7f"), st.just("c1\x85"), st.just("\t" + "0" * 31),
)  # fmt: skip
NUM = st.one_of(st.integers(0, 10**6), st.floats(0, 1e6, allow_nan=False))
_DAY = T0.date().isoformat()
TS = st.sampled_from(
    [
        f"{_DAY}T12:00:01+00:00",
        f"{_DAY}T12:00:59.999999Z",
        f"{_DAY}T13:30:00+05:30",
        f"{_DAY}T23:59:59-08:00",
        # outside CAT's window, or outside the calendar once in UTC
        (T0 - timedelta(days=1, microseconds=1)).isoformat(),
        (T0 + timedelta(days=1, microseconds=1)).isoformat(),
        "9999-12-31T23:59:59Z",
        "9999-12-31T23:59:59-01:00",
        "0001-01-01T00:00:00Z",
        "0001-01-01T00:00:00+01:00",
    ]
)
OPTIONAL = {
    "project": st.sampled_from(["", "chat", None]),
    "entitlement": st.sampled_from([None, "", ENT, uuid.UUID(ENT)]),
    "source_kind": st.sampled_from(["", "entitlement", "borrowed", None]),
    "actual_wt": st.one_of(st.none(), NUM),
    "cached_prompt_tokens": st.integers(0, 3),
    "output_tokens": st.one_of(st.none(), st.integers(0, 900)),
    "ttft_ms": st.one_of(st.none(), NUM),
    "e2e_ms": st.one_of(st.none(), NUM),
    "slo_met": st.sampled_from([None, True, False]),
    "status": st.sampled_from(["", "ok", "cancelled", None]),
    "prompt_capped": st.sampled_from([None, True, False]),
    "output_capped": st.sampled_from([None, True, False]),
}


@st.composite
def an_event(draw):
    """A valid event (every optional field present or not), then, one time in three, one field spoiled."""
    decision = draw(st.sampled_from(["admit", "throttle", "complete"]))
    e = {
        "event_id": draw(st.sampled_from(["a", "b", "c", "d", "e"])),
        "ts": draw(TS),
        "tenant": "acme" if draw(st.booleans()) else "globex",
        "model": "llama-test",
        "region": "us-test",
        "traffic_class": draw(st.sampled_from(["reserved", "shared", "best_effort"])),
        "decision": decision,
    }
    if decision == "throttle":
        e["reason"] = draw(st.sampled_from(["QUOTA_EXCEEDED", "PLATFORM_CAPACITY"]))
    if decision != "complete" or draw(st.booleans()):
        e["estimated_wt"] = draw(NUM)
        e["prompt_tokens"] = draw(st.integers(3, 5000))
    for k, values in OPTIONAL.items():
        if draw(st.booleans()):
            e[k] = draw(values)
    if e.get("project") == "chat":
        e["tenant"] = "acme"
    if draw(st.integers(0, 2)) == 0:
        k = draw(st.sampled_from(sorted({*e, *OPTIONAL, "reason"})))
        if draw(st.booleans()):
            e.pop(k, None)
        else:
            e[k] = draw(ODD)
    return e


EVENT = an_event()


def reference(events):
    rows = []
    for e in events:
        try:
            rows.append(clean_event(e, CAT))
        except FieldError:
            return None
    return rows_to_columns(rows)


def same(a, b):
    """Equal, with NaN-free floats compared exactly and datetimes by instant and zone."""
    assert a.keys() == b.keys()
    for k in a:
        assert a[k] == b[k], k
        assert [type(v) for v in a[k]] == [type(v) for v in b[k]], k
    assert all(t.tzinfo is UTC for t in a["ts"])


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(EVENT, EVENT, EVENT, st.just("not a dict")), min_size=1, max_size=6))
def test_fast_path_matches_the_row_validator_or_steps_aside(events):
    fast = clean_columns(events, CAT)
    ref = reference(events)
    if fast is not None:
        assert ref is not None, "the fast path accepted a batch the row validator rejects"
        same(fast, ref)


def _valid(n: int) -> dict:
    e = event(n, tenant="acme", project="chat", entitlement=ENT)
    if n % 3 == 1:
        e.update(decision="throttle", reason="QUOTA_EXCEEDED")
    if n % 3 == 2:
        e.update(decision="complete", actual_wt=80.5, output_tokens=7, ttft_ms=120, e2e_ms=900.0, slo_met=True)
        del e["prompt_tokens"], e["estimated_wt"]
    return e


def test_an_ordinary_batch_takes_the_fast_path():
    events = [_valid(n) for n in range(300)]
    fast = clean_columns(events, CAT)
    assert fast is not None
    same(fast, reference(events))


def test_one_bad_event_sends_the_batch_to_the_row_validator():
    events = [_valid(n) for n in range(10)]
    events[4]["prompt_tokens"] = -1
    assert clean_columns(events, CAT) is None


def _reference_deltas(rows, envelopes=None):
    """The row-by-row rollup arithmetic the column version replaced, and the per-request outcomes."""
    out = {}
    t0, e0 = ROLLUP_ADDITIVE.index("ttft_b00"), ROLLUP_ADDITIVE.index("e2e_b00")
    p0, o0, w = ROLLUP_ADDITIVE.index("plen_b00"), ROLLUP_ADDITIVE.index("olen_b00"), len(ROLLUP_ADDITIVE)
    s0 = ROLLUP_ADDITIVE.index("slo_inside_met")
    k0 = ROLLUP_ADDITIVE.index("borrowed_requests")
    a0, wt0 = ROLLUP_ADDITIVE.index("arr_s00"), ROLLUP_ADDITIVE.index("wt_b00")
    for r in rows:
        ent = r["entitlement"]
        key = (r["ts"].replace(second=0, microsecond=0), r["tenant"], r["project"], r["model"], r["region"],
               r["traffic_class"], str(ent) if ent else "", r["decision"], r["reason"], r.get("served_from") or "")  # fmt: skip
        acc = out.setdefault(key, [0, 0.0, 0.0] + [0] * (len(ROLLUP_VALUES) - 3))
        acc[0] += 1
        acc[1] += r["estimated_wt"]
        acc[2] += r["actual_wt"] or 0.0
        acc[3] += r["prompt_tokens"]
        acc[4] += r["cached_prompt_tokens"]
        acc[5] += r["output_tokens"]
        served = r["decision"] == "complete" and r["status"] not in ("error", "cancelled", "expired")
        if served and r["slo_met"] is not None:
            acc[6] += 1 if r["slo_met"] else 0
            acc[7] += 1
            if envelopes is not None:
                lim = envelopes.limits(key[6], key[1:6])
                inside = (
                    lim is not None and not r.get("capped") and r["source_kind"] != "borrowed"
                    and r["prompt_tokens"] <= lim[0] and r["output_tokens"] <= lim[1]
                )  # fmt: skip
                acc[s0 + (0 if inside else 2) + (0 if r["slo_met"] else 1)] += 1
        if r["decision"] == "complete" and r["status"] in ("error", "cancelled", "expired"):
            acc[s0 + 4 + ("error", "cancelled", "expired").index(r["status"])] += 1
        if r["source_kind"] in ("borrowed", "spillover"):
            at = k0 + (0 if r["source_kind"] == "borrowed" else 2)
            acc[at] += 1
            acc[at + 1] += r["actual_wt"] or 0.0
        if r["ttft_ms"] is not None:
            acc[t0 + bisect_right(EDGES_MS, r["ttft_ms"])] += 1
        if r["e2e_ms"] is not None:
            acc[e0 + bisect_right(EDGES_MS, r["e2e_ms"])] += 1
        acc[p0 + bisect_right(EDGES_MS, r["prompt_tokens"])] += 1
        acc[o0 + bisect_right(EDGES_MS, r["output_tokens"])] += 1
        # issue 45: the 3 s slot of the minute it arrived in, and its estimated wt's bin
        acc[a0 + r["ts"].second // 3] += 1
        acc[wt0 + bisect_right(EDGES_MS, r["estimated_wt"])] += 1
        acc[w] = max(acc[w], r["prompt_tokens"])
        acc[w + 1] = max(acc[w + 1], r["output_tokens"])
        acc[w + 2] = max(acc[w + 2], r.get("in_flight") or 0)
        acc[w + 3] = max(acc[w + 3], MIN_REV_BASE - r["prompt_tokens"])
        acc[w + 4] = max(acc[w + 4], MIN_REV_BASE - r["output_tokens"])
    return out


@settings(max_examples=150)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3 * 86400 * 1_000_000),
            st.sampled_from(["acme", "globex"]),
            st.sampled_from(["admit", "throttle", "complete"]),
            st.integers(0, 5000),
            st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0, *EDGES_MS[:5], 999.9, 1e6 + 1])),
            st.sampled_from([None, True, False]),
            st.sampled_from(["", "ok", "error", "cancelled", "expired"]),
            st.booleans(),
            st.sampled_from(["", "entitlement", "borrowed", "spillover"]),
        ),
        min_size=1,
        max_size=60,
    ),
    st.booleans(),
)
def test_minute_deltas_match_row_by_row_sums(specs, judged):
    # entitlement 1 allows 2,000-token prompts and 400-token outputs, acme's unattributed scope 1,000 and
    # 100; entitlement 2 and globex's scope hold none: no promise, every miss outside
    envelopes = (
        Envelopes({str(uuid.UUID(int=1)): (2000, 400)}, {("acme", "", "m", "r", "shared"): (1000, 100)})
        if judged
        else None
    )
    rows = []
    for us, tenant, decision, tokens, ms, slo, status, capped, kind in specs:
        rows.append({
            "event_id": str(len(rows)), "ts": T0 + timedelta(microseconds=us), "tenant": tenant, "project": "",
            "model": "m", "region": "r", "traffic_class": "shared", "entitlement": uuid.UUID(int=us % 3) if us % 2 else None,
            "decision": decision, "reason": "QUOTA_EXCEEDED" if decision == "throttle" else "",
            "source_kind": kind, "estimated_wt": float(tokens), "actual_wt": float(tokens // 2) if slo else None,
            "prompt_tokens": tokens, "cached_prompt_tokens": tokens // 3, "output_tokens": tokens // 5,
            "ttft_ms": ms, "e2e_ms": None if ms is None else ms * 10, "slo_met": slo, "status": status,
            "in_flight": tokens % 7 if decision == "admit" else None, "capped": capped,
        })  # fmt: skip
    got = minute_deltas(rows_to_columns(rows), envelopes)
    want = _reference_deltas(rows, envelopes)
    assert got == want
    wts = (1, 2, ROLLUP_ADDITIVE.index("borrowed_wt"), ROLLUP_ADDITIVE.index("spilled_wt"))
    assert all(type(v) is int for vals in got.values() for i, v in enumerate(vals) if i not in wts)
    assert all(k[0].tzinfo is not None and k[0] == datetime.fromtimestamp(k[0].timestamp(), UTC) for k in got)
    assert sum(len(v) for v in got.values()) == len(got) * (8 + 4 * N_BINS + 7 + 20 + N_BINS + 4 + 5)
