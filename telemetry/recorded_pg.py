"""PostgreSQL's side of telemetry.recorded: a scope's requests read as one binary COPY, parsed by numpy a
block at a time (no Python object per request), either every request or one lump per grain aggregated
by the server.

Why COPY and why lumps on the server (bench/recorded_replay.py, 10 M events in a 14-day window, load
average 11-13 on 2 shared cores): the read that packed every row on the server (`string_agg(float8send
…)`) took 36 s of a 47 s read + plan; a binary COPY of every row costs the server as much (25-43 s to
send 10 M rows; at 1.8 M rows both read in 4.5 s), while aggregating them into 1 s lumps first sends 0.3 M
rows: read + plan 22.4 s (count(*) alone 2.1-2.5 s). So a scope whose minute rollups say it asked for
more than MAX_EXACT in the window is lumped by the server; below that every request is sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from django.db import connection, transaction

FloatArray = npt.NDArray[np.float64]

_HEADER = 19  # signature (11), flags (4), header extension length (4, zero)
_BLOCK = 8 << 20  # parse the stream 8 MiB at a time
# The server's memory for the lumps' hash table (a 14-day window at 1 s: at most 1.2 M groups); past it
# PostgreSQL spills to disk, so this bounds memory, not correctness.
_WORK_MEM = "64MB"


def _row_dtype(fields: Sequence[tuple[str, str]]) -> np.dtype:
    """A binary COPY row of NOT NULL fixed-size fields: the field count, then (length, value) each."""
    parts: list[tuple[str, str]] = [("nfields", ">i2")]
    for name, kind in fields:
        parts += [(f"len_{name}", ">i4"), (name, kind)]
    return np.dtype(parts)


def copy_rows(sql: str, params: Sequence[Any], fields: Sequence[tuple[str, str]]) -> Iterator[np.ndarray]:
    """`COPY (sql) TO STDOUT (FORMAT BINARY)`, its values bound client-side by psycopg, as structured
    arrays of whole rows. Every field must be NOT NULL (a NULL would shift the fixed layout: checked)."""
    dtype = _row_dtype(fields)
    sizes = {name: np.dtype(kind).itemsize for name, kind in fields}
    buf = bytearray()
    skip = _HEADER
    statement = f"COPY ({sql}) TO STDOUT (FORMAT BINARY)"
    with connection.cursor() as wrapper, wrapper.cursor.copy(statement, list(params)) as copy:
        for block in copy:
            buf += block
            if skip and len(buf) >= skip:
                del buf[:skip]
                skip = 0
            if len(buf) >= _BLOCK:
                yield _parse(buf, dtype, sizes)
    if len(buf) > 2:  # the trailer is a field count of -1
        yield _parse(buf, dtype, sizes)


def _parse(buf: bytearray, dtype: np.dtype, sizes: dict[str, int]) -> np.ndarray:
    """The whole rows at the head of `buf` (removed from it)."""
    n = len(buf) // dtype.itemsize
    rows = np.frombuffer(bytes(buf[: n * dtype.itemsize]), dtype=dtype)
    del buf[: n * dtype.itemsize]
    if len(rows) and not (
        (rows["nfields"] == len(sizes)).all() and all((rows[f"len_{k}"] == v).all() for k, v in sizes.items())
    ):
        raise ValueError("unexpected row layout in a binary COPY of recorded requests")
    return rows


_EACH = (
    "SELECT date_part('epoch', s.ts) - %s::float8, COALESCE(s.estimated_wt, 0)::float8, s.decision = 'throttle' "
    "FROM ({inner}) AS s(ts, estimated_wt, decision)"
)


def each_request(qs: Any, origin: float) -> Iterator[tuple[FloatArray, FloatArray, int]]:
    """Every request of the ORM query `qs` (ts, estimated_wt, decision): (arrival from `origin`, cost,
    throttles) a block at a time."""
    sql, params = qs.query.sql_with_params()
    fields = (("t", ">f8"), ("c", ">f8"), ("thr", "u1"))
    for rows in copy_rows(_EACH.format(inner=sql), [origin, *params], fields):
        yield rows["t"].astype(np.float64), rows["c"].astype(np.float64), int(rows["thr"].sum())


_LUMPS = (
    "SELECT min(e), sum(c), count(*) FILTER (WHERE thr), count(*) FROM ("
    "SELECT date_part('epoch', s.ts) - %s::float8 AS e, COALESCE(s.estimated_wt, 0)::float8 AS c, "
    "s.decision = 'throttle' AS thr FROM ({inner}) AS s(ts, estimated_wt, decision)"
    ") AS r GROUP BY floor(e / %s::float8)"
)


def lumps(qs: Any, origin: float, grain: float) -> tuple[FloatArray, FloatArray, int, int]:
    """The requests of `qs` aggregated by the server into one lump per `grain` seconds: (each lump's
    first arrival, summed cost; sorted by time), requests, throttles."""
    sql, params = qs.query.sql_with_params()
    fields = (("t", ">f8"), ("c", ">f8"), ("thr", ">i8"), ("n", ">i8"))
    t_all, c_all, requests, throttled = [], [], 0, 0
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute(f"SET LOCAL work_mem = '{_WORK_MEM}'")
        for rows in copy_rows(_LUMPS.format(inner=sql), [origin, *params, grain], fields):
            t_all.append(rows["t"].astype(np.float64))
            c_all.append(rows["c"].astype(np.float64))
            requests += int(rows["n"].sum())
            throttled += int(rows["thr"].sum())
    if not t_all:
        return np.zeros(0), np.zeros(0), 0, 0
    t, c = np.concatenate(t_all), np.concatenate(c_all)
    order = np.argsort(t, kind="stable")
    return t[order], c[order], requests, throttled
