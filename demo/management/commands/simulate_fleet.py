"""`manage.py simulate_fleet`: replay the Azure trace through the admission API so live views move."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from capacity.traces import parse_trace
from demo.fleet_data import GRANTS
from demo.simulator import FleetSimulator, PoolState, SimConfig
from entitlements.models import ApiToken, Pool


class Command(BaseCommand):
    help = "Replay a trace (time-scaled) through /api/v1/admission, posting completions and fleet samples."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")
        parser.add_argument("--trace", default=str(Path(settings.DATA_DIR) / "azure_llm_2023_conv.csv"))
        parser.add_argument("--gateway-user", default="demo-gateway")
        parser.add_argument("--load", type=float, default=0.8, help="offered load as a fraction of entitled rate")
        parser.add_argument("--spike-at-minute", type=float, default=None)
        parser.add_argument("--spike-factor", type=float, default=3.0)
        parser.add_argument("--zone-failure-at-minute", type=float, default=None)
        parser.add_argument(
            "--overdrive", type=float, default=1.0, help="scales demo.fleet's overdrive (0: no entitlement driven)"
        )
        parser.add_argument("--max-rps", type=float, default=25.0, help="cap on reserve calls per second")
        parser.add_argument("--minutes", type=float, default=None, help="stop after this many trace minutes")
        parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the server to answer")

    def handle(self, *args: Any, **opts: Any) -> None:
        path = Path(opts["trace"])
        if not path.exists():
            raise CommandError(f"--trace: {path} does not exist")
        trace = parse_trace(path.read_bytes())
        user = get_user_model().objects.filter(username=opts["gateway_user"]).first()
        if user is None:
            raise CommandError(f"--gateway-user: no user {opts['gateway_user']} (run manage.py load_demo)")
        # One live simulator token at a time: earlier runs' tokens are revoked, not piled up.
        ApiToken.objects.filter(user=user, name="simulator", revoked_at__isnull=True).update(revoked_at=timezone.now())
        _, key = ApiToken.issue(user, name="simulator")
        from entitlements.api.snapshot import build_snapshot

        snap = build_snapshot()
        pools = [
            PoolState(slug=p.slug, zones=[z.replicas for z in p.zones.all()], rate_wt_per_s=0.0)
            for p in Pool.objects.prefetch_related("zones")
        ]
        ops = {
            p.slug: (
                (p.operating_point.measured_ttft_p99_ms or 500) / 1000 / 2,
                (p.operating_point.measured_tpot_p99_ms or 50) / 1000 / 2,
            )
            for p in Pool.objects.select_related("operating_point")
        }
        cfg = SimConfig(
            base_url=opts["base_url"],
            token=key,
            load=opts["load"],
            spike_at_minute=opts["spike_at_minute"],
            spike_factor=opts["spike_factor"],
            zone_failure_at_minute=opts["zone_failure_at_minute"],
            minutes=opts["minutes"],
            max_rps=opts["max_rps"],
        )
        scale = opts["overdrive"]
        overdrive = {(g.tenant, g.project, g.pool, g.traffic_class): g.overdrive * scale for g in GRANTS if g.overdrive}
        sim = FleetSimulator(cfg, trace, snap["entitlements"], pools, ops, overdrive)
        self._wait_for(opts["base_url"], opts["wait"])
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        self.stdout.write(
            f"[simulate_fleet] {len(trace)} requests, {len(sim.ents)} entitlements, "
            f"speed ×{sim.speed:.2f}, offered load {sim.offered_fraction:.0%} of their entitled rate"
        )
        try:
            stats = sim.run(stop, log=lambda s: self.stdout.write(s))
        except KeyboardInterrupt:
            stop.set()
            stats = sim.stats
        self.stdout.write(
            f"[simulate_fleet] done: sent={stats.sent} admitted={stats.admitted} completed={stats.completed} "
            f"throttled={stats.throttled} sources={stats.by_source} samples={stats.samples} errors={stats.errors}"
        )

    def _wait_for(self, base_url: str, seconds: float) -> None:
        import urllib.request

        deadline = time.monotonic() + seconds
        while True:
            try:
                urllib.request.urlopen(base_url.rstrip("/") + "/login/", timeout=2)  # noqa: S310
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise CommandError(f"--base-url: nothing answers at {base_url}") from None
                time.sleep(0.5)
