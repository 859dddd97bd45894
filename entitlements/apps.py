from django.apps import AppConfig


class EntitlementsConfig(AppConfig):
    name = "entitlements"
    verbose_name = "Source of truth"
