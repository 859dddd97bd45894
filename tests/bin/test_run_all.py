"""`make run`'s runner (bin/run_all.py): which processes it starts in each shape, that the web
server serves the app as users meet it (DEBUG off, whitenoise, the portal's own error pages), and
that SIGINT stops every process it started, the ones they forked included."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("run_all", ROOT / "bin" / "run_all.py")
assert _spec is not None and _spec.loader is not None
run_all = importlib.util.module_from_spec(_spec)
sys.modules["run_all"] = run_all  # dataclasses look their module up there
_spec.loader.exec_module(run_all)


def names(env: dict[str, str]) -> list[str]:
    return [p.name for p in run_all.plan(env, host="127.0.0.1", port=8000)]


def web_flag(env: dict[str, str], flag: str) -> str:
    argv = run_all.plan(env, host="127.0.0.1", port=8000)[0].argv
    return argv[argv.index(flag) + 1]


def test_embedded_one_web_process_with_threads_the_alert_loop_and_the_simulator():
    assert names({}) == ["web", "alerts", "simulator"]
    assert web_flag({}, "--workers") == "1"
    assert int(web_flag({}, "--threads")) > 1
    assert "gunicorn" in run_all.plan({}, host="127.0.0.1", port=8000)[0].argv


def test_embedded_stays_one_process_whatever_web_concurrency_says():
    # The in-process admission store: two workers would each admit the full rate.
    assert web_flag({"WEB_CONCURRENCY": "4"}, "--workers") == "1"
    assert (
        web_flag({"REDIS_URL": "redis://x/0", "ADMISSION_BACKEND": "memory", "WEB_CONCURRENCY": "4"}, "--workers")
        == "1"
    )


def test_with_redis_several_workers_a_celery_worker_and_beat_on_redis_as_broker():
    env = {"REDIS_URL": "redis://127.0.0.1:6379/7"}
    assert names(env) == ["web", "worker", "beat", "events", "simulator"]
    assert int(web_flag(env, "--workers")) > 1
    assert web_flag({**env, "WEB_CONCURRENCY": "3"}, "--workers") == "3"
    procs = run_all.plan(env, host="127.0.0.1", port=8000)
    assert {p.name: p.env.get("CELERY_BROKER_URL") for p in procs if p.name != "simulator"} == {
        "web": env["REDIS_URL"], "worker": env["REDIS_URL"], "beat": env["REDIS_URL"], "events": env["REDIS_URL"],
    }  # fmt: skip
    assert [p.argv[p.argv.index("config") + 1] for p in procs[1:4]] == ["worker", "beat", "worker"]


def test_a_broker_without_redis_gets_worker_and_beat_but_one_web_process():
    env = {"CELERY_BROKER_URL": "redis://127.0.0.1:6379/8"}
    assert names(env) == ["web", "worker", "beat", "events", "simulator"]
    assert web_flag(env, "--workers") == "1"


def test_the_simulator_can_be_left_out():
    assert names({"HEADROOM_SIMULATE": "0"}) == ["web", "alerts"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """As `make run` sets it: DEBUG off, plain local HTTP, a key; a database and static root of the test's own."""
    drop = ("DJANGO_", "REDIS_URL", "DATABASE_URL", "CELERY_BROKER_URL", "PYTEST_", "HEADROOM_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DJANGO_SECRET_KEY="test-run-all-" + "k" * 50,
        HEADROOM_LOCAL_HTTP="1",
        SQLITE_PATH=str(tmp_path / "db.sqlite3"),
        DJANGO_STATIC_ROOT=str(tmp_path / "static"),
        **extra,
    )
    return env


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    found, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.add(c)
            todo.append(c)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _get(url: str) -> tuple[int, str, str]:
    req = urllib.request.Request(url)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:  # noqa: S310 - loopback only
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def test_gunicorn_refuses_several_workers_with_the_in_process_store(tmp_path):
    env = _env(tmp_path, PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prom"))
    done = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi",
         "--bind", f"127.0.0.1:{_free_port()}", "--workers", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,  # a hang guard, not a limit
    )  # fmt: skip
    assert done.returncode != 0
    assert "would over-admit" in done.stderr


@pytest.mark.slow
def test_runner_serves_with_debug_off_and_sigint_stops_every_process(tmp_path):
    env = _env(tmp_path, HEADROOM_SIMULATE="0")
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "collectstatic", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    port = _free_port()
    runner = subprocess.Popen(
        [sys.executable, str(ROOT / "bin" / "run_all.py"), "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    seen: set[int] = set()
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(600):  # up to ~2 min for gunicorn to boot on a busy machine: a hang guard
            seen |= _descendants(runner.pid)
            try:
                status, _, login = _get(f"{base}/login/")
                break
            except OSError:
                assert runner.poll() is None, runner.stdout.read() if runner.stdout else ""
                time.sleep(0.2)
        else:
            pytest.fail("the web server never answered")
        seen |= _descendants(runner.pid)
        assert status == 200 and 'name="username"' in login
        # whitenoise serves the hashed files collectstatic wrote (DEBUG off: the manifest storage)
        css = login.split('href="/static/css/app.', 1)[1].split('"', 1)[0]
        status, ctype, _ = _get(f"{base}/static/css/app.{css}")
        assert (status, ctype.split(";")[0]) == (200, "text/css")
        # the portal's own 404 page, not Django's debug page
        status, _, page = _get(f"{base}/no-such-page/")
        assert status == 404 and "Headroom" in page and "Django tried these URL patterns" not in page
        # web: a gunicorn master and its one worker; the alert loop
        cmdlines = [Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode() for p in seen if _alive(p)]
        assert sum("gunicorn" in c for c in cmdlines) == 2, cmdlines
        assert sum("evaluate_alerts" in c for c in cmdlines) == 1, cmdlines
    finally:
        runner.send_signal(signal.SIGINT)
        out, _ = runner.communicate(timeout=120)  # a hang guard: the runner gives each group 10 s
    assert runner.returncode == 0, out
    assert [p for p in seen if _alive(p)] == []


def test_a_child_that_exits_is_started_again_with_back_off_and_the_rest_keep_running(tmp_path):
    starts = tmp_path / "starts"
    flaky = run_all.Proc("events", [sys.executable, "-c", f"open({str(starts)!r}, 'a').write('x\\n'); exit(3)"])
    steady = run_all.Proc("web", [sys.executable, "-c", "import time; time.sleep(600)"])
    logged: list[str] = []
    sup = run_all.Supervisor([steady, flaky], env=dict(os.environ), backoff_s=0.01, log=logged.append)
    try:
        sup.start(steady)
        sup.start(flaky)
        web = sup.children["web"]
        deadline = time.monotonic() + 120  # a hang guard on a busy machine, not a timing assertion
        while (not starts.exists() or len(starts.read_text().split()) < 4) and time.monotonic() < deadline:
            sup.tick()
            time.sleep(0.005)
        assert len(starts.read_text().split()) >= 4  # started, and started again three times
        assert sup.children["web"] is web and web.poll() is None  # the rest kept running
        exits = [m for m in logged if "exited" in m]
        assert exits[:3] == [f"run_all: events exited with 3; starting it again in {d:g} s" for d in (0.01, 0.02, 0.04)]
        assert sup.restarts["events"] >= 3 and "web" not in sup.restarts
    finally:
        sup.stop()
    assert web.poll() is not None and sup.children["events"].poll() is not None
