"""Which Redis the store tests write to: REDIS_CLUSTER_URL (a `redis+cluster://host:port` of a
real Redis Cluster, as .ci/run's pass (c) starts one) when set, else the session's Redis."""

from __future__ import annotations

import os
from typing import Any

import redis

CLUSTER_URL = os.environ.get("REDIS_CLUSTER_URL", "")


def store_url(redis_url: str) -> str:
    return CLUSTER_URL or redis_url


def client_for(url: str) -> Any:
    """A plain client for `url`: a RedisCluster (routes each key to its node) or a Redis."""
    if url.startswith("redis+cluster://"):
        from redis.cluster import RedisCluster

        return RedisCluster.from_url(url.replace("redis+cluster://", "redis://", 1), socket_timeout=5.0)
    return redis.Redis.from_url(url, socket_timeout=5.0)
