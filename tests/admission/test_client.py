"""The gateway client's fail mode when the portal is unreachable (bench/admission.py drives it against gunicorn)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from admission.client import AdmissionClient
from tests.servers import free_port


def ask(c: AdmissionClient, cls: str, rid: str, tenant: str = "acme") -> dict:
    return c.reserve(request_id=rid, tenant=tenant, model="llama-test", region="tiny-region", traffic_class=cls,
                     prompt_tokens=200, max_output_tokens=200)  # fmt: skip


def test_unreachable_portal_fails_open_for_guaranteed_and_closed_for_best_effort():
    c = AdmissionClient(f"http://127.0.0.1:{free_port()}", "k", timeout_s=0.2)
    for cls in ("reserved", "shared"):
        d = ask(c, cls, f"u-{cls}")
        assert (d["decision"], d["source"]) == ("admit", "fail_open")
        assert c.complete(d["reservation_id"], prompt_tokens=1, output_tokens=1) is None
    assert ask(c, "best_effort", "u-be") == {"decision": "throttle", "reason": "ADMISSION_UNAVAILABLE",
                                             "responsible": "platform", "retry_after_s": 5}  # fmt: skip


class _Broken(BaseHTTPRequestHandler):
    """A portal whose store is down and that answers 503 to everything; keeps connections alive."""

    protocol_version = "HTTP/1.1"
    seen: list[str] = []

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        _Broken.seen.append(self.path)
        body = b'{"error": {"code": "ADMISSION_UNAVAILABLE"}}'
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_5xx_answers_apply_the_fail_mode_over_one_kept_alive_connection():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        c = AdmissionClient(f"http://127.0.0.1:{server.server_address[1]}", "k", timeout_s=5)
        assert ask(c, "shared", "x1")["source"] == "fail_open"
        assert ask(c, "best_effort", "x2")["reason"] == "ADMISSION_UNAVAILABLE"
        assert _Broken.seen == ["/api/v1/admission/reserve"] * 2
    finally:
        server.shutdown()
