"""The gateway client's fail mode when the portal is unreachable (bench/admission.py drives it against gunicorn)."""

from __future__ import annotations

import json
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


class _Scripted(BaseHTTPRequestHandler):
    """Answers each reserve with the status and body the test sets; `drip_s` > 0 sends the body one byte at a
    time with that pause (each pause far below the client's timeout, the whole far above it)."""

    protocol_version = "HTTP/1.1"
    status, body, content_type, drip_s = 200, b"{}", "application/json", 0.0
    sent: list[int] = []

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        cls = type(self)
        self.send_response(cls.status)
        self.send_header("Content-Type", cls.content_type)
        self.send_header("Content-Length", str(len(cls.body)))
        self.end_headers()
        if not cls.drip_s:
            self.wfile.write(cls.body)
            return
        for i in range(len(cls.body)):
            try:
                self.wfile.write(cls.body[i : i + 1])
                self.wfile.flush()
            except OSError:  # the client gave up
                break
            cls.sent.append(i)
            threading.Event().wait(cls.drip_s)

    def log_message(self, *args):
        pass


def _scripted(status: int, body: bytes, *, content_type: str = "application/json", drip_s: float = 0.0):
    handler = type("H", (_Scripted,), {"status": status, "body": body, "content_type": content_type,
                                       "drip_s": drip_s, "sent": []})  # fmt: skip
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler


def test_a_5xx_error_page_that_is_not_json_still_applies_the_fail_mode():
    server, _ = _scripted(502, b"<html>bad gateway</html>", content_type="text/html")
    try:
        c = AdmissionClient(f"http://127.0.0.1:{server.server_address[1]}", "k", timeout_s=5)
        assert ask(c, "reserved", "p1")["source"] == "fail_open"
    finally:
        server.shutdown()


def test_a_refused_token_refuses_every_class_and_is_logged_once_a_minute(caplog):
    server, _ = _scripted(401, b'{"detail": "Invalid token."}')
    seen: list[dict] = []
    try:
        c = AdmissionClient(f"http://127.0.0.1:{server.server_address[1]}", "k", timeout_s=5, on_event=seen.append)
        for i, cls in enumerate(("reserved", "shared", "best_effort", "reserved")):
            d = ask(c, cls, f"t{i}")
            assert (d["decision"], d["reason"], d["gateway_status"]) == ("throttle", "GATEWAY_TOKEN_REFUSED", 503)
        assert seen == [{"event": "gateway_token_refused", "status": 401, "detail": "Invalid token."}] * 4
        assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 1
        c._logged_at["GATEWAY_TOKEN_REFUSED"] -= 61  # a minute later
        ask(c, "shared", "t9")
        assert len([r for r in caplog.records if r.levelname == "ERROR"]) == 2
    finally:
        server.shutdown()


def test_a_wrong_url_refuses_instead_of_failing_open():
    server, _ = _scripted(404, b"<html>not found</html>", content_type="text/html")
    try:
        c = AdmissionClient(f"http://127.0.0.1:{server.server_address[1]}/wrong", "k", timeout_s=5)
        d = ask(c, "reserved", "w1")
        assert (d["decision"], d["reason"]) == ("throttle", "GATEWAY_MISCONFIGURED") and "404" in d["message"]
    finally:
        server.shutdown()


def test_the_timeout_bounds_the_whole_call_not_each_read():
    # 400 bytes, one every 10 ms (4 s in all): no single read waits 0.5 s, the call may not wait for all.
    body = json.dumps({"decision": "throttle", "reason": "QUOTA_EXCEEDED", "pad": "x" * 340}).encode()
    server, handler = _scripted(429, body, drip_s=0.01)
    try:
        c = AdmissionClient(f"http://127.0.0.1:{server.server_address[1]}", "k", timeout_s=0.5)
        d = ask(c, "reserved", "d1")
        assert d["source"] == "fail_open"  # the answer never came whole in time: an outage, the fail mode
        assert len(handler.sent) < len(body)
    finally:
        server.shutdown()


def test_a_spilled_answer_names_its_pool_in_a_header_for_the_gateway():
    from integrations import headroom_admission as ha

    assert ha.quota_headers({"decision": "admit", "served_from": "pool-b"})["x-headroom-served-from"] == "pool-b"
    assert "x-headroom-served-from" not in ha.quota_headers({"decision": "admit", "source": "entitlement"})
