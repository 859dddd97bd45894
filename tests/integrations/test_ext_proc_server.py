"""integrations/envoy/server.py: the ext_proc on uvloop, `--processes N` serving ports PORT … PORT+N-1,
each a process of its own (one event loop per core), stopped together; and config.py's `--ext-procs N`,
which lists those ports for Envoy. The processes answer a real gRPC stream (a request Headroom does not
meter passes with an empty CONTINUE), no Envoy needed. The negative control: one process serves one port.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import grpc
import pytest
import yaml
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc

from tests.integrations import stack

WAIT_GUARD_S = 60  # a hang guard on a loaded machine, not a timing assertion


def _free_run(n: int) -> int:
    """A port p with p … p+n-1 all free."""
    for _ in range(200):
        p = stack.free_port()
        if p + n >= 65536:
            continue
        socks = []
        try:
            for k in range(n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p + k))
            return p
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no run of free ports")


def _passes(port: int) -> bool:
    """A GET /models stream on the ext_proc at `port`: its request headers answered with CONTINUE."""
    headers = base_pb2.HeaderMap(headers=[base_pb2.HeaderValue(key=":path", raw_value=b"/v1/models"),
                                          base_pb2.HeaderValue(key=":method", raw_value=b"GET")])  # fmt: skip
    msg = pb.ProcessingRequest(request_headers=pb.HttpHeaders(headers=headers, end_of_stream=True))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            (answer,) = list(pb_grpc.ExternalProcessorStub(channel).Process(iter([msg]), timeout=WAIT_GUARD_S))
        except grpc.RpcError:
            return False
    return answer.WhichOneof("response") == "request_headers"


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:  # noqa: S310 - loopback
            return r.status == 200
    except OSError:
        return False


def _start(tmp_path, processes: int) -> tuple[stack.Proc, int, int]:
    port, health = _free_run(processes + 1), _free_run(processes + 1)
    env = stack.child_env(PYTHONPATH=str(stack.ROOT), HEADROOM_URL="http://127.0.0.1:9", HEADROOM_GATEWAY_TOKEN="t",
                          HEADROOM_REGION="tiny-region")  # fmt: skip
    proc = stack.Proc([sys.executable, "-m", "integrations.envoy.ext_proc", "--port", str(port), "--health-port",
                       str(health), "--processes", str(processes)], env=env, port=health, probe="/health",
                      log=tmp_path / f"ext_proc_{processes}.out")  # fmt: skip
    return proc, port, health


def test_processes_serve_consecutive_ports_each_on_its_own_event_loop_and_a_sigterm_stops_all(tmp_path):
    proc, port, health = _start(tmp_path, 2)
    try:
        for k in range(2):
            deadline = time.monotonic() + WAIT_GUARD_S
            while not _healthy(health + k):  # the second server may start a moment after the first
                assert time.monotonic() < deadline, proc.tail()
                time.sleep(0.1)  # polled: the next try
            assert _passes(port + k), proc.tail()
        log = (tmp_path / "ext_proc_2.out").read_text()
        assert log.count("(HTTP mode, uvloop)") == 2, log  # two servers, both on uvloop
        assert not _passes(port + 2)  # two, not more
        os.kill(proc.proc.pid, signal.SIGTERM)  # the supervisor alone: it passes the signal on
        assert proc.proc.wait(timeout=WAIT_GUARD_S) == 0, proc.tail()  # both servers ended cleanly
        assert not _healthy(health) and not _healthy(health + 1) and not _passes(port + 1)
    finally:
        proc.stop()


def test_negative_control_one_process_serves_one_port(tmp_path):
    proc, port, health = _start(tmp_path, 1)
    try:
        assert _passes(port)
        assert not _passes(port + 1) and not _healthy(health + 1)
    finally:
        proc.stop()


@pytest.mark.parametrize("n", [1, 3])
def test_config_lists_every_process_port_for_envoy(n):
    out = subprocess.run([sys.executable, "-m", "integrations.envoy.config", "--upstream", "127.0.0.1:8000",
                          "--ext-proc", "127.0.0.1:50051", "--ext-procs", str(n)], capture_output=True, text=True,
                         check=True, cwd=stack.ROOT).stdout  # fmt: skip
    (cluster,) = [c for c in yaml.safe_load(out)["static_resources"]["clusters"] if c["name"] == "headroom_ext_proc"]
    ports = [e["endpoint"]["address"]["socket_address"]["port_value"]
             for e in cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]]  # fmt: skip
    assert ports == [50051 + k for k in range(n)]
