import logging

from django.apps import AppConfig

log = logging.getLogger(__name__)


class AdmissionConfig(AppConfig):
    name = "admission"

    def ready(self) -> None:
        from django.core.signals import setting_changed
        from django.db.models.signals import post_delete, post_migrate, post_save

        from admission import events, params, sinks, snapshot_triggers, tasks
        from admission.models import CarriedUsage, PoolHealthOverride
        from entitlements.models import Entitlement, Pool, PoolZone, Project, Tenant

        # Saves in this process refresh its snapshot's part at once; every other write (and every
        # other process) is seen through the trigger-kept counters within ADMISSION_SNAPSHOT_CHECK_S.
        for model in (Entitlement, Pool, PoolZone, PoolHealthOverride, CarriedUsage, Tenant, Project):
            post_save.connect(params.changed, sender=model, dispatch_uid=f"admission-snap-{model.__name__}")
            post_delete.connect(params.changed, sender=model, dispatch_uid=f"admission-snapdel-{model.__name__}")
        post_migrate.connect(snapshot_triggers.reinstall_after_migrate, sender=self, dispatch_uid="admission-snap-trg")
        setting_changed.connect(params.setting_changed, dispatch_uid="admission-snap-settings")
        # The event buffer's sink is given here, not imported by admission.events: no import circle
        # through the tasks, and events.py knows nothing of telemetry.
        events.configure(sink=tasks.default_sink, dead_letter=sinks.dead_letter_batch, confirm=sinks.recorded)

        # The gateway snapshot carries what this serving path enforces, for library-mode gateways.
        from admission import snapshot_export
        from entitlements.api import snapshot as gateway_snapshot

        gateway_snapshot.EXTENSIONS["admission"] = snapshot_export.block
        # A poll naming the current ETag is answered 304 from the change counters (issue 35.1).
        from admission import snapshot_stamp

        gateway_snapshot.STAMP[:] = [snapshot_stamp.stamp]

        from entitlements.auth import epoch_bumped

        epoch_bumped.connect(bump_epoch, dispatch_uid="admission-token-epoch")


def bump_epoch(**_: object) -> None:
    """A revocation, role removal or deactivation: a new epoch in the admission store, so every
    process verifies its cached tokens again on their next reserve or complete. A store that is
    down cannot take it: the cached entries then lapse within ADMISSION_AUTH_CACHE_S."""
    from admission.backends import StoreUnavailable, get_backend

    try:
        get_backend().bump_epoch()
    except StoreUnavailable:
        log.warning("admission store down: token epoch not bumped; cached tokens lapse within ADMISSION_AUTH_CACHE_S")
