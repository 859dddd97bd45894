"""Who is who: tenants, projects, members, platform roles and API tokens."""

from __future__ import annotations

import hashlib
import secrets
import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

MAX_BUDGET_USD = 1e9  # $ a month; past it the figure is a typo (1e308 would overflow the store's sums)


class Tenant(models.Model):
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=120)
    # Issue 51.3: a month's $ ceiling (UTC calendar month) over every scope of the tenant (or project),
    # charged at each pool's $ per weighted token; None: no $ budget. admission.usd enforces it.
    budget_usd = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(MAX_BUDGET_USD)],
        help_text="$ per calendar month (UTC) this may spend at the pools' prices; empty: no $ budget",
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Project(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="projects")
    slug = models.SlugField(max_length=64)
    name = models.CharField(max_length=120)
    # Issue 51.3: a month's $ ceiling (UTC calendar month) over every scope of the tenant (or project),
    # charged at each pool's $ per weighted token; None: no $ budget. admission.usd enforces it.
    budget_usd = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(MAX_BUDGET_USD)],
        help_text="$ per calendar month (UTC) this may spend at the pools' prices; empty: no $ budget",
    )

    class Meta:
        ordering = ["tenant__slug", "slug"]
        constraints = [models.UniqueConstraint(fields=["tenant", "slug"], name="project_unique_in_tenant")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.slug}"


class Membership(models.Model):
    """A person's role inside one tenant. A member belongs to exactly one tenant."""

    class Role(models.TextChoices):
        VIEWER = "viewer", "Viewer"
        REQUESTER = "requester", "Requester"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.tenant.slug}"


class PlatformRole(models.Model):
    class Role(models.TextChoices):
        APPROVER = "approver", "Approver"
        OPERATOR = "operator", "Operator"
        GATEWAY = "gateway", "Gateway"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="platform_roles")
    role = models.CharField(max_length=16, choices=Role.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "role"], name="platformrole_unique")]

    def __str__(self) -> str:
        return f"{self.user} {self.role}"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    """`Authorization: Token <key>` (or `Bearer <key>`). Only the SHA-256 of the key is stored.

    A token acts as its owner, narrowed by its scope: `read` refuses writes, `gateway` reaches only
    the gateway endpoints, and a tenant limits it to that tenant's objects (as a viewer of it).
    """

    class Scope(models.TextChoices):
        FULL = "full", "everything its owner may do"
        READ = "read", "read-only"
        GATEWAY = "gateway", "gateway endpoints only"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=80, default="default")
    prefix = models.CharField(max_length=8)
    key_hash = models.CharField(max_length=64, unique=True)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.FULL)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="api_tokens")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @classmethod
    def issue(cls, user: object, name: str = "default", **fields: object) -> tuple[ApiToken, str]:
        key = secrets.token_urlsafe(30)
        token = cls.objects.create(user=user, name=name, prefix=key[:8], key_hash=hash_key(key), **fields)
        return token, key


class UsdBudgetChange(models.Model):
    """Every change of a tenant's or project's $ budget (issue 51.3): who, why, from what to what."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="usd_budget_changes")
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    old_usd = models.FloatField(null=True, blank=True)
    new_usd = models.FloatField(null=True, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    reason = models.CharField(max_length=500)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.project_id or '-'}: {self.old_usd} -> {self.new_usd}"
