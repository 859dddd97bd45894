from django.apps import AppConfig
from django.db.models.signals import post_migrate


class EntitlementsConfig(AppConfig):
    name = "entitlements"
    verbose_name = "Source of truth"

    def ready(self) -> None:
        from entitlements.history_triggers import reinstall_after_migrate

        post_migrate.connect(reinstall_after_migrate, sender=self, dispatch_uid="entitlements-audit-triggers")
        # SQLite drops a table's triggers when a migration rebuilds it: put the reserve checks back.
        from entitlements import epoch_signals, reserve_triggers

        epoch_signals.connect()  # role removals and deactivations reach cached gateway keys at once

        post_migrate.connect(
            reserve_triggers.reinstall_after_migrate, sender=self, dispatch_uid="entitlements-reserve-triggers"
        )
