from django.apps import AppConfig


class AccountsOidcConfig(AppConfig):
    name = "accounts_oidc"
    label = "accounts_oidc"
    verbose_name = "OIDC sign-in"
    default_auto_field = "django.db.models.BigAutoField"
