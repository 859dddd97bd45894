"""Read the published operating points (`data/operating_points.csv`) into plain rows.

Reading is kept apart from writing (`demo.fleet` upserts the rows) so the parsing rules can
be tested without a database. Rows whose model or accelerator cannot be named unambiguously, or
that publish no throughput, are skipped and reported, never guessed.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings


def default_path() -> Path:
    return Path(settings.DATA_DIR) / "operating_points.csv"


@dataclass(frozen=True)
class DemoAccelerator:
    slug: str
    name: str
    kind: str  # "gpu" or "tpu"
    memory_gb: float  # per chip
    chips_per_slice: int = 1


# Longest, most specific patterns first: "GB200" must not be read as "B200", nor "MI325X" as "MI300X".
ACCELERATORS: list[tuple[re.Pattern[str], DemoAccelerator]] = [
    (re.compile(r"\bGB200\b", re.I), DemoAccelerator("gb200-186gb", "NVIDIA GB200 186GB", "gpu", 186)),
    (re.compile(r"\bB200\b", re.I), DemoAccelerator("b200-180gb", "NVIDIA B200 SXM 180GB", "gpu", 180)),
    (re.compile(r"\bH200\b", re.I), DemoAccelerator("h200-141gb", "NVIDIA H200 SXM 141GB", "gpu", 141)),
    (re.compile(r"\bH100\b", re.I), DemoAccelerator("h100-80gb", "NVIDIA H100 SXM 80GB", "gpu", 80)),
    (re.compile(r"\bA100\b", re.I), DemoAccelerator("a100-80gb", "NVIDIA A100 80GB", "gpu", 80)),
    (re.compile(r"\bL40S\b", re.I), DemoAccelerator("l40s-48gb", "NVIDIA L40S 48GB", "gpu", 48)),
    (re.compile(r"\bMI325X\b", re.I), DemoAccelerator("mi325x-256gb", "AMD Instinct MI325X 256GB", "gpu", 256)),
    (re.compile(r"\bMI300X\b", re.I), DemoAccelerator("mi300x-192gb", "AMD Instinct MI300X 192GB", "gpu", 192)),
    # A TPU is sold and scheduled as a slice: one v5e-8 slice is one accelerator of 8 chips × 16 GB.
    (re.compile(r"\bTPU v5e\b", re.I), DemoAccelerator("tpu-v5e-8", "Google TPU v5e-8 slice", "tpu", 16, 8)),
]

# Checked in order against the CSV's model column; anything else is skipped.
MODELS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^llama2-70b(-99(\.9)?)?$", re.I), "llama-2-70b"),
    (re.compile(r"^llama3\.1-8b$", re.I), "llama-3.1-8b"),
    (re.compile(r"^llama3\.1-405b$", re.I), "llama-3.1-405b"),
    (re.compile(r"^mixtral-8x7b$", re.I), "mixtral-8x7b"),
    (re.compile(r"^deepseek-r1$", re.I), "deepseek-r1"),
    (re.compile(r"^llama-3\.1-8b-instruct\b", re.I), "llama-3.1-8b"),
    (re.compile(r"^llama-3\.1-70b-instruct\b", re.I), "llama-3.1-70b"),
    (re.compile(r"^llama-3\.3-70b-instruct\b", re.I), "llama-3.3-70b"),
    (re.compile(r"^llama-3-8b\b", re.I), "llama-3-8b"),
]


def model_slug(raw: str) -> str | None:
    text = raw.strip()
    for pattern, slug in MODELS:
        if pattern.search(text):
            return slug
    return None


def demo_accelerator(raw: str) -> DemoAccelerator | None:
    for pattern, spec in ACCELERATORS:
        if pattern.search(raw):
            return spec
    return None


@dataclass(frozen=True)
class DemoMix:
    prompt: float
    output: float
    source: str


# The MLPerf datasets' mean tokens per request. Not verified against the reference implementation
# here, so each says so where people see the conversion (docs/contract.md §1).
MLPERF_MIXES: dict[str, DemoMix] = {
    "llama-2-70b": DemoMix(
        300, 300, "assumed: OpenOrca subset, ~300 in / ~300 out per request (MLPerf llama2-70b reference); not verified"
    ),
    "llama-3.1-8b": DemoMix(
        800,
        70,
        "assumed: CNN/DailyMail summarisation, ~800 in / ~70 out per request (MLPerf llama3.1-8b); not verified",
    ),
    "llama-3.1-405b": DemoMix(
        9400,
        680,
        "assumed: long-context mix (LongBench, RULER, GovReport…), ~9,400 in / ~680 out per request "
        "(MLPerf llama3.1-405b); not verified",
    ),
    "mixtral-8x7b": DemoMix(
        150,
        150,
        "assumed: OpenOrca + GSM8K + MBXP, ~150 in / ~150 out per request (MLPerf mixtral-8x7b); not verified",
    ),
    "deepseek-r1": DemoMix(
        800,
        3900,
        "assumed: reasoning prompts, ~800 in / ~3,900 out per request (MLPerf deepseek-r1); not verified",
    ),
}
SHAREGPT_PROMPT = 220  # assumed mean ShareGPT prompt tokens (Llama tokenizer), used where a row gives no mean


@dataclass(frozen=True)
class OperatingPointRow:
    """One mappable CSV row, in the units the catalogue stores."""

    model: str
    accelerator: DemoAccelerator
    accelerators_per_replica: int
    runtime: str
    scenario: str
    ttft_p99_limit_ms: float | None
    tpot_p99_limit_ms: float | None
    measured_ttft_p99_ms: float | None
    measured_tpot_p99_ms: float | None
    out_tps_per_replica: float
    ref_mean_prompt: float
    ref_mean_output: float
    ref_mix_source: str
    is_ceiling: bool
    source: str
    notes: str


@dataclass
class LoadResult:
    rows: list[OperatingPointRow] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (CSV line number, why)


_LIMIT = re.compile(r"\b(TTFT|TPOT)\s*p99\s*<=\s*([\d.]+)\s*ms", re.I)
_ISL_OSL = re.compile(r"ISL/OSL\s*=\s*(\d+)\s*/\s*(\d+)", re.I)
_REQ_RATE = re.compile(r"([\d.]+)\s*req/s", re.I)


def parse_limits(constraint: str) -> tuple[float | None, float | None]:
    """`TTFT p99<=2000ms; TPOT p99<=200ms` → (2000.0, 200.0). Means or medians are not limits."""
    found = {k.upper(): float(v) for k, v in _LIMIT.findall(constraint)}
    return found.get("TTFT"), found.get("TPOT")


def _float(text: str) -> float | None:
    text = (text or "").strip()
    return float(text) if text else None


def demo_mix(model: str, row: dict[str, str], out_tps: float) -> DemoMix | None:
    scenario, notes = row["scenario"], row["notes"]
    stated = _ISL_OSL.search(scenario)
    if stated:
        isl, osl = int(stated.group(1)), int(stated.group(2))
        return DemoMix(isl, osl, f"stated by the benchmark: ISL/OSL {isl:,}/{osl:,} tokens per request")
    if "(MLPerf)" in scenario and model in MLPERF_MIXES:
        return MLPERF_MIXES[model]
    if "sharegpt" in scenario.lower():
        rate = _REQ_RATE.search(notes)
        if rate:
            # The row publishes both tokens/s and requests/s, so its mean output follows from them.
            out = round(out_tps / float(rate.group(1)), 1)
            return DemoMix(
                SHAREGPT_PROMPT,
                out,
                f"output derived from the row ({out_tps:,.2f} tok/s ÷ {rate.group(1)} req/s = {out:,.1f}); "
                f"prompt assumed: ShareGPT ~{SHAREGPT_PROMPT} tokens; not verified",
            )
        return DemoMix(
            SHAREGPT_PROMPT,
            190,
            "assumed: ShareGPT, ~220 in / ~190 out per request (capped at 1024/1024); not verified",
        )
    return None


def parse_row(row: dict[str, str]) -> OperatingPointRow | str:
    """A catalogue row, or the reason it is skipped."""
    model = model_slug(row["model"])
    if model is None:
        return f"unknown model {row['model']!r}"
    acc = demo_accelerator(row["accelerator"])
    if acc is None:
        return f"unknown accelerator {row['accelerator']!r}"
    out_tps = _float(row["throughput_tokens_per_s"])
    if not out_tps or out_tps <= 0:
        return "no throughput published"
    chips = int(row["accelerators_per_replica"])
    if chips % acc.chips_per_slice:
        return f"{chips} chips is not a whole number of {acc.slug} slices"
    mix = demo_mix(model, row, out_tps)
    if mix is None:
        return f"no reference mix known for scenario {row['scenario']!r}"
    ttft, tpot = parse_limits(row["latency_constraint"])
    return OperatingPointRow(
        model=model,
        accelerator=acc,
        accelerators_per_replica=chips // acc.chips_per_slice,
        runtime=row["runtime_or_submitter"].strip(),
        scenario=row["scenario"].strip(),
        ttft_p99_limit_ms=ttft,
        tpot_p99_limit_ms=tpot,
        measured_ttft_p99_ms=_float(row["measured_ttft_p99_ms"]),
        measured_tpot_p99_ms=_float(row["measured_tpot_p99_ms"]),
        # Whole-system tokens/s for `accelerators_per_replica` accelerators: that system is one replica.
        out_tps_per_replica=out_tps,
        ref_mean_prompt=mix.prompt,
        ref_mean_output=mix.output,
        ref_mix_source=mix.source,
        # Without a p99 latency limit the number is an upper bound, not goodput at an SLO.
        is_ceiling=ttft is None and tpot is None,
        source=row["source"].strip(),
        notes=f"{row['model'].strip()} on {row['accelerator'].strip()}; {row['latency_constraint'].strip()}; "
        f"{row['notes'].strip()}",
    )


def prompt_per_output(row: dict[str, str]) -> float | None:
    """A CSV row's reference mix as the catalogue loads it, prompt ÷ output tokens (None: not loaded).
    The leave-one-out of docs/latency.md (bench/latency_loo.py) reads the CSV without the catalogue."""
    parsed = parse_row(row)
    return parsed.ref_mean_prompt / parsed.ref_mean_output if isinstance(parsed, OperatingPointRow) else None


def load_operating_points(path: Path | None = None) -> LoadResult:
    result = LoadResult()
    with open(path or default_path(), newline="", encoding="utf-8") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            parsed = parse_row(row)
            if isinstance(parsed, str):
                result.skipped.append((line, parsed))
            else:
                result.rows.append(parsed)
    return result
