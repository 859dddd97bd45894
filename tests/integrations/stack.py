"""Real processes for the gateway tests and benches (issue 37): the OpenAI-compatible upstream
(tests/integrations/upstream.py) and a real LiteLLM proxy (`litellm` from the gateway venv,
.venv/gateways, which `make gateways` builds from requirements-gateways.txt) with or without the
Headroom callback (integrations/litellm/headroom_callback.py). Each runs in its own process
group, its start-up bounded (a hang guard, not a timing assertion), stopped at exit."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GATEWAY_VENV = Path(os.environ.get("HEADROOM_GATEWAY_VENV", ROOT / ".venv" / "gateways"))
LITELLM = GATEWAY_VENV / "bin" / "litellm"
CALLBACK = ROOT / "integrations" / "litellm" / "headroom_callback.py"
START_GUARD_S = 300  # LiteLLM imports for ~10-30 s on two busy cores: a hang guard, not a limit under test


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def need_litellm() -> None:
    if not LITELLM.exists():
        raise RuntimeError(f"{LITELLM} is missing: `make gateways` installs LiteLLM from requirements-gateways.txt")


class Child:
    """A child process in its own session, started once `ready()` holds (polled every `poll_s`; a hang
    guard bounds the wait); on failure stopped, and its log's tail in the error."""

    def __init__(self, cmd: list[str], *, env: dict[str, str], log: Path, ready: Callable[[], bool],
                 cwd: Path = ROOT, poll_s: float = 0.05, failed: str = "did not start") -> None:  # fmt: skip
        self.log = log
        self._out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=self._out, stderr=subprocess.STDOUT,
                                     start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + START_GUARD_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            if ready():
                return
            time.sleep(poll_s)
        self.stop()
        raise RuntimeError(f"{cmd[0]} {cmd[1:3]} {failed}:\n{self.tail()}")

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=20)
        self._out.close()


class Proc(Child):
    """A child process in its own session; `url` answers `probe` (200) once started."""

    def __init__(self, cmd: list[str], *, env: dict[str, str], port: int, probe: str, log: Path,
                 cwd: Path = ROOT) -> None:  # fmt: skip
        self.port, self.url = port, f"http://127.0.0.1:{port}"

        def answers() -> bool:
            try:
                with urllib.request.urlopen(self.url + probe, timeout=5) as r:  # noqa: S310 - loopback
                    return r.status == 200
            except OSError:
                return False

        super().__init__(cmd, env=env, log=log, ready=answers, cwd=cwd, poll_s=0.25,
                         failed=f"did not answer {probe} on {self.url}")  # fmt: skip


def child_env(**extra: str) -> dict[str, str]:
    """The environment without this process's database, Redis and Django settings: LiteLLM would
    take DATABASE_URL for its own database, REDIS_URL for its cache."""
    drop = {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "CELERY_BROKER_URL", "PYTHONPATH"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("HEADROOM_", "LITELLM_"))}
    env.update(extra)
    return env


@contextlib.contextmanager
def upstream(workdir: Path, *, ttfb_ms: float = 0.0) -> Iterator[Proc]:
    """The upstream process (logging to workdir/upstream.jsonl); `ttfb_ms`: each answer's wait before its first byte."""
    port = free_port()
    p = Proc([sys.executable, "-m", "tests.integrations.upstream", "--port", str(port), "--log",
              str(workdir / "upstream.jsonl"), "--ttfb-ms", str(ttfb_ms)], env=child_env(PYTHONPATH=str(ROOT)),
             port=port, probe="/health", log=workdir / "upstream.out")  # fmt: skip
    try:
        yield p
    finally:
        p.stop()


def upstream_log(workdir: Path) -> dict[str, dict[str, Any]]:
    """The upstream's answers by tag (the last one of a tag wins)."""
    path = workdir / "upstream.jsonl"
    if not path.exists():
        return {}
    return {d["tag"]: d for d in map(json.loads, path.read_text().splitlines())}


def litellm_config(upstream_url: str, *, hook: bool, auth: bool, region: str = "tiny-region") -> str:
    lines = [
        "model_list:",
        "  - model_name: llama-test",
        "    litellm_params: {model: openai/upstream, api_base: " + upstream_url + "/v1, api_key: unused}",
        "    model_info: {headroom_region: " + region + "}",
        "  - model_name: llama-elsewhere",  # a region the model is not placed in: PLACEMENT
        "    litellm_params: {model: openai/upstream, api_base: " + upstream_url + "/v1, api_key: unused}",
        "    model_info: {headroom_model: llama-test, headroom_region: nowhere}",
        "litellm_settings:",
        "  drop_params: true",
        "  num_retries: 0",
        "  request_timeout: 120",
    ]
    if hook:
        lines.append("  callbacks: headroom_callback.handler")
    lines += ["general_settings:", "  master_key: sk-test-master"]
    if auth:
        lines.append("  custom_auth: test_keys.user_api_key_auth")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def litellm_proxy(workdir: Path, upstream_url: str, *, hook: bool, env: dict[str, str],
                  keys: dict[str, Any] | None = None, name: str = "litellm",
                  region: str = "tiny-region") -> Iterator[Proc]:  # fmt: skip
    """A real `litellm` proxy (one worker) before the upstream; `env` carries HEADROOM_* settings."""
    need_litellm()
    conf_dir = workdir / name
    conf_dir.mkdir()
    (conf_dir / "config.yaml").write_text(litellm_config(upstream_url, hook=hook, auth=keys is not None, region=region))
    shutil.copy(CALLBACK, conf_dir / "headroom_callback.py")  # beside config.yaml, as LiteLLM's docs place it
    if keys is not None:
        shutil.copy(ROOT / "tests" / "integrations" / "litellm_keys.py", conf_dir / "test_keys.py")
    port = free_port()
    e = child_env(
        **{
            "PYTHONPATH": str(ROOT),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_LOG": "ERROR",
            "TEST_LITELLM_KEYS": json.dumps(keys or {}),
            "NO_DOCS": "True",
            **env,
        }
    )
    p = Proc([str(LITELLM), "--config", str(conf_dir / "config.yaml"), "--host", "127.0.0.1", "--port", str(port),
              "--num_workers", "1"], env=e, port=port, probe="/health/liveliness", log=workdir / f"{name}.out",
             cwd=conf_dir)  # fmt: skip
    try:
        yield p
    finally:
        p.stop()
