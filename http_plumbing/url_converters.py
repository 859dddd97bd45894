"""`<dotslug:…>`: a catalogue slug as the catalogue writes them, dots included (`llama-3.1-70b`).

Django's `slug` converter stops at a dot, so 3 of 9 demo pools and 4 of 8 models were 404 on every
detail route. Registered on import: every urls module that routes a slug imports this first.
"""

from __future__ import annotations

from django.urls import register_converter


class DottedSlugConverter:
    regex = r"[-a-zA-Z0-9_.]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(DottedSlugConverter, "dotslug")
