import pytest
from rest_framework.test import APIClient

from entitlements.models import OperatingPoint

BASE = "/api/v1/catalogue"


@pytest.mark.parametrize("who", ["member", "teammate", "outsider", "approver", "operator"])
def test_every_person_reads_the_catalogue(client_for, who):
    client = client_for(who)
    for path in ("models", "regions", "accelerators", "operating-points"):
        response = client.get(f"{BASE}/{path}")
        assert response.status_code == 200, path
        assert response.json()["count"] == 1, path


def test_gateway_only_account_and_anonymous_are_refused(client_for):
    assert client_for("gateway").get(f"{BASE}/models").status_code == 403
    assert APIClient().get(f"{BASE}/models").status_code == 401


def test_model_and_region_by_slug_with_zones(client_for):
    client = client_for("member")
    model = client.get(f"{BASE}/models/llama-test").json()
    assert (model["slug"], model["w_out"], model["w_cached"], model["r_wt_per_s"]) == ("llama-test", 4.0, 0.0, 1000.0)
    region = client.get(f"{BASE}/regions/us-test").json()
    assert region == {"slug": "us-test", "name": "US test", "zones": ["us-test-a", "us-test-b"]}
    assert client.get(f"{BASE}/accelerators/h100-test").json()["memory_gb"] == 80.0
    assert client.get(f"{BASE}/regions/nowhere").status_code == 404


def test_operating_point_shows_goodput_and_the_formula_in_words(client_for):
    op = OperatingPoint.objects.get()
    body = client_for("member").get(f"{BASE}/operating-points/{op.pk}").json()
    # 10,000 tok/s × (4 + 300/100) / 1000 = 70 CU
    assert body["goodput_cu_per_replica"] == 70.0
    assert body["goodput_explained"] == (
        "70.00 CU per replica = 10,000 output tok/s × (4 + 300 / 100 prompt per output token) ÷ R 1,000 wt/s"
    )
    assert (body["model"], body["accelerator"], body["source"]) == ("llama-test", "h100-test", "https://example.org/op")


def test_operating_points_filter_by_model(client_for):
    client = client_for("member")
    assert client.get(f"{BASE}/operating-points?model=llama-test").json()["count"] == 1
    assert client.get(f"{BASE}/operating-points?model=other").json()["count"] == 0
