"""A real HTTP server on 127.0.0.1 (http.server in a thread) that answers webhook posts with a
scripted sequence of status codes and keeps what it received."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PORTS = range(8791, 8800)  # G's private ports


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    codes: list[int]
    received: list[Received] = field(default_factory=list)
    server: Any = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hook"


def start(codes: list[int]) -> Receiver:
    rec = Receiver(codes=list(codes))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            rec.received.append(Received(self.path, dict(self.headers.items()), body))
            code = rec.codes.pop(0) if rec.codes else 200
            self.send_response(code)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    last: OSError | None = None
    for port in PORTS:
        try:
            rec.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
            break
        except OSError as exc:  # another test of mine holds it
            last = exc
    else:
        raise RuntimeError(f"no free port in {PORTS}: {last}")
    threading.Thread(target=rec.server.serve_forever, daemon=True).start()
    return rec
