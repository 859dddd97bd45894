"""Privilege escalation through the admin: platform roles are granted by superusers only, and every
role or membership change lands in the append-only access audit with who and why."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.db import DatabaseError, connection, transaction
from django.test import Client

from entitlements.history_triggers import DIRECT_SQL
from entitlements.models import Membership, PlatformRole, RoleChange
from tests import factories as f
from tests.clients import web_client
from tests.security.world import PERSONAS, build_world

ADD_ROLE = "/admin/entitlements/platformrole/add/"


def _state() -> tuple[list, list, list]:
    return (
        sorted(PlatformRole.objects.values_list("user_id", "role")),
        sorted(Membership.objects.values_list("user_id", "tenant_id", "role")),
        list(RoleChange.objects.values_list("pk", flat=True)),
    )


@pytest.fixture
def staff_operator(fleet):
    op = fleet.operator
    op.is_staff = True
    op.save(update_fields=["is_staff"])
    op.user_permissions.add(*Permission.objects.filter(content_type__app_label__in=["entitlements", "auth"]))
    return op


@pytest.fixture
def superuser(db):
    return f.UserFactory(username="root", is_staff=True, is_superuser=True)


def test_an_operator_cannot_grant_itself_approver(fleet, staff_operator):
    before = _state()
    resp = web_client(staff_operator).post(ADD_ROLE, {"user": staff_operator.pk, "role": "approver", "reason": "me"})
    assert resp.status_code == 403
    assert _state() == before


def test_an_operator_cannot_make_a_viewer_an_operator_nor_change_or_remove_roles(fleet, staff_operator):
    viewer = f.member("v", fleet.acme, "viewer")
    approver = f.platform_user("appr", "approver")
    row = PlatformRole.objects.get(user=approver)
    client = web_client(staff_operator)
    before = _state()
    assert client.post(ADD_ROLE, {"user": viewer.pk, "role": "operator", "reason": "x"}).status_code == 403
    change = f"/admin/entitlements/platformrole/{row.pk}/change/"
    assert client.post(change, {"user": viewer.pk, "role": "operator", "reason": "x"}).status_code == 403
    delete = f"/admin/entitlements/platformrole/{row.pk}/delete/"
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert _state() == before


def test_an_operator_cannot_make_itself_superuser_or_edit_a_superuser(fleet, staff_operator, superuser):
    client = web_client(staff_operator)
    form = {
        "username": staff_operator.username,
        "is_active": "on",
        "is_staff": "on",
        "is_superuser": "on",
        "last_login_0": "",
        "last_login_1": "",
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
    }
    resp = client.post(f"/admin/auth/user/{staff_operator.pk}/change/", form)
    assert resp.status_code == 302
    staff_operator.refresh_from_db()
    assert staff_operator.is_superuser is False
    assert client.post(f"/admin/auth/user/{superuser.pk}/change/", {**form, "username": "root"}).status_code == 403
    superuser.refresh_from_db()
    assert superuser.username == "root"


def test_a_superuser_grants_with_a_reason_and_the_audit_says_who_and_why(fleet, superuser):
    viewer = f.member("v", fleet.acme, "viewer")
    client = web_client(superuser)
    no_reason = client.post(ADD_ROLE, {"user": viewer.pk, "role": "approver"})
    assert no_reason.status_code == 200 and not PlatformRole.objects.filter(user=viewer).exists()
    resp = client.post(ADD_ROLE, {"user": viewer.pk, "role": "approver", "reason": "covers the approval rota"})
    assert resp.status_code == 302
    last = RoleChange.objects.last()
    assert (last.table_name, last.op, last.user_id, last.actor_id, last.reason) == (
        "entitlements_platformrole",
        "insert",
        viewer.pk,
        superuser.pk,
        "covers the approval rota",
    )
    assert last.snapshot["role"] == "approver"


def test_an_operator_changes_a_membership_with_a_reason(fleet, staff_operator):
    viewer = f.member("v", fleet.acme, "viewer")
    row = Membership.objects.get(user=viewer)
    client = web_client(staff_operator)
    url = f"/admin/entitlements/membership/{row.pk}/change/"
    form = {"user": viewer.pk, "tenant": fleet.acme.pk, "role": "requester"}
    assert client.post(url, form).status_code == 200  # no reason: the form asks for one
    assert Membership.objects.get(pk=row.pk).role == "viewer"
    assert client.post(url, {**form, "reason": "files launch requests now"}).status_code == 302
    last = RoleChange.objects.last()
    assert (last.op, last.actor_id, last.reason, last.snapshot["role"]) == (
        "update",
        staff_operator.pk,
        "files launch requests now",
        "requester",
    )


def test_raw_sql_role_grant_is_audited_and_the_audit_is_append_only(fleet):
    user = f.UserFactory(username="sneaky")
    with connection.cursor() as cur:
        cur.execute("INSERT INTO entitlements_platformrole (user_id, role) VALUES (%s, 'operator')", [user.pk])
    last = RoleChange.objects.last()
    assert (last.op, last.user_id, last.actor_id, last.reason) == ("insert", user.pk, None, DIRECT_SQL)
    before = list(RoleChange.objects.values_list("pk", "reason"))
    for sql in (
        "UPDATE entitlements_rolechange SET reason = 'granted by the board'",
        "DELETE FROM entitlements_rolechange",
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cur:
            cur.execute(sql)
    assert list(RoleChange.objects.values_list("pk", "reason")) == before


@pytest.mark.django_db
def test_matrix_role_grant_through_the_admin_per_persona():
    """The authorization matrix for role changes: every persona (and a superuser) tries to grant
    itself `operator` through the admin; only the superuser's attempt changes anything."""
    world = build_world()
    world.users["superuser"] = f.UserFactory(username="root", is_staff=True, is_superuser=True)
    expected = dict.fromkeys((*PERSONAS, "superuser"), 302)  # non-staff: sent to the admin login
    expected["operator"] = 403
    seen, granted = {}, {}
    for persona, user in world.users.items():
        client = web_client(user) if user is not None else Client()
        target = user.pk if user is not None else world.users["viewer"].pk
        resp = client.post(ADD_ROLE, {"user": target, "role": "operator", "reason": "self-service"})
        seen[persona] = resp.status_code
        granted[persona] = PlatformRole.objects.filter(user_id=target, role="operator").exists()
    assert seen == expected
    assert {p for p, g in granted.items() if g} == {"operator", "superuser"}  # the operator already was one
    assert RoleChange.objects.filter(reason="self-service").count() == 1
