"""`make run`'s demo, as its commands run it, gives reconciliation one finding of each kind (issue 17.2)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from reconciliation.models import Finding, PoolReview

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_the_demo_history_yields_every_kind_of_finding(django_capture_on_commit_callbacks):
    call_command("load_demo", stdout=StringIO())
    call_command("seed_history", days=15, stdout=StringIO())
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("reconcile", stdout=out)
    kinds = set(Finding.objects.filter(state="open").values_list("kind", flat=True))
    assert kinds == {"right_size_down", "grow", "envelope_drift", "platform_owes"}, out.getvalue()
    grow = Finding.objects.get(kind="grow")
    assert (grow.tenant.slug, grow.pool.slug) == ("acme", "llama-2-70b-us-east-h200")
    assert grow.evidence["tenant_throttle_share"] > 0.01
    drift = Finding.objects.get(kind="envelope_drift")
    assert drift.evidence["drift"]["prompt_p95"] and "cu" in drift.recommended, drift.recommended
    review = PoolReview.objects.get()
    assert review.pool.slug == "llama-2-70b-eu-west-h100" and sum(review.hours.values()) == 20
