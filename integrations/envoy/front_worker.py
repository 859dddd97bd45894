"""The decision worker behind the compiled ext_proc front (issue 49.3; integrations/envoy/front/front.cc).

The front is Envoy's gRPC server for the reserve filter: it only moves bytes. Each Process stream's
messages reach this worker over a unix socket as serialized ProcessingRequests; here they are parsed
with the same protobuf classes and handed to the very coroutine the Python ext_proc runs
(`ext_proc.Processor.Process`, through a stream object with its `read` / `write` /
`invocation_metadata`), so every rule (the reserve, the refusals, the throttle's 429, the reply's
metadata) is the Python ext_proc's, in one module. What the front saves is grpcio's per-stream work.

    PYTHONPATH=/path/to/headroom python -m integrations.envoy.front_worker --socket /run/headroom/w.sock \
        [--processes N]   (N workers on w.sock.0 … w.sock.N-1; pass all of them to the front)

Frames, both ways (front.cc says the same): u32 length of the rest, u64 stream id, u8 type, data.
Front → worker: OPEN (data: the stream's x-headroom-layout), MSG (a ProcessingRequest), HALF_CLOSE,
CANCEL. Worker → front: WRITE (a ProcessingResponse), END (u8 gRPC status code + message), ERROR (a
frame refused, with why: a frame too short for its header, one over `max_frame`, an unknown stream id
or type; the connection goes on with the next frame). The socket is made owner-only (0600): only this
user's processes (the front) may call it. Settings (mode, config file) as the Python ext_proc's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import stat
import struct
import sys
from collections import deque
from typing import Any

from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from grpc.aio import EOF

from integrations.envoy import server as ext_server
from integrations.envoy.ext_proc import LAYOUT, Config, Processor

log = logging.getLogger("headroom.envoy")

LEN = struct.Struct("<I")
HEAD = struct.Struct("<IQB")  # length of the rest, stream id, type
HEAD_REST = HEAD.size - LEN.size  # 9: the id and type a length must at least cover
OPEN, MSG, HALF_CLOSE, CANCEL, WRITE, END, ERROR = 1, 2, 3, 4, 5, 6, 7
MAX_FRAME = 16 << 20  # Envoy's messages reach the front under gRPC's 4 MiB limit: room to spare
UNAVAILABLE, RESOURCE_EXHAUSTED, INVALID_ARGUMENT, INTERNAL = 14, 8, 3, 13


def frame(sid: int, kind: int, data: bytes = b"") -> bytes:
    return HEAD.pack(HEAD_REST + len(data), sid, kind) + data


class Stream:
    """One Process stream, as ext_proc.Processor.Process reads, writes and inspects a grpc.aio one."""

    __slots__ = ("sid", "conn", "meta", "inbox", "waiter", "task")

    def __init__(self, sid: int, conn: Connection, layout: bytes) -> None:
        self.sid, self.conn = sid, conn
        self.meta = ((LAYOUT, layout.decode("utf-8", "replace")),) if layout else ()
        self.inbox: deque[Any] = deque()
        self.waiter: asyncio.Future[None] | None = None
        self.task: asyncio.Task[None] | None = None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.meta

    def put(self, item: Any) -> None:
        self.inbox.append(item)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def read(self) -> Any:
        while not self.inbox:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        return self.inbox.popleft()

    async def write(self, resp: pb.ProcessingResponse) -> None:
        self.conn.send(frame(self.sid, WRITE, resp.SerializeToString()))


class Connection(asyncio.Protocol):
    """One front's connection: frames parsed as they come, each stream a task running Processor.Process."""

    def __init__(self, processor: Processor, *, max_frame: int = MAX_FRAME) -> None:
        self.processor, self.max_frame = processor, max_frame
        self.streams: dict[int, Stream] = {}
        self.buf = bytearray()
        self.skip = 0  # bytes left of a refused oversized frame
        self.out: list[bytes] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.buf or self.skip:
            log.warning("Headroom front worker: the front left mid-frame (%d bytes unread)", len(self.buf) + self.skip)
        for st in list(self.streams.values()):
            if st.task is not None:
                st.task.cancel()  # as grpc.aio cancels a stream whose peer is gone
        self.streams.clear()
        self.transport = None

    # Answers made in one turn of the loop (a WRITE and its END) leave in one write.
    def send(self, data: bytes) -> None:
        if not self.out:
            asyncio.get_running_loop().call_soon(self.flush)
        self.out.append(data)

    def flush(self) -> None:
        if self.transport is not None and self.out:
            self.transport.write(b"".join(self.out))
        self.out.clear()

    def refuse(self, sid: int, why: str) -> None:
        log.warning("Headroom front worker: %s", why)
        self.send(frame(sid, ERROR, why.encode()))

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, end = 0, len(buf)
        while pos < end:
            if self.skip:  # the rest of an oversized frame: dropped as it comes, never held
                n = min(self.skip, end - pos)
                pos += n
                self.skip -= n
                continue
            if end - pos < LEN.size:
                break
            (length,) = LEN.unpack_from(buf, pos)
            if length < HEAD_REST:  # too short to name its stream: refused whole, once it is all here
                if end - pos < LEN.size + length:
                    break
                self.refuse(0, f"truncated frame: length {length} < {HEAD_REST} (the stream id and type)")
                pos += LEN.size + length
                continue
            if end - pos < HEAD.size:
                break
            _, sid, kind = HEAD.unpack_from(buf, pos)
            if length > self.max_frame:
                self.oversized(sid, length)
                self.skip = length - HEAD_REST
                pos += HEAD.size
                continue
            if end - pos < LEN.size + length:
                break
            self.dispatch(sid, kind, bytes(buf[pos + HEAD.size : pos + LEN.size + length]))
            pos += LEN.size + length
        del buf[:pos]

    def oversized(self, sid: int, length: int) -> None:
        why = f"frame of {length} bytes over the {self.max_frame}-byte limit (stream {sid}): skipped"
        st = self.streams.pop(sid, None)
        if st is None:
            self.refuse(sid, why)
            return
        log.warning("Headroom front worker: %s", why)
        if st.task is not None:
            st.task.cancel()
        self.send(frame(sid, END, bytes([RESOURCE_EXHAUSTED]) + why.encode()))

    def dispatch(self, sid: int, kind: int, data: bytes) -> None:
        if kind == OPEN:
            if sid in self.streams:
                self.refuse(sid, f"stream {sid} is already open")
                return
            st = self.streams[sid] = Stream(sid, self, data)
            st.task = asyncio.get_running_loop().create_task(self.run(st))
            return
        st = self.streams.get(sid)
        if kind == CANCEL:
            if st is not None and st.task is not None:  # else: it ended meanwhile
                del self.streams[sid]
                st.task.cancel()
            return
        if kind not in (MSG, HALF_CLOSE):
            self.refuse(sid, f"unknown frame type {kind} (stream {sid})")
        elif st is None:
            self.refuse(sid, f"unknown stream id {sid} (never opened, or ended): frame type {kind} ignored")
        elif kind == HALF_CLOSE:
            st.put(EOF)
        else:
            try:
                st.put(pb.ProcessingRequest.FromString(data))
            except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError: the stream is refused, not the worker
                self.streams.pop(sid, None)
                if st.task is not None:
                    st.task.cancel()
                self.send(frame(sid, END, bytes([INVALID_ARGUMENT]) + f"not a ProcessingRequest: {exc}".encode()))

    async def run(self, st: Stream) -> None:
        try:
            await self.processor.Process(None, st)
        except asyncio.CancelledError:
            return  # the front cancelled it (or went away): nothing to answer
        except Exception:
            log.exception("Headroom front worker: stream %s failed", st.sid)
            self.send(frame(st.sid, END, bytes([INTERNAL]) + b"Headroom front worker: the processor failed"))
        else:
            self.send(frame(st.sid, END, b"\x00"))
        finally:
            if self.streams.get(st.sid) is st:
                del self.streams[st.sid]


