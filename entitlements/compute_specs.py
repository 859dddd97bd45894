"""Published compute specs into the catalogue: active parameters per model and dense FLOP/s per
accelerator chip (`data/model_specs.csv`, `accelerator_specs.csv`), for sizing's prefill bound.

Rows name their source; a catalogue entry with no row keeps an empty figure (sizing then applies no
prefill bound and says so). A TPU slice (`tpu-v5e-8`) takes its chip's row (`tpu-v5e`).
"""

from __future__ import annotations

import csv
from pathlib import Path

from django.conf import settings

from entitlements.models import Accelerator, ServedModel


def _rows(name: str) -> list[dict[str, str]]:
    with (Path(settings.DATA_DIR) / name).open(newline="") as fh:
        return list(csv.DictReader(fh))


def _chip_row(slug: str, rows: dict[str, dict[str, str]]) -> dict[str, str] | None:
    if slug in rows:
        return rows[slug]
    return next((row for chip, row in rows.items() if slug.startswith(f"{chip}-")), None)


def load_compute_specs() -> int:
    """Fill `active_params_b` and `dense_tflops_per_chip` where the CSVs have them; returns rows changed."""
    changed = 0
    models = {r["model"]: r for r in _rows("model_specs.csv")}
    for m in ServedModel.objects.all():
        row = models.get(m.slug)
        if row and row["active_params_b"]:
            changed += ServedModel.objects.filter(pk=m.pk).update(active_params_b=float(row["active_params_b"]))
    chips = {r["accelerator"]: r for r in _rows("accelerator_specs.csv")}
    for acc in Accelerator.objects.all():
        chip = _chip_row(acc.slug, chips)
        if chip and chip["dense_bf16_tflops"]:
            changed += Accelerator.objects.filter(pk=acc.pk).update(
                dense_tflops_per_chip=float(chip["dense_bf16_tflops"])
            )
    return changed
