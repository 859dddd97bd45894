"""Start and stop the test OpenID Connect provider (gunicorn, one worker) on a free loopback port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.servers import free_port, on_pytest_death

ROOT = Path(__file__).resolve().parents[2]
CLIENT_ID = "headroom-test"
CLIENT_SECRET = "headroom-test-secret"
PASSWORD = "op-password"


def new_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class ProviderServer:
    """`claims`: username → claims; `set_claims` changes them for the next token or userinfo answer."""

    def __init__(self, workdir: Path, claims: dict[str, dict[str, Any]], key: rsa.RSAPrivateKey) -> None:
        self.dir = workdir
        self.key = key
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}/o"
        self.claims_file = workdir / "claims.json"
        self.set_claims(claims)
        self.proc: subprocess.Popen | None = None
        self._watchdog: subprocess.Popen | None = None

    def set_claims(self, claims: dict[str, dict[str, Any]]) -> None:
        tmp = self.claims_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(claims))
        tmp.replace(self.claims_file)  # the provider never reads half a file

    def start(self) -> None:
        key_file = self.dir / "op-key.pem"
        key_file.write_bytes(pem(self.key))
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL", "SQLITE_PATH"))},
            "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
            "OIDC_PROVIDER_ISSUER": self.issuer,
            "OIDC_PROVIDER_DB": str(self.dir / "op.sqlite3"),
            "OIDC_PROVIDER_KEY": str(key_file),
            "OIDC_PROVIDER_CLAIMS": str(self.claims_file),
            "OIDC_PROVIDER_PASSWORD": PASSWORD,
            "OIDC_PROVIDER_CLIENT_ID": CLIENT_ID,
            "OIDC_PROVIDER_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_PROVIDER_REDIRECT_URIS": "http://localhost/oidc/callback/ http://127.0.0.1/oidc/callback/",
        }
        log = open(self.dir / "op.log", "wb")  # noqa: SIM115 - the server's, closed with it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "tests.oidc_provider.wsgi:application", "--bind",
             f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "4", "--timeout", "60"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self._watchdog = on_pytest_death("kill", str(self.proc.pid))
        deadline = time.monotonic() + 60  # a hang guard on a busy machine, not a timing assertion
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the OIDC provider exited: {(self.dir / 'op.log').read_text()[-3000:]}")
            try:
                if requests.get(self.issuer + "/.well-known/openid-configuration", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the OIDC provider did not start: {(self.dir / 'op.log').read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        self.proc = None
        if self._watchdog is not None:
            self._watchdog.terminate()
            self._watchdog.wait()
            self._watchdog = None

    def rp_settings(self) -> dict[str, Any]:
        """Headroom's settings for signing in with this provider (discovery from the issuer)."""
        return {
            "OIDC_ENABLED": True,
            "OIDC_PROVIDER_NAME": "Test IdP",
            "OIDC_OP_ISSUER": self.issuer,
            "OIDC_RP_CLIENT_ID": CLIENT_ID,
            "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_VERIFY_SSL": False,
        }
