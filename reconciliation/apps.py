from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
