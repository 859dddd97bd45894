"""A CEILING PROBE, NOT HEADROOM: a Python ext_proc that does nothing, the twin of noop.cc.

The same gRPC server as integrations/envoy/ext_proc.py (grpcio's asyncio server, its SERVER_OPTIONS,
its /health probe, protobuf messages parsed and built), answering every message with the matching
empty CONTINUE at once: what grpcio alone costs per request, without Headroom's logic or Redis.

    PYTHONPATH=. python -m bench.ext_proc_noop.noop --port 50051 --health-port 50052
"""

from __future__ import annotations

import argparse
from typing import Any

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc

from integrations.envoy import ext_proc
from integrations.envoy import server as headroom_server

ANSWER = {
    "request_headers": ext_proc.CONTINUE_REQ_HEADERS,
    "request_body": ext_proc.CONTINUE_REQ_BODY,
    "response_headers": ext_proc.CONTINUE_RESP_HEADERS,
    "response_body": ext_proc.CONTINUE_RESP_BODY,
    "request_trailers": ext_proc.CONTINUE_REQ_TRAILERS,
    "response_trailers": ext_proc.CONTINUE_RESP_TRAILERS,
}


class Noop(pb_grpc.ExternalProcessorServicer):
    async def Process(self, request_iterator: Any, context: Any) -> Any:  # noqa: N802 - the gRPC method's name
        async for req in request_iterator:
            yield ANSWER[req.WhichOneof("request")]


async def serve(port: int, health_port: int) -> None:
    server = grpc.aio.server(options=headroom_server.SERVER_OPTIONS)
    pb_grpc.add_ExternalProcessorServicer_to_server(Noop(), server)
    if server.add_insecure_port(f"127.0.0.1:{port}") == 0:
        raise SystemExit(f"cannot listen on 127.0.0.1:{port}")
    await server.start()
    await headroom_server.health_server("127.0.0.1", health_port)
    await server.wait_for_termination()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--health-port", type=int, required=True)
    a = ap.parse_args()
    headroom_server.run(serve(a.port, a.health_port))  # the same loop as Headroom's (uvloop when installed)


if __name__ == "__main__":
    main()
