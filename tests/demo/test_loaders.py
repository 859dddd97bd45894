import csv

import pytest

from demo.loaders import (
    MLPERF_MIXES,
    default_path,
    demo_accelerator,
    load_operating_points,
    model_slug,
    parse_limits,
    parse_row,
)

HEADER = (
    "source,model,accelerator,accelerators_per_replica,runtime_or_submitter,scenario,latency_constraint,"
    "throughput_tokens_per_s,measured_ttft_p99_ms,measured_tpot_p99_ms,notes"
)


def row(**over):
    base = {
        "source": "https://example.org/a",
        "model": "llama2-70b-99",
        "accelerator": "NVIDIA H200-SXM-141GB",
        "accelerators_per_replica": "8",
        "runtime_or_submitter": "X / TensorRT-LLM",
        "scenario": "Server (MLPerf)",
        "latency_constraint": "TTFT p99<=2000ms; TPOT p99<=200ms",
        "throughput_tokens_per_s": "34029.38",
        "measured_ttft_p99_ms": "1717",
        "measured_tpot_p99_ms": "195.6",
        "notes": "n",
    }
    return base | over


@pytest.mark.parametrize(
    ("raw", "slug"),
    [
        ("llama2-70b-99", "llama-2-70b"),
        ("llama3.1-8b", "llama-3.1-8b"),
        ("llama3.1-405b", "llama-3.1-405b"),
        ("mixtral-8x7b", "mixtral-8x7b"),
        ("deepseek-r1", "deepseek-r1"),
        ("Llama-3-8B (chat; bf16)", "llama-3-8b"),
        ("Llama-3.1-8B-Instruct (FP8)", "llama-3.1-8b"),
        ("Llama-3.3-70B-Instruct (FP4)", "llama-3.3-70b"),
        ("Llama-3.1-70B-Instruct (BF16)", "llama-3.1-70b"),
        ("gpt-j", None),
    ],
)
def test_model_names_become_slugs(raw, slug):
    assert model_slug(raw) == slug


@pytest.mark.parametrize(
    ("raw", "slug"),
    [
        ("NVIDIA B200-SXM-180GB", "b200-180gb"),
        ("NVIDIA B200 180GB", "b200-180gb"),
        ("NVIDIA GB200", "gb200-186gb"),
        ("NVIDIA H200 SXM 141GB", "h200-141gb"),
        ("NVIDIA H100 80GB", "h100-80gb"),
        ("AMD Instinct MI300X-NPS1-SPX-192GB-750W", "mi300x-192gb"),
        ("AMD Instinct MI325X 256GB HBM3e", "mi325x-256gb"),
        ("NVIDIA L40S", "l40s-48gb"),
        ("Google TPU v5e", "tpu-v5e-8"),
    ],
)
def test_accelerator_names_become_slugs(raw, slug):
    assert demo_accelerator(raw).slug == slug


def test_latency_limits_are_parsed_and_means_are_not_limits():
    assert parse_limits("TTFT p99<=2000ms; TPOT p99<=200ms") == (2000.0, 200.0)
    assert parse_limits("TTFT p99<=450ms; TPOT p99<=40ms") == (450.0, 40.0)
    assert parse_limits("measured mean TTFT=834.51ms; mean ITL=59.73ms") == (None, None)
    assert parse_limits("none (Offline: max throughput; no latency bound)") == (None, None)


def test_mlperf_server_row_keeps_limits_source_and_assumed_mix():
    op = parse_row(row())
    assert (op.model, op.accelerator.slug, op.accelerators_per_replica) == ("llama-2-70b", "h200-141gb", 8)
    assert (op.ttft_p99_limit_ms, op.tpot_p99_limit_ms, op.is_ceiling) == (2000.0, 200.0, False)
    assert (op.measured_ttft_p99_ms, op.measured_tpot_p99_ms) == (1717.0, 195.6)
    assert op.out_tps_per_replica == 34029.38
    assert (op.ref_mean_prompt, op.ref_mean_output) == (300, 300)
    assert op.ref_mix_source == MLPERF_MIXES["llama-2-70b"].source
    assert op.ref_mix_source.startswith("assumed:")
    assert op.source == "https://example.org/a"


