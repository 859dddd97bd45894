"""The demo's default rules: loaded after load_demo, twice changes nothing, and an evaluation pass runs over them."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from alerts.models import AlertRule
from demo.alert_rules import RULES


@pytest.mark.slow
@pytest.mark.django_db
def test_demo_rules_load_once_and_evaluate():
    call_command("load_demo")
    call_command("load_demo_alerts")
    call_command("load_demo_alerts")
    assert AlertRule.objects.count() == len(RULES) == 8
    acme = AlertRule.objects.get(name="acme: use over 90 % of bought")
    assert (acme.scope, acme.tenant.slug, acme.kind, acme.threshold) == ("tenant", "acme", "use_over_bought", 90.0)
    call_command("evaluate_alerts")  # one pass over every demo rule without an error
