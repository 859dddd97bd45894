from django.apps import AppConfig


class AdmissionConfig(AppConfig):
    name = "admission"

    def ready(self) -> None:
        from django.core.signals import setting_changed
        from django.db.models.signals import post_delete, post_save

        from admission import params
        from admission.models import PoolHealthOverride
        from entitlements.models import Entitlement, Pool, PoolZone

        # Saves in this process refresh its snapshot at once; other processes follow within the TTL.
        for model in (Entitlement, Pool, PoolZone, PoolHealthOverride):
            post_save.connect(params.invalidate, sender=model, dispatch_uid=f"admission-snap-{model.__name__}")
            post_delete.connect(params.invalidate, sender=model, dispatch_uid=f"admission-snapdel-{model.__name__}")
        setting_changed.connect(params.setting_changed, dispatch_uid="admission-snap-settings")