def test_offline_row_is_a_ceiling():
    op = parse_row(
        row(scenario="Offline (MLPerf)", latency_constraint="none (Offline: max throughput; no latency bound)")
    )
    assert (op.is_ceiling, op.ttft_p99_limit_ms, op.tpot_p99_limit_ms) == (True, None, None)


def test_isl_osl_rows_state_their_mix():
    op = parse_row(
        row(
            model="Llama-3.3-70B-Instruct (FP8)",
            accelerators_per_replica="2",
            scenario="concurrency=50; ISL/OSL=5000/500",
            latency_constraint="measured mean TTFT=834.51ms; mean ITL=59.73ms",
            throughput_tokens_per_s="814.37",
        )
    )
    assert (op.ref_mean_prompt, op.ref_mean_output, op.is_ceiling) == (5000, 500, True)
    assert op.ref_mix_source == "stated by the benchmark: ISL/OSL 5,000/500 tokens per request"


def test_sharegpt_row_derives_mean_output_from_its_request_rate():
    op = parse_row(
        row(
            model="Llama-3.1-8B-Instruct (BF16)",
            accelerator="NVIDIA A100 80GB",
            accelerators_per_replica="1",
            scenario="offline max throughput (ShareGPT; 5000 prompts; rate=inf)",
            latency_constraint="none",
            throughput_tokens_per_s="4281.51",
            notes="output token throughput; request throughput 22.03 req/s",
        )
    )
    assert op.ref_mean_output == 194.3  # 4281.51 / 22.03 = 194.349…
    assert op.ref_mix_source.startswith("output derived from the row")


def test_tpu_chips_count_as_one_slice():
    op = parse_row(
        row(
            model="Llama-3-8B (chat; bf16)",
            accelerator="Google TPU v5e",
            scenario="max throughput; batch=128; max in/out=1024/1024; ShareGPT",
            latency_constraint="none reported",
        )
    )
    assert (op.accelerator.slug, op.accelerator.chips_per_slice, op.accelerators_per_replica) == ("tpu-v5e-8", 8, 1)
    assert op.is_ceiling is True


def test_unmappable_rows_are_skipped_with_a_reason():
    assert parse_row(row(throughput_tokens_per_s="")) == "no throughput published"
    assert parse_row(row(model="gpt-j")) == "unknown model 'gpt-j'"
    assert parse_row(row(accelerator="Intel Gaudi 3")) == "unknown accelerator 'Intel Gaudi 3'"


def test_shared_file_loads_every_mappable_row_with_its_source(tmp_path):
    with open(default_path(), newline="", encoding="utf-8") as fh:
        raw = list(csv.DictReader(fh))
    result = load_operating_points()
    assert len(raw) == 59
    assert len(result.rows) == 57
    assert result.skipped == [(57, "no throughput published"), (58, "no throughput published")]
    with_throughput = [r for r in raw if r["throughput_tokens_per_s"].strip()]
    assert [op.source for op in result.rows] == [r["source"] for r in with_throughput]
    assert all(op.source.startswith("https://") for op in result.rows)
    keys = {(o.model, o.accelerator.slug, o.accelerators_per_replica, o.runtime, o.scenario) for o in result.rows}
    assert len(keys) == 57  # fits the catalogue's unique constraint


def test_loader_reads_a_given_path(tmp_path):
    path = tmp_path / "ops.csv"
    path.write_text(HEADER + "\n" + ",".join(f'"{v}"' for v in row().values()) + "\n", encoding="utf-8")
    result = load_operating_points(path)
    assert [(o.model, o.out_tps_per_replica) for o in result.rows] == [("llama-2-70b", 34029.38)]
    assert result.skipped == []
