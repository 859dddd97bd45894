from django.apps import AppConfig


class SizingConfig(AppConfig):
    """The sizing request parser, the sizing and trace APIs; no models of its own."""

    name = "sizing"
