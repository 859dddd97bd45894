from django.apps import AppConfig
from django.db.models.signals import post_migrate


class EntitlementsConfig(AppConfig):
    name = "entitlements"
    verbose_name = "Source of truth"

    def ready(self) -> None:
        from entitlements.history_triggers import reinstall_after_migrate

        post_migrate.connect(reinstall_after_migrate, sender=self, dispatch_uid="entitlements-audit-triggers")
