"""The one error bad sizing input raises, naming the field (dotted, e.g. `prompt_tokens.p50`)."""

from __future__ import annotations


class SizingInputError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
