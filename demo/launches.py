"""Launch requests in every state, so the launch-review half of the product shows on a fresh demo.

Filed, submitted and decided through the real intake services (portal.services.intake) by the demo's
requester and approver, so each carries its events, its sizing and, once approved, its grants; one
stays submitted in the approver's queue. Seeded once: a second load finds them and changes nothing.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from entitlements.models import Region, ServedModel
from portal.models import LaunchRequest
from portal.selectors import size_request
from portal.services import intake

# Every seeded request says so: how a second load knows they are there.
JUSTIFICATION = "Seeded by the demo so the review queue and each decision can be seen."

# (title, state, regions, committed peak requests/s)
PLAN: list[tuple[str, str, tuple[str, ...], float]] = [
    ("Support chat, German launch", "draft", ("eu-west",), 0.5),
    ("Search answers beta", "submitted", ("us-east",), 0.4),
    ("Code review assistant", "approved", ("us-east",), 0.3),
    ("Document summaries in two regions", "partially_approved", ("us-east", "eu-west"), 0.4),
    ("Overnight batch tagging as reserved", "rejected", ("us-east",), 0.6),
    ("Voice agent pilot", "returned", ("eu-west",), 0.3),
]
MODEL = "llama-3.1-8b"  # served in us-east and eu-west, so one request can span two regions


def _fields(model: ServedModel, regions: list[Region], rps: float, today: date) -> dict[str, Any]:
    return {
        "model": model,
        "regions": regions,
        "launch_date": today + timedelta(days=14),
        "end_date": today + timedelta(days=180),
        "traffic_class": "reserved",
        "max_prompt_tokens": 8000,
        "max_output_tokens": 1000,
        "prompt_p50": 800,
        "prompt_p95": 3000,
        "output_p50": 200,
        "output_p95": 700,
        "max_concurrency": 32,
        "ttft_p99_ms": 2000,
        "tpot_p99_ms": 100,
        "committed_basis": "rps",
        "committed_value": rps,
        "expected_basis": "rps",
        "expected_value": round(rps * 0.8, 3),
        "upside_basis": "rps",
        "upside_value": round(rps * 1.5, 3),
        "stress_basis": "rps",
        "stress_value": round(rps * 2.0, 3),
        "criticality": "medium",
        "justification": JUSTIFICATION,
    }


def _decide(req: LaunchRequest, state: str, approver: Any) -> None:
    if state == "approved":
        intake.launch_request_approve(actor=approver, request=req, comment="Fits the pool's headroom.")
    elif state == "partially_approved":
        committed = size_request(req, []).cu["committed"]  # what approval would grant in each region
        intake.launch_request_partially_approve(
            actor=approver,
            request=req,
            region_cu={"us-east": committed, "eu-west": 0},
            comment="us-east now; eu-west once the pool there has room.",
        )
    elif state == "rejected":
        intake.launch_request_reject(
            actor=approver, request=req, comment="Batch work belongs in best effort, not reserved."
        )
    elif state == "returned":
        intake.launch_request_return(
            actor=approver, request=req, comment="Please give the p95 prompt length from the pilot's logs."
        )


def seed_launch_requests() -> list[str]:
    """File the PLAN's requests (once); what was done, line by line."""
    if LaunchRequest.objects.filter(justification=JUSTIFICATION).exists():
        return ["launch requests: already present, unchanged"]
    users = get_user_model().objects
    requester, approver = users.get(username="demo-requester"), users.get(username="demo-approver")
    model = ServedModel.objects.get(slug=MODEL)
    today = timezone.now().date()
    out = []
    with transaction.atomic():
        for title, state, slugs, rps in PLAN:
            regions = [Region.objects.get(slug=s) for s in slugs]
            req = intake.launch_request_create(actor=requester, title=title, **_fields(model, regions, rps, today))
            if state != "draft":
                intake.launch_request_submit(actor=requester, request=req)
                _decide(req, state, approver)
            req.refresh_from_db()
            out.append(f"launch request {req.title!r}: {req.get_state_display().lower()}")
    return out
