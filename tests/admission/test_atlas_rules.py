"""import_atlas's pure rules (issue 24.1), on the embedded pass: the map's field-named errors, a
limits hash read field by field, and the CU rule."""

from __future__ import annotations

from decimal import Decimal

import pytest

from admission.atlas_import import derive_cu
from admission.atlas_source import AtlasInputError, AtlasLimits, parse_limits, parse_usage, read_map
from entitlements.models import ServedModel

HEADER = "api_key,tenant,project,model,region\n"
DEFAULTS = AtlasLimits(None, None, 2.0, None, "normal", from_defaults=True)


def test_bad_rows_are_reported_by_line_and_field_and_the_good_ones_kept():
    rows, errors = read_map(
        HEADER + "k1,acme,,llama,us\n"
        "k2,acme,web,llama\n"  # four fields
        ",acme,,llama,us\n"
        "k3,,,llama,us\n"
        "k1,globex,,llama,us\n"
        "\n"
        "k4, globex ,,llama,us\n"
    )
    assert [(r.line, r.api_key, r.tenant) for r in rows] == [(2, "k1", "acme"), (8, "k4", "globex")]
    assert [str(e) for e in errors] == [
        "map line 3: row: has 4 fields, expected 5",
        "map line 4: api_key: is required",
        "map line 5: tenant: is required",
        "map line 6: api_key: already mapped on line 2",
    ]


def test_a_map_needs_its_header():
    with pytest.raises(AtlasInputError, match="header"):
        read_map("k1,acme,,llama,us\n")


def test_a_limits_hash_fills_what_it_lacks_from_the_defaults_and_names_a_bad_field():
    got = parse_limits("sk-abcdefgh", {"daily_limit": "1000", "priority": "HIGH"}, DEFAULTS)
    assert (got.daily, got.monthly, got.rate_per_sec, got.priority, got.from_defaults) == (
        1000,
        None,
        2.0,
        "high",
        False,
    )
    assert parse_limits("sk-abcdefgh", {}, DEFAULTS) is DEFAULTS
    for field, value, says in (("rate_per_sec", "0", "greater than 0"), ("burst", "1.5", "whole number"),
                               ("daily_limit", "lots", "not a number"), ("priority", "urgent", "not one of")):  # fmt: skip
        with pytest.raises(AtlasInputError, match=says) as exc:
            parse_limits("sk-abcdefgh", {field: value}, DEFAULTS)
        assert exc.value.field == field and exc.value.where == "limits:sk-abc…gh"  # the key is masked
    with pytest.raises(AtlasInputError, match="usage:d"):
        parse_usage("k", "-3", None)


def test_cu_from_the_request_rate_or_else_the_daily_budget_rounded_up_to_a_tenth():
    model = ServedModel(slug="m", r_wt_per_s=1000.0, w_out=4.0, w_cached=0.0)
    cu, how = derive_cu(AtlasLimits(None, None, 10.0, None, "normal", False), model)
    assert cu == Decimal("18.0") and how.endswith("= 18.0 CU")  # 10 × (1,000 + 4 × 200) / 1,000
    cu, _ = derive_cu(AtlasLimits(None, None, 0.01, None, "normal", False), model)
    assert cu == Decimal("0.1")  # 0.018 rounds up, never below a tenth
    cu, how = derive_cu(AtlasLimits(2_880_000, None, None, None, "normal", False), model)
    assert cu == Decimal("0.1") and "peak 3" in how  # 2,880,000 / 86,400 × 3 / 1,000 = 0.1
    cu, _ = derive_cu(AtlasLimits(2_900_000, None, None, None, "normal", False), model)
    assert cu == Decimal("0.2")  # 0.1007 rounds up
    with pytest.raises(ValueError, match="no rate_per_sec nor daily_limit"):
        derive_cu(AtlasLimits(None, 5, None, None, "normal", False), model)
