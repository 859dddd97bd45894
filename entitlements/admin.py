"""Django admin: the catalogue and supply are edited here; entitlements and reserves only change
through their services (headroom checks, locks, history), so the admin shows them read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from entitlements import admin_access, admin_prices, pool_locks, reserve_rules  # noqa: F401 - admin_* register their pages
from entitlements.models import (
    Accelerator,
    Entitlement,
    EntitlementHistory,
    FailoverReserve,
    Membership,
    OperatingPoint,
    Pool,
    PoolZone,
    Project,
    ReasonCode,
    Region,
    ServedModel,
    Tenant,
    TrafficClass,
    Zone,
)
from entitlements.selectors import Window, pool_sold_peak


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# Catalogue ---------------------------------------------------------------------------------------


@admin.register(ServedModel)
class ServedModelAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "r_wt_per_s", "w_out", "w_cached", "kv_bytes_per_token", "context_length"]
    search_fields = ["slug", "name"]


class ZoneInline(admin.TabularInline):
    model = Zone
    extra = 0


@admin.register(Region)
class RegionAdmin(admin.ModelAdmin):
    list_display = ["slug", "name"]
    inlines = [ZoneInline]


@admin.register(Zone)
class ZoneAdmin(admin.ModelAdmin):
    list_display = ["slug", "region"]
    list_filter = ["region"]


@admin.register(Accelerator)
class AcceleratorAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "kind", "memory_gb", "chips_per_slice", "cloud_on_demand_per_hour"]
    list_filter = ["kind"]


@admin.register(OperatingPoint)
class OperatingPointAdmin(admin.ModelAdmin):
    list_display = [
        "model",
        "accelerator",
        "accelerators_per_replica",
        "scenario",
        "runtime",
        "out_tps_per_replica",
        "ttft_p99_limit_ms",
        "tpot_p99_limit_ms",
        "is_ceiling",
        "goodput",
    ]
    list_filter = ["model", "accelerator", "is_ceiling"]
    list_select_related = ["model", "accelerator"]
    search_fields = ["runtime", "scenario", "notes"]
    readonly_fields = ["goodput_explained", "source_link"]

    @admin.display(description="CU / replica")
    def goodput(self, obj: OperatingPoint) -> str:
        return f"{obj.goodput_cu:,.1f}"

    @admin.display(description="source")
    def source_link(self, obj: OperatingPoint) -> str:
        return format_html('<a href="{}" rel="noopener">{}</a>', obj.source, obj.source)


# Supply ------------------------------------------------------------------------------------------


class PoolZoneInline(admin.TabularInline):
    model = PoolZone
    extra = 0


class ReserveHeldInline(ReadOnlyInline):
    model = FailoverReserve
    fk_name = "host_pool"
    fields = ["protected_pool", "protected_zone", "cu", "note"]
    verbose_name_plural = "failover reserves held here (change through reserve_set)"


@admin.register(Pool)
class PoolAdmin(admin.ModelAdmin):
    list_display = ["slug", "model", "region", "accelerator", "replica_count", "physical_cu", "deliverable"]
    list_filter = ["model", "region", "accelerator"]
    list_select_related = ["model", "region", "accelerator", "operating_point__model"]
    readonly_fields = ["physical_cu", "reserve_held_cu", "deliverable", "goodput_explained"]
    inlines = [PoolZoneInline, ReserveHeldInline]

    @admin.display(description="replicas")
    def replica_count(self, obj: Pool) -> int:
        return obj.replicas

    @admin.display(description="deliverable CU")
    def deliverable(self, obj: Pool) -> str:
        return f"{obj.deliverable_cu:,.1f}" if obj.pk else "-"

    @admin.display(description="CU per replica")
    def goodput_explained(self, obj: Pool) -> str:
        return obj.operating_point.goodput_explained if obj.pk else "-"

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        # Zones arrive with the inlines, so the stored totals are recomputed after them, under the lock.
        with transaction.atomic():
            pool_locks.lock_pools({form.instance.pk})
            pool = pool_locks.pool_refresh(form.instance)
            # Supply can shrink for real (lost hardware), so the change is kept, but said out loud.
            try:
                reserve_rules.check_all_zone_rooms(pool, "zones")
            except ValidationError as exc:
                # A zone reserve held here counts only replicas outside its zone (issue 12.8).
                self.message_user(request, "; ".join(exc.messages), level=messages.WARNING)
            sold = pool_sold_peak(pool, Window(timezone.now(), None))
            if sold > pool.deliverable_cu:
                self.message_user(
                    request,
                    f"{pool.slug} now delivers {pool.deliverable_cu:,.1f} CU but has sold up to {sold:,.1f} CU: "
                    "it is oversold until supply returns or entitlements are amended.",
                    level=messages.WARNING,
                )


@admin.register(FailoverReserve)
class FailoverReserveAdmin(ReadOnlyAdmin):
    list_display = ["host_pool", "protected_pool", "protected_zone", "cu", "note"]
    list_select_related = ["host_pool", "protected_pool", "protected_zone"]


# Tenancy -----------------------------------------------------------------------------------------


class ProjectInline(admin.TabularInline):
    model = Project
    extra = 0


class MembershipInline(ReadOnlyInline):
    """Read-only here: memberships change in their own admin, where a reason is required (access audit)."""

    model = Membership
    fields = ["user", "role"]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "uuid"]
    search_fields = ["slug", "name"]
    inlines = [ProjectInline, MembershipInline]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "tenant", "name"]
    list_filter = ["tenant"]


# Entitlements (read-only: grants go through entitlement_grant / amend / revoke) ------------------


@admin.register(Entitlement)
class EntitlementAdmin(ReadOnlyAdmin):
    list_display = ["tenant", "project", "model", "region", "traffic_class", "cu", "starts_at", "ends_at", "version"]
    list_filter = ["traffic_class", "tenant", "model", "region"]
    list_select_related = ["tenant", "project", "model", "region", "traffic_class"]
    readonly_fields = ["history"]

    @admin.display(description="history")
    def history(self, obj: Entitlement) -> str:
        rows = EntitlementHistory.objects.filter(entitlement_id=obj.pk).select_related("actor").order_by("pk")
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>v{}</td><td>{}</td><td>{}</td></tr>",
            ((h.at, h.op, h.version, h.actor or "-", h.reason) for h in rows),
        )
        return format_html(
            "<table><tr><th>at</th><th>op</th><th>version</th><th>who</th><th>why</th></tr>{}</table>", body
        )


@admin.register(EntitlementHistory)
class EntitlementHistoryAdmin(ReadOnlyAdmin):
    list_display = ["entitlement_id", "op", "version", "actor", "reason", "at"]
    list_filter = ["op"]
    search_fields = ["entitlement_id", "reason"]


@admin.register(TrafficClass)
class TrafficClassAdmin(ReadOnlyAdmin):
    list_display = ["slug", "name", "guaranteed", "may_lend", "may_borrow", "counts_as_sold", "shed_order"]


@admin.register(ReasonCode)
class ReasonCodeAdmin(ReadOnlyAdmin):
    list_display = ["code", "responsible", "when", "default_retry_after_s"]
