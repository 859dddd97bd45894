"""import_atlas's pure rules (issue 24.1), on the embedded pass: the map's field-named errors, a
limits hash read field by field, and the CU rule."""

from __future__ import annotations

from decimal import Decimal

import pytest

from admission.atlas_import import derive_cu
from admission.atlas_source import (
    ATLAS_DEFAULTS,
    AtlasInputError,
    AtlasLimits,
    parse_limits,
    parse_usage,
    read_map_file,
)
from entitlements.models import ServedModel
from telemetry import atlas_map

HEADER = "api_key,tenant,project,model,region\n"
DEFAULTS = AtlasLimits(None, None, 2.0, None, "normal", from_defaults=True)


def read_map(text: str):
    return read_map_file(text.encode())


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
        "map line 3: row: expected 5 columns api_key,tenant,project,model,region, got 4",
        "map line 4: api_key: is empty",
        "map line 5: tenant: is empty",
        "map line 6: api_key: already mapped on line 2",
    ]


def test_the_importer_and_the_preset_read_the_map_with_one_parser(monkeypatch):
    """The README says import_atlas --map and the preset's atlas_map are the same CSV: one parser reads
    both, so a rule changed there changes for both (this fails if either grows its own)."""
    from admission import atlas_source

    calls = []
    real = atlas_map.read_map

    def spy(text):
        calls.append(text)
        return real(text)

    monkeypatch.setattr(atlas_map, "read_map", spy)
    monkeypatch.setattr(atlas_source, "read_map", spy)
    text = "# keys\nk1,acme,,llama,us\n"
    rows, errors = read_map_file(text.encode())
    assert [r.api_key for r in rows] == ["k1"] and errors == [] and len(calls) == 1
    assert atlas_source.MapRow is atlas_map.MapRow
    assert not hasattr(atlas_source, "MAP_FIELDS")  # the old second parser's header is gone


def test_a_header_is_optional_but_a_reordered_one_is_refused_and_comments_are_skipped():
    rows, errors = read_map("# Atlas keys\nk1,acme,,llama,us\n")
    assert [r.line for r in rows] == [2] and errors == []
    rows, errors = read_map("api_key,tenant,model,project,region\nk1,acme,,llama,us\n")
    assert [str(e) for e in errors] == ["map line 1: header: must be exactly api_key,tenant,project,model,region"]


def test_a_bom_is_accepted_and_a_nul_or_a_non_utf8_line_is_reported_by_line_and_skipped():
    data = (
        "\ufeff" + HEADER
    ).encode() + b"k1,acme,,llama,us\nk\x002,acme,,llama,us\nk\xff3,acme,,llama,us\nk4,acme,,llama,us\n"
    rows, errors = read_map_file(data)
    assert [r.api_key for r in rows] == ["k1", "k4"]
    assert [str(e) for e in errors] == [
        "map line 3: line: contains a NUL character; skipped",
        "map line 4: line: is not UTF-8 (byte 2); skipped",
    ]
    # the preset's field reads the same text the same way
    owners, errs = atlas_map.read_map("\ufeffk1,acme,,llama,us\nk\x002,acme,,llama,us\n")
    assert [r.api_key for r in owners] == ["k1"] and [e.line for e in errs] == [2]


def test_a_map_with_only_a_header_has_no_rows():
    assert read_map(HEADER) == ([], [])


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
                               ("daily_limit", "lots", "not a number")):  # fmt: skip
        with pytest.raises(AtlasInputError, match=says) as exc:
            parse_limits("sk-abcdefgh", {field: value}, DEFAULTS)
        assert exc.value.field == field and exc.value.where == "limits:sk-abc…gh"  # the key is masked
    with pytest.raises(AtlasInputError, match="usage:d"):
        parse_usage("k", "-3", None)


def test_atlas_defaults_are_its_fixed_settings_and_a_missing_field_takes_its_own():
    """Atlas gateway/config.py lines 29-32 (commit e2aa4ae09b57): 100,000 / 1,000,000 / 2.0 / 5."""
    d = ATLAS_DEFAULTS
    assert (d.daily, d.monthly, d.rate_per_sec, d.burst, d.priority) == (100_000, 1_000_000, 2.0, 5, "normal")
    got = parse_limits("sk-abcdefgh", {"daily_limit": "0"}, ATLAS_DEFAULTS)
    assert (got.daily, got.monthly, got.rate_per_sec, got.burst, got.priority) == (0, 1_000_000, 2.0, 5, "normal")
    assert "monthly_limit 1,000,000 (Atlas default)" in got.notes and "burst 5 (Atlas default)" in got.notes


def test_a_priority_atlas_does_not_know_reads_as_normal_as_in_atlas():
    """gateway/quota.py `_normalize_priority` (lines 46-50): anything else is normal."""
    got = parse_limits("sk-abcdefgh", {"priority": "urgent", "daily_limit": "5"}, ATLAS_DEFAULTS)
    assert got.priority == "normal"
    assert "priority 'urgent' read as normal, as Atlas does" in got.notes
    assert parse_limits("k", {"priority": " Critical "}, ATLAS_DEFAULTS).priority == "critical"


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
