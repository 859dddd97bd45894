"""Which Alertmanager alerts mean supply is gone (issue 24), a rule an operator can read in settings.

A supply alert is one whose `alertname` is in ALERTMANAGER_SUPPLY_ALERTS (default: Hyperion's
`ServiceDown`), or whose rule expression is `up == 0` / `up{...} == 0` (Prometheus puts the rule's
expression in the alert's generatorURL as `g0.expr`). Every other alert (GPUMemoryHigh,
HighInferenceLatency, ...) is load: evidence of how the pool ran, never a change to what it can serve.
"""

from __future__ import annotations

import re
import urllib.parse

from django.conf import settings

UP_IS_ZERO = re.compile(r"^\(?\s*up\s*(\{[^}]*\})?\s*\)?\s*==\s*0\s*$")


def rule_expr(generator_url: str) -> str:
    """The PromQL expression of the rule that raised the alert, '' when the URL does not carry one."""
    query = urllib.parse.urlsplit(generator_url).query
    exprs = urllib.parse.parse_qs(query).get("g0.expr")
    return exprs[0] if exprs else ""


def is_supply(alertname: str, generator_url: str = "") -> bool:
    if alertname in settings.ALERTMANAGER_SUPPLY_ALERTS:
        return True
    return bool(UP_IS_ZERO.match(rule_expr(generator_url)))
