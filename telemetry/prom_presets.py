"""Query presets for a PrometheusSource (issue 24): which PromQL fills which FleetSample field.

`vllm` is the default set (vLLM's `vllm:*` and DCGM's `DCGM_FI_*`). `hyperion` reads the metric names
Hyperion (github.com/BugVanquisher/Hyperion, src/app/main.py) exports, for the scrape job named in the
source's `job` (default "hyperion-app", the job of Hyperion's deploy/monitoring/prometheus/prometheus.yml):
- replicas: `up{job}` (healthy = targets up, total = targets). These are scrape *targets*: Hyperion's
  shipped config scrapes one address (a Service / compose name), so 1/1 says the Service answers, not
  how many replicas stand behind it; list each replica as a target to count replicas;
- throughput: `rate(http_requests_total{path="/v1/llm/chat"}[rate_window])`,
- memory: `gpu_memory_allocated_bytes / gpu_memory_total_bytes`,
- queueing and latency: the means of the `batch_wait_time_seconds` and `model_inference_duration_seconds`
  histograms over the source's rate_window (default 1m) (`_sum` rate / `_count` rate).
Hyperion sets no pool label. A source's `pool_label` either names the label whose value is the pool slug
(series are summed or averaged by it, so one source can feed many pools), or is `=<pool slug>`: every
series of the source is that one pool's (summed over all). A series that names no pool is dropped and
counted on the source (telemetry.prometheus).

`atlas` reads Atlas's four counters by `api_key` for the source's job (default "atlas"); the pull
(telemetry.atlas_pull) maps each key to its owner through the source's atlas_map and stores usage samples.
"""

from __future__ import annotations

import re
from typing import Any

RANGE = re.compile(r"^[0-9]+(ms|s|m|h)$")


def default_queries() -> dict[str, str]:
    """field → PromQL; each result series must carry the pool label. Old vLLM names are OR-ed in."""
    return {
        "requests_running": "sum by (pool) (vllm:num_requests_running)",
        "requests_waiting": "sum by (pool) (vllm:num_requests_waiting)",
        "kv_cache_usage": "avg by (pool) (vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc)",
        "accelerator_util": "avg by (pool) (DCGM_FI_DEV_GPU_UTIL) / 100",
        "replicas_healthy": 'sum by (pool) (up{job=~".*vllm.*"})',
        "replicas_total": 'count by (pool) (up{job=~".*vllm.*"})',
    }


def _mean(metric: str, sel: str, by: str, window: str) -> str:
    return (
        f"sum by ({by}) (rate({metric}_sum{{{sel}}}[{window}]))"
        f" / sum by ({by}) (rate({metric}_count{{{sel}}}[{window}]))"
    )


HYPERION_JOB = "hyperion-app"  # Hyperion's deploy/monitoring/prometheus/prometheus.yml `job_name`
FIXED = "="  # pool_label "=<pool slug>": the source's series all belong to that pool
LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def fixed_pool(pool_label: str) -> str | None:
    """The pool a source names for all its series (pool_label `=<slug>`), None when it names a label."""
    return pool_label[len(FIXED) :].strip() if pool_label.startswith(FIXED) else None


def group_by(pool_label: str) -> str:
    """The `by (...)` of a preset's aggregations: the pool label, or nothing for a fixed pool."""
    fixed = fixed_pool(pool_label)
    if fixed is not None:
        if not fixed:
            raise ValueError("pool_label: '=' must be followed by a pool slug (e.g. =gpu-pool-a)")
        return ""
    if not LABEL.match(pool_label):
        raise ValueError(f"pool_label: {pool_label!r} is neither a label name nor =<pool slug>")
    return pool_label


def job_of(source: Any) -> str:
    """The job a source's preset selects (its own, else the preset's default)."""
    if source.preset == "hyperion":
        return source.job or HYPERION_JOB
    if source.preset == "atlas":
        return source.job or "atlas"
    return source.job


def hyperion_queries(job: str, pool_label: str, window: str = "1m") -> dict[str, str]:
    if not RANGE.match(window):
        raise ValueError(f"rate_window: {window!r} is not a PromQL duration such as 1m or 30s")
    if '"' in job or "\\" in job:
        raise ValueError("job: may not contain quotes or backslashes")
    sel = f'job="{job or HYPERION_JOB}"'
    by = group_by(pool_label)
    return {
        "replicas_healthy": f"sum by ({by}) (up{{{sel}}})",
        "replicas_total": f"count by ({by}) (up{{{sel}}})",
        "throughput_rps": f'sum by ({by}) (rate(http_requests_total{{{sel},path="/v1/llm/chat"}}[{window}]))',
        "accelerator_memory": (
            f"sum by ({by}) (gpu_memory_allocated_bytes{{{sel}}}) / sum by ({by}) (gpu_memory_total_bytes{{{sel}}})"
        ),
        "queue_wait_s": _mean("batch_wait_time_seconds", sel, by, window),
        "latency_s": _mean("model_inference_duration_seconds", sel, by, window),
    }


ATLAS_COUNTERS = {
    "requests": "atlas_requests_total",
    "tokens": "atlas_tokens_used_total",
    "quota_rejections": "atlas_quota_rejections_total",
    "rate_limit_rejections": "atlas_rate_limit_rejections_total",
}


def _selector(job: str, default: str) -> str:
    if '"' in job or "\\" in job:
        raise ValueError("job: may not contain quotes or backslashes")
    return f'job="{job or default}"'


def atlas_queries(job: str, window: str = "1m") -> dict[str, str]:
    """GatewayUsageSample field → per-second rate of its counter, one series per api_key."""
    if not RANGE.match(window):
        raise ValueError(f"rate_window: {window!r} is not a PromQL duration such as 1m or 30s")
    sel = _selector(job, "atlas")
    return {name: f"sum by (api_key) (rate({metric}{{{sel}}}[{window}]))" for name, metric in ATLAS_COUNTERS.items()}


def queries_of(source: Any) -> dict[str, str]:
    """The queries a pull runs for `source`: its preset's, or its own when the preset is custom."""
    if source.preset == "hyperion":
        return hyperion_queries(source.job, source.pool_label, source.rate_window or "1m")
    if source.preset == "atlas":
        return atlas_queries(source.job, source.rate_window or "1m")
    if source.preset == "vllm":
        return default_queries()
    return dict(source.queries)
