"""integrations/envoy/envoy.yaml for a given set of addresses (the tests and the bench run that very
file): the model server, the ext_proc, the listener and the admin ports rewritten; optionally a
second listener, the same but without the ext_proc filters (a negative control, the bench's baseline).

    python -m integrations.envoy.config --upstream 127.0.0.1:8000 --ext-proc 127.0.0.1:50051 > envoy.yaml
    python -m integrations.envoy.config --upstream 127.0.0.1:8000 --ext-proc 127.0.0.1:50051 --ext-procs 2 > envoy.yaml
      (the ext_proc started with --processes 2: one endpoint per process, Envoy balances the streams)
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

import yaml

EXAMPLE = Path(__file__).with_name("envoy.yaml")
EXT_PROC = "envoy.filters.http.ext_proc"  # the reserve's filter
OBSERVER = "headroom.observer"  # the observability-mode ext_proc that settles (integrations/envoy/observe.py)


def _addr(host: str, port: int) -> dict[str, Any]:
    return {"socket_address": {"address": host, "port_value": port}}


def _hcm(listener: dict[str, Any]) -> dict[str, Any]:
    return listener["filter_chains"][0]["filters"][0]["typed_config"]


def render(*, upstream: tuple[str, int], ext_proc: tuple[str, int] | list[tuple[str, int]], listen: tuple[str, int],
           admin: tuple[str, int], without: tuple[str, int] | None = None,
           message_timeout: str | None = None) -> dict[str, Any]:  # fmt: skip
    """The example configuration with these addresses (`ext_proc`: one, or a list of several processes);
    `without`: a second listener lacking the filter;
    `message_timeout`: the ext_proc's wait for one answer (the tests' hang guard on a loaded machine)."""
    conf = yaml.safe_load(EXAMPLE.read_text())
    res = conf["static_resources"]
    clusters = {c["name"]: c for c in res["clusters"]}
    for name, addrs in (("model_server", [upstream]), ("headroom_ext_proc", ext_proc)):
        c = clusters[name]
        c["type"] = "STATIC"
        addrs = addrs if isinstance(addrs, list) else [addrs]  # several ext_procs: one endpoint each (one per core)
        c["load_assignment"]["endpoints"][0]["lb_endpoints"] = [{"endpoint": {"address": _addr(*a)}} for a in addrs]
    (listener,) = res["listeners"]
    listener["address"] = _addr(*listen)
    if message_timeout is not None:
        (ext,) = [f for f in _hcm(listener)["http_filters"] if f["name"] == EXT_PROC]
        ext["typed_config"]["message_timeout"] = message_timeout
    if without is not None:
        bare = copy.deepcopy(listener)
        bare["name"], bare["address"] = "llm_without_headroom", _addr(*without)
        hcm = _hcm(bare)
        hcm["stat_prefix"] = "llm_without_headroom"
        hcm["http_filters"] = [f for f in hcm["http_filters"] if f["name"] not in (EXT_PROC, OBSERVER)]
        res["listeners"].append(bare)
    conf["admin"]["address"] = _addr(*admin)
    return conf


def dump(conf: dict[str, Any]) -> str:
    return yaml.safe_dump(conf, sort_keys=False)


def _hp(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    return host or "127.0.0.1", int(port)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True, type=_hp)
    ap.add_argument("--ext-proc", default="127.0.0.1:50051", type=_hp)
    ap.add_argument("--ext-procs", type=int, default=1,
                    help="the ext_proc's --processes: N servers on the port and the N-1 after it")  # fmt: skip
    ap.add_argument("--listen", default="0.0.0.0:10000", type=_hp)
    ap.add_argument("--admin", default="127.0.0.1:9901", type=_hp)
    ap.add_argument("--without", type=_hp, help="also a listener without the ext_proc filter")
    a = ap.parse_args()
    host, port = a.ext_proc
    procs = [(host, port + i) for i in range(max(1, a.ext_procs))]
    print(dump(render(upstream=a.upstream, ext_proc=procs, listen=a.listen, admin=a.admin, without=a.without)))


if __name__ == "__main__":
    main()
