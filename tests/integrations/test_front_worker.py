"""integrations/envoy/front_worker.py's framing (issue 49.3), against the real worker process on its unix
socket, spoken to as the compiled front does: a stream opened with a request Headroom does not meter
(GET /v1/models) is answered by ext_proc.Processor itself (an empty CONTINUE, then END OK). A frame too
short for its header, one over --max-frame, a frame for a stream id never opened, an unknown type, bytes
that are no ProcessingRequest: each refused with a clear error naming what was wrong, and the next
frames on the same connection still served; a front that leaves mid-frame: the next connection served.
"""

from __future__ import annotations

import os
import socket
import stat
import struct

import pytest
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb

from integrations.envoy import front_worker as fw
from tests.integrations import envoy_front

WAIT_GUARD_S = 60  # a hang guard on a loaded machine, not a timing assertion
MAX = 1024


@pytest.fixture(scope="module")
def sock(tmp_path_factory):
    work = tmp_path_factory.mktemp("front_worker")
    path = work / "w.sock"
    w = envoy_front.Started(
        [*envoy_front.worker_cmd(path), "--max-frame", str(MAX)],
        env=envoy_front.worker_env({}),
        log=work / "worker.out",
        ready=lambda: envoy_front.accepts(str(path)),
    )
    try:
        yield path
    finally:
        w.stop()


def connect(path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(WAIT_GUARD_S)
    s.connect(str(path))
    return s


def read_frame(s: socket.socket) -> tuple[int, int, bytes]:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = s.recv(n - len(out))
            assert chunk, "the worker closed the connection"
            out += chunk
        return out

    length, sid, kind = fw.HEAD.unpack(exactly(fw.HEAD.size))
    return sid, kind, exactly(length - fw.HEAD_REST)


def models_request() -> bytes:
    headers = base_pb2.HeaderMap(headers=[base_pb2.HeaderValue(key=":path", raw_value=b"/v1/models"),
                                          base_pb2.HeaderValue(key=":method", raw_value=b"GET")])  # fmt: skip
    return pb.ProcessingRequest(request_headers=pb.HttpHeaders(headers=headers, end_of_stream=True)).SerializeToString()


def check_served(s: socket.socket, sid: int) -> None:
    """A stream opened and sent one message: the processor's CONTINUE, then END OK."""
    s.sendall(fw.frame(sid, fw.OPEN) + fw.frame(sid, fw.MSG, models_request()))
    got_sid, kind, data = read_frame(s)
    assert (got_sid, kind) == (sid, fw.WRITE)
    assert pb.ProcessingResponse.FromString(data).WhichOneof("response") == "request_headers"
    assert read_frame(s) == (sid, fw.END, b"\x00")


def test_a_stream_is_answered_by_the_processor_and_ended(sock):
    with connect(sock) as s:
        check_served(s, 1)
        check_served(s, 2)


def test_the_socket_is_the_owners_alone(sock):
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600


def test_a_frame_too_short_for_its_header_is_refused_and_the_next_served(sock):
    with connect(sock) as s:
        s.sendall(struct.pack("<I", 5) + b"12345")
        assert read_frame(s) == (0, fw.ERROR, b"truncated frame: length 5 < 9 (the stream id and type)")
        check_served(s, 7)


def test_an_oversized_frame_is_refused_unread_and_the_next_served(sock):
    with connect(sock) as s:
        # An open stream's oversized message: that stream ends RESOURCE_EXHAUSTED, naming the limit.
        s.sendall(fw.frame(3, fw.OPEN) + fw.frame(3, fw.MSG, b"x" * (2 * MAX)))
        sid, kind, data = read_frame(s)
        assert (sid, kind, data[0]) == (3, fw.END, fw.RESOURCE_EXHAUSTED)
        assert f"frame of {2 * MAX + 9} bytes over the {MAX}-byte limit (stream 3)" in data[1:].decode()
        # A stream the worker does not know: an ERROR frame; then the connection goes on.
        s.sendall(fw.frame(4, fw.MSG, b"y" * (3 * MAX)))
        sid, kind, data = read_frame(s)
        assert (sid, kind) == (4, fw.ERROR) and f"over the {MAX}-byte limit" in data.decode()
        check_served(s, 5)


def test_a_frame_for_an_unknown_stream_id_or_type_is_refused_and_the_next_served(sock):
    with connect(sock) as s:
        s.sendall(fw.frame(99, fw.MSG, models_request()))
        assert read_frame(s) == (99, fw.ERROR, b"unknown stream id 99 (never opened, or ended): frame type 2 ignored")
        s.sendall(fw.frame(98, 42))
        assert read_frame(s) == (98, fw.ERROR, b"unknown frame type 42 (stream 98)")
        s.sendall(fw.frame(1, fw.OPEN) + fw.frame(1, fw.OPEN))  # opened twice: the second refused
        assert read_frame(s) == (1, fw.ERROR, b"stream 1 is already open")
        s.sendall(fw.frame(1, fw.CANCEL))
        check_served(s, 2)


def test_bytes_that_are_no_processing_request_end_that_stream_and_the_next_is_served(sock):
    with connect(sock) as s:
        s.sendall(fw.frame(5, fw.OPEN) + fw.frame(5, fw.MSG, b"\xff\xff\xff"))
        sid, kind, data = read_frame(s)
        assert (sid, kind, data[0]) == (5, fw.END, fw.INVALID_ARGUMENT) and b"not a ProcessingRequest" in data
        check_served(s, 6)


def test_a_front_that_leaves_mid_frame_does_not_stop_the_worker(sock):
    with connect(sock) as s:
        s.sendall(fw.frame(1, fw.OPEN) + fw.frame(1, fw.MSG, models_request())[:7])
    with connect(sock) as s:
        check_served(s, 1)