def _clear_stale(path: str) -> None:
    """A socket left by a worker that died is removed; any other file at `path` is an error."""
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise SystemExit(f"{path} exists and is not a socket")
        os.unlink(path)


async def listen(path: str, processor: Processor, *, max_frame: int = MAX_FRAME) -> asyncio.AbstractServer:
    """The worker's socket at `path`, owner-only from its creation (umask), for the front."""
    _clear_stale(path)
    old = os.umask(0o177)
    try:
        return await asyncio.get_running_loop().create_unix_server(
            lambda: Connection(processor, max_frame=max_frame), path
        )
    finally:
        os.umask(old)


async def serve(path: str, config: Config, *, max_frame: int = MAX_FRAME) -> None:
    processor = Processor(config)
    await asyncio.get_running_loop().run_in_executor(None, processor.warm)
    gc.collect()  # as integrations/envoy/server.py does: what lives as long as the process, out of the walks
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)
    server = await listen(path, processor, max_frame=max_frame)
    log.warning("Headroom front worker on %s (%s mode, %s)", path,
                "library" if os.environ.get("HEADROOM_REDIS_URL") else "HTTP", ext_server.loop_name())  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    processor.close()


def main() -> None:
    ap = argparse.ArgumentParser(description="Headroom's decision worker behind the compiled ext_proc front")
    ap.add_argument("--socket", required=True, help="the unix socket the front connects to")
    ap.add_argument("--config", default=os.environ.get("HEADROOM_EXT_PROC_CONFIG"))
    ap.add_argument("--processes", default="1", help="N workers on SOCKET.0 … SOCKET.N-1; 0: one per core")
    ap.add_argument("--max-frame", type=int, default=MAX_FRAME, help="a longer frame from the front is refused")
    args = ap.parse_args()
    logging.basicConfig(level=os.environ.get("HEADROOM_LOG_LEVEL", "WARNING"))
    try:
        n = ext_server.processes(args.processes)
    except ValueError as exc:
        ap.error(str(exc))
    config = Config.load(args.config)
    if n == 1:
        ext_server.run(serve(args.socket, config, max_frame=args.max_frame))
        return
    children = []
    for i in range(n):  # forked before any event loop exists in this process
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                ext_server.run(serve(f"{args.socket}.{i}", config, max_frame=args.max_frame))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001 - reported, then this worker's exit tells the supervisor
                log.exception("Headroom front worker %s failed", i)
                code = 1
            os._exit(code)
        children.append(pid)
    sys.exit(ext_server.supervise(children))


if __name__ == "__main__":
    main()
