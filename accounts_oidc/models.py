"""Which account an identity provider's subject signs in as: (issuer, sub), never the e-mail address."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class OidcIdentity(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_unique")]

    def __str__(self) -> str:
        return f"{self.issuer} {self.subject} → {self.user}"
