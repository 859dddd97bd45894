"""The gateway client's fleet sample: delivered is True only on the portal's 200; nothing listening is False."""

import socket

from admission.client import AdmissionClient


def test_a_fleet_sample_nobody_receives_is_reported_undelivered():
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = AdmissionClient(f"http://127.0.0.1:{port}", token="t")
    assert client.fleet_sample({"pool": "p", "ts": "2026-01-01T00:00:00Z"}) is False
