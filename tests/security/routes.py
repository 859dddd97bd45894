"""Every URL pattern the project serves, as (route, name, kwarg names)."""

from __future__ import annotations

from collections.abc import Iterator

from django.urls import URLPattern, URLResolver, get_resolver


def walk(patterns: list, prefix: str = "") -> Iterator[tuple[str, str | None, list[str]]]:
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            route = prefix + str(p.pattern)
            yield route, p.name, list(p.pattern.converters) if hasattr(p.pattern, "converters") else []


def all_routes() -> list[tuple[str, str | None, list[str]]]:
    return list(walk(get_resolver().url_patterns))
