"""Serving integrations/envoy/ext_proc.py's processor: grpcio's asyncio server on uvloop, one process
(one event loop, one GIL) per core when asked.

    python -m integrations.envoy.ext_proc --port 50051 [--health-port 50052] [--processes N]

`--processes N` (or HEADROOM_EXT_PROC_PROCESSES; 0: one per core) starts N processes serving ports
PORT … PORT+N-1 (health ports likewise), each a whole ext_proc of its own: Envoy balances its streams over
them when its `headroom_ext_proc` cluster lists every port (`python -m integrations.envoy.config
--ext-proc host:PORT --ext-procs N`). A stream is one request: nothing is shared between processes but
the admission store, which is shared anyway. One process (the default) serves in this process; with
several, this process only supervises: SIGTERM / SIGINT are passed on, and when one server exits the
others are stopped (an orchestrator restarts the whole, as it would one process).

Why processes, not threads: grpcio's per-message Python (parsing, the servicer's generator, the
answer) holds the GIL, so a second core only helps as a second interpreter.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc

from integrations.envoy.ext_proc import Config, Processor

log = logging.getLogger("headroom.envoy")

# One Envoy sends every request's stream over one HTTP/2 connection, small messages each: no
# bandwidth-delay probing (a ping beside data frames), many streams at once, latency over throughput.
# Measured against grpcio's defaults, interleaved A/B at 8 clients: 1.04, 1.24, 1.14 × requests/s.
SERVER_OPTIONS = [("grpc.so_reuseport", 0), ("grpc.http2.bdp_probe", 0), ("grpc.max_concurrent_streams", 1000),
                  ("grpc.optimization_target", "latency"), ("grpc.http2.max_pings_without_data", 0)]  # fmt: skip


async def health_server(host: str, port: int) -> asyncio.AbstractServer:
    """`GET /health` → 200: a plain-HTTP probe beside the gRPC port (for orchestrators and tests)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port)


async def serve(host: str, port: int, config: Config, *, health_port: int | None = None) -> None:
    processor = Processor(config)
    server = grpc.aio.server(options=SERVER_OPTIONS)
    pb_grpc.add_ExternalProcessorServicer_to_server(processor, server)
    if server.add_insecure_port(f"{host}:{port}") == 0:
        raise SystemExit(f"cannot listen on {host}:{port}")
    await asyncio.get_running_loop().run_in_executor(None, processor.warm)
    # What is built by now (modules, the snapshot, the config) lives as long as the process: out of the
    # collector's walks (gc.freeze), and generation 0 collected every 20,000 allocations, not 700: a
    # request allocates a few hundred objects, so the collector ran every few requests, on a request.
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)
    await server.start()
    health = await health_server(host, health_port) if health_port else None
    log.warning("Headroom ext_proc listening on %s:%s (%s mode, %s)", host, port,
                "library" if os.environ.get("HEADROOM_REDIS_URL") else "HTTP", loop_name())  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if health is not None:
        health.close()
    await server.stop(grace=5)
    processor.close()


def loop_name() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


def run(main: Coroutine[Any, Any, None]) -> None:
    """`main` on uvloop (libuv's event loop: the loop's own share of each message is smaller) when it
    is installed, else on asyncio's."""
    try:
        import uvloop
    except ImportError:  # optional: the processor's logic is the same on either loop
        asyncio.run(main)
        return
    uvloop.run(main)


def processes(value: str | int | None) -> int:
    n = int(value or 1)
    if n < 0:
        raise ValueError("--processes: a whole number ≥ 0 (0: one per core)")
    return n or os.cpu_count() or 1


def supervise(children: list[int]) -> int:
    """Wait for the servers; a signal is passed on to all, and the first to exit stops the others."""

    def forward(sig: int, _frame: Any) -> None:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):  # already gone
                os.kill(pid, sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    status = 0
    left = set(children)
    while left:
        pid, code = os.wait()
        if pid not in left:
            continue
        left.discard(pid)
        status = status or os.waitstatus_to_exitcode(code)
        forward(signal.SIGTERM, None)  # one server gone: the rest follow (the orchestrator restarts the whole)
    return status


def main() -> None:
    ap = argparse.ArgumentParser(description="Headroom admission as an Envoy external processor (ext_proc)")
    ap.add_argument("--host", default=os.environ.get("HEADROOM_EXT_PROC_HOST", "127.0.0.1"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("HEADROOM_EXT_PROC_PORT", "50051")))
    ap.add_argument("--health-port", type=int, default=None)
    ap.add_argument("--config", default=os.environ.get("HEADROOM_EXT_PROC_CONFIG"))
    ap.add_argument("--processes", default=os.environ.get("HEADROOM_EXT_PROC_PROCESSES", "1"),
                    help="servers on PORT … PORT+N-1, one process (event loop) each; 0: one per core")  # fmt: skip
    args = ap.parse_args()
    logging.basicConfig(level=os.environ.get("HEADROOM_LOG_LEVEL", "WARNING"))
    try:
        n = processes(args.processes)
    except ValueError as exc:
        ap.error(str(exc))
    config = Config.load(args.config)
    if n == 1:
        run(serve(args.host, args.port, config, health_port=args.health_port))
        return
    children = []
    for i in range(n):  # forked before any gRPC or event loop exists in this process
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                health = args.health_port + i if args.health_port else None
                run(serve(args.host, args.port + i, config, health_port=health))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001 - reported, then this server's exit tells the supervisor
                log.exception("Headroom ext_proc on port %s failed", args.port + i)
                code = 1
            os._exit(code)
        children.append(pid)
    sys.exit(supervise(children))
