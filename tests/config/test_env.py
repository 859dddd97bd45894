"""The typed environment readers (config.env, issue 34.4): a bad value stops start-up naming the
variable and the value; an unknown boolean is refused, not read as False."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_float, env_int, env_str

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("reader", "raw", "says"),
    [
        (env_float, "0,3", "HEADROOM_T_X='0,3' is not a number"),
        (env_float, "nan", "HEADROOM_T_X='nan' is not a finite number"),
        (env_int, "1.5", "HEADROOM_T_X='1.5' is not a whole number"),
        (env_int, "ten", "HEADROOM_T_X='ten' is not a whole number"),
        (env_bool, "ture", "HEADROOM_T_X='ture' is not a boolean (1/0, true/false, yes/no, on/off)"),
        (env_bool, "2", "HEADROOM_T_X='2' is not a boolean (1/0, true/false, yes/no, on/off)"),
    ],
)
def test_a_bad_value_names_the_variable_and_the_value(monkeypatch, reader, raw, says):
    monkeypatch.setenv("HEADROOM_T_X", raw)
    with pytest.raises(ImproperlyConfigured) as e:
        reader("HEADROOM_T_X", 1)
    assert str(e.value) == says


@pytest.mark.parametrize(
    ("raw", "want"),
    [("1", True), ("TRUE", True), ("Yes", True), ("on", True), (" true ", True),
     ("0", False), ("false", False), ("NO", False), ("Off", False)],
)  # fmt: skip
def test_booleans_accept_the_usual_spellings_in_any_case(monkeypatch, raw, want):
    monkeypatch.setenv("HEADROOM_T_B", raw)
    assert env_bool("HEADROOM_T_B", not want) is want


def test_unset_or_empty_gives_the_default_and_values_parse(monkeypatch):
    monkeypatch.delenv("HEADROOM_T_X", raising=False)
    assert (env_float("HEADROOM_T_X", 0.25), env_int("HEADROOM_T_X", 7), env_bool("HEADROOM_T_X", True)) == (
        0.25,
        7,
        True,
    )
    assert env_str("HEADROOM_T_X", "d") == "d"
    monkeypatch.setenv("HEADROOM_T_X", "")
    assert (env_float("HEADROOM_T_X", 0.25), env_int("HEADROOM_T_X", 7), env_bool("HEADROOM_T_X", False)) == (
        0.25,
        7,
        False,
    )
    monkeypatch.setenv("HEADROOM_T_X", "42")
    assert (env_float("HEADROOM_T_X", 0.25), env_int("HEADROOM_T_X", 7), env_str("HEADROOM_T_X")) == (42.0, 42, "42")


def test_a_bound_is_enforced_naming_the_variable(monkeypatch):
    monkeypatch.setenv("HEADROOM_T_X", "0")
    with pytest.raises(ImproperlyConfigured) as e:
        env_int("HEADROOM_T_X", 5, minimum=1)
    assert str(e.value) == "HEADROOM_T_X=0 is out of range (1 ≤ HEADROOM_T_X)"


@pytest.mark.parametrize(
    ("name", "raw", "says"),
    [
        ("ADMISSION_REDIS_TIMEOUT_S", "0,3", "ADMISSION_REDIS_TIMEOUT_S='0,3' is not a number"),
        ("FORECAST_RUN_STALE_AFTER_S", "10m", "FORECAST_RUN_STALE_AFTER_S='10m' is not a whole number"),
        ("FORECAST_RUN_IN_BACKGROUND", "nope", "FORECAST_RUN_IN_BACKGROUND='nope' is not a boolean"),
        # A receipt wait below 1 s would re-ask PostgreSQL and resend every tick, before any worker could ingest.
        ("ADMISSION_EVENT_CONFIRM_S", "1e-320", "ADMISSION_EVENT_CONFIRM_S=1e-320 is out of range (1 ≤ "),
        ("ADMISSION_EVENT_CONFIRM_TRIES", "99", "ADMISSION_EVENT_CONFIRM_TRIES=99 is out of range (0 ≤ "),
        ("CELERY_BROKER_SOCKET_TIMEOUT", "1e308", "CELERY_BROKER_SOCKET_TIMEOUT=1e+308 is out of range (1 ≤ "),
        # An app's own parser (accounts_oidc.conf), read through config.env.env_parsed: the variable is named.
        ("OIDC_ROLE_MAP", "admins=root", "OIDC_ROLE_MAP: 'root' is none of approver, operator, requester, viewer"),
        ("OIDC_CLAIM_GRANTABLE_ROLES", "viewer,gateway", "OIDC_CLAIM_GRANTABLE_ROLES: claims may grant only"),
    ],
)
def test_the_settings_refuse_a_bad_value_at_start_naming_it(name, raw, says):
    # A fresh interpreter: the settings are read once, at import.
    code = "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'config.settings'; django.setup()"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**_env(), name: raw}, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert f"django.core.exceptions.ImproperlyConfigured: {says}" in done.stderr


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
