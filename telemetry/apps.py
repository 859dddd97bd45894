from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "telemetry"

    def ready(self) -> None:
        # GET pools/{slug} lists the pool's Alertmanager alerts (issue 24); entitlements sits below us.
        from entitlements import pool_alert_source
        from telemetry.selectors import recent_pool_alerts

        pool_alert_source.register(recent_pool_alerts)
