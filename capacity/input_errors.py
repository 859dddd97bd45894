"""The one input error, naming the field at fault (issue 34.4), and sizing's use of it.

`FieldError(field, message)`: `.field` names the input (dotted for nested ones, e.g. `prompt_tokens.p50`),
`.message` says what is wrong with it, in words a person can act on. An API turns it into
`{field: [message]}`; a form puts the message on the field. Every app's own input error subclasses
it (telemetry's ingest, reconciliation's findings, admission's library and ASGI gateways, Atlas import,
sizing), so a caller can catch any of them as one. Pure: no Django.
"""

from __future__ import annotations


class FieldError(ValueError):
    """Bad input: `field` and `message`. str() is the message, or `field: message` where the class
    sets `named_in_str` (callers that log or raise the text alone need the field in it)."""

    named_in_str = False

    def __init__(self, field: str, message: str, *, text: str | None = None) -> None:
        super().__init__(text if text is not None else f"{field}: {message}" if self.named_in_str else message)
        self.field = field
        self.message = message


class SizingInputError(FieldError):
    """The one error bad sizing input raises, naming the field (dotted, e.g. `prompt_tokens.p50`)."""

    named_in_str = True
