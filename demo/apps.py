from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo fleet, its history, alert rules and the fleet simulator, with their commands.

    The top layer: it may import every app, and no app imports it (pyproject's import-linter
    contracts), so a deployment without the demo loses nothing. No models of its own.
    """

    name = "demo"
