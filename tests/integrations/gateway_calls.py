"""What the gateway end-to-end tests (test_litellm_proxy.py, test_envoy_ext_proc.py) share: the
sequence of requests the tiny world decides (STEPS → EXPECTED), sending it through a gateway, the
admission events it leaves, and the checks that every admitted request was settled with the
upstream's `usage` and that a stream the client leaves is settled `cancelled`.

A gateway differs only in the header that carries a request's id (`id_header`: Envoy's
`x-request-id`, LiteLLM's `x-litellm-call-id`) and how long a call may take (LiteLLM is slower)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from admission.backends.redis import RedisBackend
from telemetry.models import AdmissionEvent
from tests.admission import cluster
from tests.integrations import stack

# (step, key, model, max_tokens); a request weighs its prompt (~10 tokens) + 4 × max_tokens
# (tests/admission/world.py). acme reserved: ~3,970 wt each; its bucket holds 12,000 and refills
# 200 wt/s, so r4 is refused unless ~19 s passed since r1. The pool (16,800, refilling 280 wt/s) has
# ~3,800 left after g1; g2 (~2,900 wt: more than globex's own 2,000, so borrowed) would take it under
# its reclaim margin (3,360) unless ~8.6 s passed since r1: RECLAIMED. r1-r3 go at once (three
# threads): all admitted, whatever their order.
STEPS = [
    ("r1", "sk-acme", "llama-test", 990),
    ("r2", "sk-acme", "llama-test", 990),
    ("r3", "sk-acme", "llama-test", 990),
    ("g1", "sk-globex", "llama-test", 248),  # ~1,000 wt from globex's own bucket
    ("g2", "sk-globex", "llama-test", 720),  # RECLAIMED
    ("r4", "sk-acme", "llama-test", 990),  # QUOTA_EXCEEDED
    ("n1", "sk-nobody", "llama-test", 10),  # NOT_ENTITLED
    ("e1", "sk-acme", "llama-test", 2500),  # above the envelope's max output (2,000): OUTSIDE_ENVELOPE
    ("p1", "sk-acme", "llama-elsewhere", 10),  # a region the model is not placed in: PLACEMENT
]
EXPECTED = [
    (200, None, False), (200, None, False), (200, None, False), (200, None, False), (429, "RECLAIMED", True),
    (429, "QUOTA_EXCEEDED", True), (429, "NOT_ENTITLED", True), (429, "OUTSIDE_ENVELOPE", False),
    (429, "PLACEMENT", True),
]  # fmt: skip
# Telemetry refuses (dead-letters) events of an unknown tenant or region: these two never arrive.
NO_EVENT = {"n1", "p1"}


class Gateway:
    """Requests to one gateway's OpenAI-compatible endpoint at `url`."""

    def __init__(self, url: str, id_header: str, *, timeout_s: float = 60) -> None:
        self.url, self.id_header, self.timeout_s = url, id_header, timeout_s

    def ask(self, key: str, tag: str, model: str, max_tokens: int, *, run: str, stream: bool = False,
            extra: str = "") -> httpx.Response:  # fmt: skip
        body = {"model": model, "max_tokens": max_tokens, "stream": stream,
                "messages": [{"role": "user", "content": f"please answer id:{run}-{tag} {extra}".strip()}]}  # fmt: skip
        if stream:
            body["stream_options"] = {"include_usage": True}
        headers = {"Authorization": f"Bearer {key}", self.id_header: f"{run}-{tag}"}
        return httpx.post(self.url + "/v1/chat/completions", json=body, headers=headers, timeout=self.timeout_s)

    def steps(self, run: str) -> list[httpx.Response]:
        """STEPS' answers, in order (r1-r3 sent together)."""
        with ThreadPoolExecutor(3) as pool:
            first = list(pool.map(lambda st: self.ask(st[1], st[0], st[2], st[3], run=run), STEPS[:3]))
        return first + [self.ask(key, tag, model, mt, run=run) for tag, key, model, mt in STEPS[3:]]

    def leave_stream(self, run: str, tag: str, after: int) -> None:
        """A 400-token stream (the upstream paces 50 ms per token) the client leaves after `after` chunks."""
        body = {"model": "llama-test", "max_tokens": 400, "stream": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": f"long answer id:{run}-{tag} delay:50"}]}  # fmt: skip
        seen = 0
        with httpx.stream("POST", self.url + "/v1/chat/completions", json=body, timeout=self.timeout_s,
                          headers={"Authorization": "Bearer sk-acme", self.id_header: f"{run}-{tag}"}) as s:  # fmt: skip
            assert s.status_code == 200
            for line in s.iter_lines():
                seen += line.startswith("data: ")
                if seen == after:
                    break


def library_mode(url: str, token: str, redis_url: str, name: str, *,
                 http_timeout_s: int) -> tuple[dict[str, str], RedisBackend]:  # fmt: skip
    """A gateway's HEADROOM_* settings for library mode on the test's Redis under a key prefix of its
    own, and that store (to clear it)."""
    prefix = f"{name}{uuid.uuid4().hex[:8]}:"
    env = {"HEADROOM_URL": url, "HEADROOM_GATEWAY_TOKEN": token, "HEADROOM_REDIS_URL": cluster.store_url(redis_url),
           "HEADROOM_SIGNING_KEY": f"{name}-test-key", "HEADROOM_KEY_PREFIX": prefix,
           "HEADROOM_REDIS_TIMEOUT_S": "2", "HEADROOM_HTTP_TIMEOUT_S": str(http_timeout_s)}  # fmt: skip
    return env, RedisBackend(cluster.store_url(redis_url), prefix=prefix)


def run_events(source: str, run: str) -> dict[str, AdmissionEvent]:
    return {e.event_id: e for e in AdmissionEvent.objects.filter(source=source, event_id__startswith=f"{run}-")}


def wait_for_events(source: str, run: str, want: set[str], flush: Callable[[], object],
                    guard_s: float = 120) -> dict[str, AdmissionEvent]:  # fmt: skip
    """The run's events once every id in `want` is there (or the hang guard ran out: events arrive
    within ~1 s; a guard, not a timing assertion)."""
    deadline = time.monotonic() + guard_s
    got: dict[str, AdmissionEvent] = {}
    while time.monotonic() < deadline:
        flush()
        got = run_events(source, run)
        if want <= got.keys():
            return got
        time.sleep(0.2)
    return got


def check_settled(run: str, got: list[tuple], workdir: Path, source: str,
                  flush: Callable[[], object]) -> tuple[dict[str, AdmissionEvent], dict[str, dict]]:  # fmt: skip
    """Every step was decided by Headroom (an event each), only the admitted ones reached the upstream,
    and each of those was settled `ok` with the upstream's usage (reserved on an estimate that is not
    it). → (the run's events, the upstream's answers by tag)."""
    admitted = [tag for (tag, *_), (status, *_) in zip(STEPS, got, strict=True) if status == 200]
    want = {f"{run}-{t}" for t, *_ in STEPS if t not in NO_EVENT} | {f"{run}-{t}:complete" for t in admitted}
    evs = wait_for_events(source, run, want, flush)
    assert want <= evs.keys(), sorted(want - evs.keys())
    usage = stack.upstream_log(workdir)
    assert sorted(k for k in usage if k.startswith(run)) == sorted(f"{run}-{t}" for t in admitted)
    for tag in admitted:
        done, u = evs[f"{run}-{tag}:complete"], usage[f"{run}-{tag}"]["usage"]
        assert (done.status, done.prompt_tokens, done.output_tokens) == (
            "ok",
            u["prompt_tokens"],
            u["completion_tokens"],
        )
        assert evs[f"{run}-{tag}"].prompt_tokens != u["prompt_tokens"]  # reserved on the estimate, settled on usage
    throttled = {e.reason for e in evs.values() if e.decision == "throttle"}
    assert throttled == {r for _, r, _ in EXPECTED if r} - {"NOT_ENTITLED", "PLACEMENT"}
    return evs, usage


def check_streams(gw: Gateway, workdir: Path, source: str, flush: Callable[[], object], *,
                  extra_content: bool = False) -> str:  # fmt: skip
    """A stream run to its end is settled with its last chunk's usage; a stream the client leaves
    after 5 chunks is settled `cancelled` with the prompt reserved and the chunks it saw. → the run.
    `extra_content`: the gateway may add chunks of its own with a `content` field (LiteLLM does)."""
    run = uuid.uuid4().hex[:6]
    r = gw.ask("sk-acme", "s1", "llama-test", 300, run=run, stream=True, extra="short:37")
    contents = r.text.count('"content"')
    assert r.status_code == 200 and (contents >= 37 if extra_content else contents == 37), r.text[:500]
    gw.leave_stream(run, "s2", after=5)
    evs = wait_for_events(source, run, {f"{run}-s1", f"{run}-s1:complete", f"{run}-s2", f"{run}-s2:complete"}, flush)
    up = stack.upstream_log(workdir)[f"{run}-s1"]
    done = evs[f"{run}-s1:complete"]
    assert (done.status, done.prompt_tokens, done.output_tokens) == ("ok", up["usage"]["prompt_tokens"], 37)
    cut, admit = evs[f"{run}-s2:complete"], evs[f"{run}-s2"]
    assert cut.status == "cancelled", (cut.status, cut.output_tokens)
    assert cut.prompt_tokens == admit.prompt_tokens and 5 <= cut.output_tokens < 400
    return run
