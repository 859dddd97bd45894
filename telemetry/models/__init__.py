"""Telemetry: admission events, fleet samples, traces, rollups, Prometheus sources, dead letters and
pool alerts, one module each; every model and constant is imported here (Django finds the models
through this package, and callers import them from `telemetry.models`).
"""

from __future__ import annotations

from telemetry.models.dead_letters import DeadLetter
from telemetry.models.events import AdmissionEvent, Decision, EventKey
from telemetry.models.fleet import FLEET_COLUMNS, FLEET_COUNTS, FLEET_STATE, FleetSample
from telemetry.models.pool_alerts import PoolAlert
from telemetry.models.rollups import (
    ARRIVAL_SLOT_S,
    ARRIVAL_SLOTS,
    E2E_BINS,
    IMPORTED_HELP,
    MIN_REV_BASE,
    OUTPUT_BINS,
    PROMPT_BINS,
    ROLLUP_ADDITIVE,
    ROLLUP_KEY,
    ROLLUP_MAX,
    ROLLUP_OUTCOMES,
    ROLLUP_SOURCE_KINDS,
    ROLLUP_SOURCES,
    ROLLUP_SUMS,
    ROLLUP_VALUES,
    TTFT_BINS,
    WT_BINS,
    DayRollup,
    HourRollup,
    MinuteRollup,
    RollupBacklog,
    RollupBase,
)
from telemetry.models.sources import GatewayUsageSample, PrometheusSource
from telemetry.models.traces import Trace

# default_queries stays importable here: migration 0001 names telemetry.models.default_queries.
from telemetry.prom_presets import default_queries

__all__ = [
    "ARRIVAL_SLOT_S", "ARRIVAL_SLOTS", "WT_BINS", "E2E_BINS", "FLEET_COLUMNS", "FLEET_COUNTS", "FLEET_STATE", "IMPORTED_HELP", "MIN_REV_BASE", "OUTPUT_BINS",
    "PROMPT_BINS", "ROLLUP_ADDITIVE", "ROLLUP_KEY", "ROLLUP_MAX", "ROLLUP_OUTCOMES", "ROLLUP_SOURCE_KINDS",
    "ROLLUP_SOURCES", "ROLLUP_SUMS", "ROLLUP_VALUES", "TTFT_BINS", "AdmissionEvent", "DayRollup", "DeadLetter",
    "Decision", "EventKey", "FleetSample", "GatewayUsageSample", "HourRollup", "MinuteRollup", "PoolAlert",
    "PrometheusSource", "RollupBacklog", "RollupBase", "Trace", "default_queries",
]  # fmt: skip
