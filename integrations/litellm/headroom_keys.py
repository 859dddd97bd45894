"""LiteLLM custom auth naming each key's Headroom tenant (issue 48.6): the supported way to run the
LiteLLM proxy with Headroom, with no LiteLLM database.

LiteLLM keeps its virtual keys and teams (and their metadata) in its own PostgreSQL; without one,
`/key/generate` and `/team/new` answer "No db connected" and every request is refused. This module
replaces LiteLLM's key check (LiteLLM's "custom auth", docs.litellm.ai/docs/proxy/custom_auth): put it
beside the proxy's config.yaml and name it there,

    general_settings:
      master_key: os.environ/LITELLM_MASTER_KEY
      custom_auth: headroom_keys.user_api_key_auth

and point HEADROOM_KEYS_FILE at a JSON file of keys, the same format as the Envoy ext_proc's
(integrations/envoy/ext_proc.py), so one file can serve both gateways:

    {"keys": {"sk-…": {"tenant": "acme", "project": "search", "traffic_class": "reserved"}}}

A key in the file is admitted on the model routes only (chat and text completions, embeddings, …), as
a LiteLLM key whose metadata names `headroom_tenant`, `headroom_project` and `headroom_traffic_class`:
the callback (headroom_callback.py) reads them there. The master key is the proxy's admin (no tenant:
the callback refuses it a completion, so nothing is served unmetered). Any other key is refused 401.
The file is read again when it changes (its modification time), so adding a key needs no restart; a file
that does not read stops the proxy starting, and a later bad edit is logged and the last good keys kept.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
from typing import Any

from fastapi import HTTPException, Request
from litellm.proxy._types import LitellmUserRoles, UserAPIKeyAuth
from litellm.proxy.auth.route_checks import RouteChecks

log = logging.getLogger("headroom.litellm")
KEYS_FILE = "HEADROOM_KEYS_FILE"
FIELDS = ("tenant", "project", "traffic_class")


def load(path: str) -> dict[str, dict[str, Any]]:
    """The file's keys, each checked: an entry names its tenant (a key that names none would be refused
    every request by the callback, so the mistake is said when the file is read)."""
    with open(path) as fh:
        keys = json.load(fh).get("keys")
    if not isinstance(keys, dict):
        raise ValueError(f'{path}: expected {{"keys": {{"<key>": {{"tenant": …}}}}}}')
    for key, entry in keys.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("tenant"), str) or not entry["tenant"]:
            raise ValueError(f"{path}: the key ending …{key[-4:]} names no tenant")
        unknown = set(entry) - set(FIELDS)
        if unknown:
            raise ValueError(f"{path}: the key ending …{key[-4:]} has unknown fields {sorted(unknown)}")
    return keys


class KeyFile:
    """The keys file, read again whenever its modification time changes. A change that does not read
    (half-written, a typo) keeps the keys of the last good one and is logged at ERROR: one bad edit never
    cuts every tenant off."""

    def __init__(self, path: str) -> None:
        self.path, self._lock = path, threading.Lock()
        self._mtime, self._keys = os.stat(path).st_mtime_ns, load(path)

    def get(self, key: str) -> dict[str, Any] | None:
        mtime = os.stat(self.path).st_mtime_ns
        if mtime != self._mtime:
            with self._lock:
                try:
                    self._keys = load(self.path)
                except (OSError, ValueError) as exc:
                    log.error("Headroom: %s could not be read (%s); keeping the keys read before", self.path, exc)
                self._mtime = mtime
        return self._keys.get(key)


def _key_file() -> KeyFile:
    path = os.environ.get(KEYS_FILE)
    if not path:
        raise RuntimeError(f"{KEYS_FILE} is not set: the JSON file of keys and their Headroom tenants")
    return KeyFile(path)


KEYS = _key_file()  # at import, when the proxy loads its config: a missing or bad file stops it starting


def _master_key() -> str | None:
    from litellm.proxy import proxy_server  # the proxy's own module: imported here, once it has loaded

    return proxy_server.master_key


async def user_api_key_auth(request: Request, api_key: str) -> UserAPIKeyAuth:
    key = api_key.removeprefix("Bearer ").strip()
    master = _master_key()
    if master and secrets.compare_digest(key.encode(), master.encode()):
        return UserAPIKeyAuth(api_key=key, user_role=LitellmUserRoles.PROXY_ADMIN)
    entry = KEYS.get(key) if key else None
    if entry is None:
        raise HTTPException(401, detail="unknown key")
    if not RouteChecks.is_llm_api_route(request.url.path):
        raise HTTPException(403, detail="this key may call the model routes only")
    meta = {f"headroom_{f}": entry[f] for f in FIELDS if entry.get(f)}
    return UserAPIKeyAuth(api_key=key, metadata=meta)
