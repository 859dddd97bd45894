"""Raw SQL cannot escape the entitlement audit, and the audit cannot be rewritten.

These run on whichever database DATABASE_URL names (SQLite by default, PostgreSQL in CI's second
pass); the ones that read a vendor's catalogue are marked for it.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from entitlements.history_triggers import DIRECT_SQL, ENTITLEMENT, snapshot_columns
from entitlements.models import Entitlement, EntitlementHistory
from entitlements.services import entitlement_amend, entitlement_grant
from tests import factories as f
from tests.clients import api_client, web_client


@pytest.fixture
def ent(fleet):
    return entitlement_grant(actor=fleet.operator, reason="launch", **f.grant_kwargs(fleet.pool_a, fleet.acme, "10"))


def _raw(sql: str, params: list) -> None:
    with connection.cursor() as cur:
        cur.execute(sql, params)


def test_raw_update_bumps_the_version_and_says_direct_sql(fleet, ent):
    _raw(f"UPDATE {ENTITLEMENT} SET cu = 20 WHERE id = %s", [ent.pk])
    ent.refresh_from_db()
    last = EntitlementHistory.objects.filter(entitlement_id=ent.pk).order_by("pk").last()
    assert (ent.version, str(ent.cu)) == (2, "20.000")
    assert (last.op, last.version, last.actor_id, last.reason) == ("update", 2, None, DIRECT_SQL)
    assert last.snapshot["version"] == 2


def test_orm_bulk_update_is_labelled_too(fleet, ent):
    Entitlement.objects.filter(pk=ent.pk).update(max_concurrency=7)
    ent.refresh_from_db()
    last = EntitlementHistory.objects.filter(entitlement_id=ent.pk).order_by("pk").last()
    assert (ent.version, last.version, last.reason, last.actor_id) == (2, 2, DIRECT_SQL, None)


def test_a_service_write_keeps_its_actor_and_is_bumped_once(fleet, ent):
    entitlement_amend(actor=fleet.operator, reason="more", entitlement=ent, cu="12")
    ent.refresh_from_db()
    last = EntitlementHistory.objects.filter(entitlement_id=ent.pk).order_by("pk").last()
    assert (ent.version, last.version, last.actor_id, last.reason) == (2, 2, fleet.operator.pk, "more")


def test_direct_sql_shows_in_the_api_and_the_admin(fleet, ent):
    _raw(f"UPDATE {ENTITLEMENT} SET cu = 20 WHERE id = %s", [ent.pk])
    body = api_client(fleet.operator).get(f"/api/v1/entitlements/{ent.uuid}").json()
    last = body["history"][-1]
    assert (body["version"], last["actor"], last["reason"], last["version"]) == (2, None, DIRECT_SQL, 2)
    assert last["changes"]["cu"]["to"] in ("20.000", 20, 20.0)
    fleet.operator.is_superuser = fleet.operator.is_staff = True
    fleet.operator.save()
    page = web_client(fleet.operator).get(f"/admin/entitlements/entitlement/{ent.pk}/change/")
    assert page.status_code == 200
    assert f"<td>{DIRECT_SQL}</td>" in page.content.decode()


def test_direct_sql_shows_on_the_entitlement_page_to_its_tenant(fleet, ent):
    _raw(f"UPDATE {ENTITLEMENT} SET cu = 20 WHERE id = %s", [ent.pk])
    viewer = f.member("acme-viewer", fleet.acme, "viewer")
    html = web_client(viewer).get(f"/entitlements/{ent.uuid}/").content.decode()
    history = html[html.index('id="history"') :]
    assert '<tr class="direct-sql">' in history and "<strong>no actor</strong>" in history
    assert f"<td>{DIRECT_SQL}</td>" in history and "<td>launch</td>" in history


@pytest.mark.parametrize(
    "sql", [f"UPDATE {EntitlementHistory._meta.db_table} SET reason = 'nothing happened'", "DELETE FROM {table}"]
)
def test_history_refuses_update_and_delete(fleet, ent, sql):
    table = EntitlementHistory._meta.db_table
    before = list(EntitlementHistory.objects.values_list("pk", "reason"))
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        _raw(sql.format(table=table), [])
    assert list(EntitlementHistory.objects.values_list("pk", "reason")) == before
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        EntitlementHistory.objects.filter(entitlement_id=ent.pk).delete()
    assert list(EntitlementHistory.objects.values_list("pk", "reason")) == before


def test_snapshot_columns_are_the_models_concrete_fields():
    assert snapshot_columns(Entitlement) == [fld.column for fld in Entitlement._meta.concrete_fields]


def test_every_column_is_in_the_stored_snapshot(fleet, ent):
    _raw(f"UPDATE {ENTITLEMENT} SET cu = 20 WHERE id = %s", [ent.pk])
    for row in EntitlementHistory.objects.filter(entitlement_id=ent.pk):
        assert set(row.snapshot) == set(snapshot_columns(Entitlement))


def test_the_triggers_snapshot_every_column(db):
    """On both databases, by their own source: PostgreSQL snapshots the whole row (to_jsonb), SQLite lists
    the columns (json_object, generated from the model), so it must name every one."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SELECT prosrc FROM pg_proc WHERE proname = 'entitlements_history_capture'")
            (src,) = cur.fetchone()
        assert "row_data := to_jsonb(OLD)" in src and "row_data := to_jsonb(NEW)" in src
        return
    assert connection.vendor == "sqlite"  # a third database needs its own reading here
    with connection.cursor() as cur:
        cur.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [ENTITLEMENT])
        triggers = {name: sql for name, sql in cur.fetchall() if name.startswith("entitlements_history")}
    assert sorted(triggers) == [
        "entitlements_history_delete",
        "entitlements_history_insert",
        "entitlements_history_update",
    ]
    for sql in triggers.values():
        assert [c for c in snapshot_columns(Entitlement) if f"'{c}'," not in sql] == []


@pytest.mark.postgres
def test_postgres_triggers_are_installed(db):
    with connection.cursor() as cur:
        cur.execute(
            "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgrelid IN "
            "('entitlements_entitlement'::regclass, 'entitlements_entitlementhistory'::regclass) ORDER BY tgname"
        )
        names = [r[0] for r in cur.fetchall() if r[0].startswith("entitlements_")]
    assert names == [
        "entitlements_entitlementhistory_append_only",
        "entitlements_history_trg",
        "entitlements_version_trg",
    ]
