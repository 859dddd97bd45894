"""integrations/envoy/envoy.yaml for a given set of addresses (the tests and the bench run that very
file): the model server, the ext_proc, the listener and the admin ports rewritten; optionally a
second listener, the same but without the ext_proc filters (a negative control, the bench's baseline).

    python -m integrations.envoy.config --upstream 127.0.0.1:8000 --ext-proc 127.0.0.1:50051 > envoy.yaml
    python -m integrations.envoy.config --upstream 127.0.0.1:8000 --ext-proc 127.0.0.1:50051 --ext-procs 2 > envoy.yaml
      (the ext_proc started with --processes 2: one endpoint per process, Envoy balances the streams)
    python -m integrations.envoy.config --layout observer … (envoy-observer.yaml: the two-filter layout)
    python -m integrations.envoy.config --layout front --ext-proc 127.0.0.1:50051 --observer 127.0.0.1:50061 …
      (envoy-observer.yaml with the reserve's filter on the compiled front, integrations/envoy/front/,
      and the observer's on the Python ext_proc)
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

import yaml

EXAMPLE = Path(__file__).with_name("envoy.yaml")  # one ext_proc stream a request (the default)
OBSERVER_EXAMPLE = Path(__file__).with_name("envoy-observer.yaml")  # the reserve's stream + the observer's
# "front": envoy-observer.yaml whose reserve filter calls the compiled front (its cluster headroom_ext_proc)
# and whose observer calls the Python ext_proc (OBSERVER_CLUSTER): `observer` is required.
LAYOUTS = {"inline": EXAMPLE, "observer": OBSERVER_EXAMPLE, "front": OBSERVER_EXAMPLE}
EXT_PROC = "envoy.filters.http.ext_proc"  # the reserve's filter
OBSERVER = "headroom.observer"  # the observability-mode ext_proc that settles (integrations/envoy/observe.py)
OBSERVER_CLUSTER = "headroom_observer"  # only with render(observer=…): the observer's own processes


def _addr(host: str, port: int) -> dict[str, Any]:
    return {"socket_address": {"address": host, "port_value": port}}


def _hcm(listener: dict[str, Any]) -> dict[str, Any]:
    return listener["filter_chains"][0]["filters"][0]["typed_config"]


def render(*, upstream: tuple[str, int], ext_proc: tuple[str, int] | list[tuple[str, int]], listen: tuple[str, int],
           admin: tuple[str, int], without: tuple[str, int] | None = None, message_timeout: str | None = None,
           observer: list[tuple[str, int]] | None = None, layout: str = "inline") -> dict[str, Any]:  # fmt: skip
    """The example configuration with these addresses (`ext_proc`: one, or a list of several processes);
    `without`: a second listener lacking the filters;
    `message_timeout`: the ext_proc's wait for one answer (the tests' hang guard on a loaded machine);
    `layout`: "inline" (envoy.yaml), "observer" (envoy-observer.yaml) or "front" (envoy-observer.yaml,
    `ext_proc` the compiled front); `observer` (those two only): ext_proc processes of their own for the
    observer filter's streams (cluster `headroom_observer`; default, observer layout only: the reserve's)."""
    if observer and layout == "inline":
        raise ValueError("observer processes need layout='observer' or 'front'")
    if layout == "front" and not observer:
        raise ValueError("layout='front' needs observer: the Python ext_proc that settles (the front only reserves)")
    conf = yaml.safe_load(LAYOUTS[layout].read_text())
    res = conf["static_resources"]
    clusters = {c["name"]: c for c in res["clusters"]}
    if observer:
        extra = copy.deepcopy(clusters["headroom_ext_proc"])
        extra["name"] = extra["load_assignment"]["cluster_name"] = OBSERVER_CLUSTER
        res["clusters"].append(extra)
        clusters[OBSERVER_CLUSTER] = extra
        (obs,) = [f for f in _hcm(res["listeners"][0])["http_filters"] if f["name"] == OBSERVER]
        obs["typed_config"]["grpc_service"]["envoy_grpc"]["cluster_name"] = OBSERVER_CLUSTER
    sets = {"model_server": [upstream], "headroom_ext_proc": ext_proc if isinstance(ext_proc, list) else [ext_proc],
            OBSERVER_CLUSTER: observer or []}  # fmt: skip
    for name, addrs in sets.items():
        if name not in clusters:
            continue
        c = clusters[name]
        c["type"] = "STATIC"  # several ext_procs: one endpoint each (one per core)
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
    ap.add_argument(
        "--layout",
        choices=sorted(LAYOUTS),
        default="inline",
        help="inline: envoy.yaml (one ext_proc stream a request); observer: envoy-observer.yaml; "
        "front: envoy-observer.yaml, --ext-proc the compiled front, --observer the Python ext_proc",
    )
    ap.add_argument("--observer", type=_hp, help="the observer filter's ext_proc, when not the reserve's")
    ap.add_argument("--observers", type=int, default=1, help="its --processes: N ports from --observer on")
    ap.add_argument("--listen", default="0.0.0.0:10000", type=_hp)
    ap.add_argument("--admin", default="127.0.0.1:9901", type=_hp)
    ap.add_argument("--without", type=_hp, help="also a listener without the ext_proc filter")
    a = ap.parse_args()
    if a.layout == "front" and not a.observer:
        ap.error("--layout front needs --observer: the Python ext_proc that settles")
    host, port = a.ext_proc
    procs = [(host, port + i) for i in range(max(1, a.ext_procs))]
    obs = [(a.observer[0], a.observer[1] + i) for i in range(max(1, a.observers))] if a.observer else None
    print(dump(render(upstream=a.upstream, ext_proc=procs, listen=a.listen, admin=a.admin, without=a.without,
                      observer=obs, layout=a.layout)))  # fmt: skip


if __name__ == "__main__":
    main()
