"""A throwaway PostgreSQL cluster: initdb into a fresh directory, pg_ctl start on a free loopback
port with trust auth for `postgres`, pg_ctl stop and the directory removed at the end.

Debian keeps the binaries in /usr/lib/postgresql/<version>/bin (not on PATH); initdb refuses to run
as root, so as root the cluster belongs to the `postgres` system user (runuser).
"""

from __future__ import annotations

import glob
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.servers import free_port, on_pytest_death


def postgres_bin_dir() -> Path | None:
    """The newest installed PostgreSQL's bin directory (initdb and pg_ctl), or None."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(os.path.realpath(on_path)).parent
    # Where Debian puts them; a test points this elsewhere to play a machine without PostgreSQL.
    pattern = os.environ.get("HEADROOM_PG_BIN_GLOB", "/usr/lib/postgresql/*/bin")
    dirs = sorted(glob.glob(pattern), key=lambda d: int(Path(d).parent.name.split(".")[0]))
    usable = [Path(d) for d in dirs if (Path(d) / "initdb").exists() and (Path(d) / "pg_ctl").exists()]
    return usable[-1] if usable else None


class PostgresServer:
    user = "postgres"

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="headroom-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self._as: list[str] = []
        self._watchdog: subprocess.Popen | None = None
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self._as, *args], capture_output=True, text=True)
        if done.returncode != 0:
            log = self.log.read_text()[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr[-2000:]}\n{log}")

    def start(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user, "-A", "trust", "-E", "UTF8",
                  "--no-sync", "--no-instructions")  # fmt: skip
        # A test cluster: durability off (it is deleted at the end), connections for the thread races.
        opts = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")  # fmt: skip
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "-t", "120", "start"
        )  # fmt: skip  (-w: returns once it accepts connections)
        stop = shlex.join([*self._as, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"])
        self._watchdog = on_pytest_death("sh", "-c", f"{stop}; rm -rf {shlex.quote(str(self.dir))}")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run([*self._as, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"],
                           capture_output=True)  # fmt: skip
        shutil.rmtree(self.dir, ignore_errors=True)
        if self._watchdog is not None:
            self._watchdog.terminate()
            self._watchdog.wait()
