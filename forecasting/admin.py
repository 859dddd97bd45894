from django.contrib import admin

from forecasting.models import ForecastRun, SupplyOrder


@admin.register(SupplyOrder)
class SupplyOrderAdmin(admin.ModelAdmin):
    list_display = ("pool", "replicas", "arrival_date", "status", "note")
    list_filter = ("status", "pool")


@admin.register(ForecastRun)
class ForecastRunAdmin(admin.ModelAdmin):
    list_display = ("id", "status", "trigger", "progress", "attempts", "results_written", "created_at", "finished_at")
    list_filter = ("status", "trigger")
    readonly_fields = [f.name for f in ForecastRun._meta.fields]
