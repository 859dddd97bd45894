"""Entitlement history triggers (PostgreSQL and SQLite), the reason codes and traffic classes."""

from django.db import migrations

COLUMNS = [
    "id", "uuid", "tenant_id", "project_id", "model_id", "region_id", "pool_id", "traffic_class",
    "starts_at", "ends_at", "cu", "max_prompt_tokens", "max_output_tokens", "prompt_p50", "prompt_p95",
    "output_p50", "output_p95", "max_concurrency", "ttft_p99_ms", "tpot_p99_ms", "streaming", "overage",
    "borrowing_limit_cu", "version", "revoked_at",
]

PG_FORWARD = """
CREATE OR REPLACE FUNCTION entitlements_history_capture() RETURNS trigger AS $$
DECLARE
  row_data jsonb;
  ent_id bigint;
  ver integer;
BEGIN
  IF TG_OP = 'DELETE' THEN row_data := to_jsonb(OLD); ent_id := OLD.id; ver := OLD.version;
  ELSE row_data := to_jsonb(NEW); ent_id := NEW.id; ver := NEW.version; END IF;
  INSERT INTO entitlements_entitlementhistory (entitlement_id, op, version, snapshot, actor_id, reason, at)
  VALUES (ent_id, lower(TG_OP), ver, row_data,
          NULLIF(current_setting('headroom.actor_id', true), '')::bigint,
          COALESCE(current_setting('headroom.reason', true), ''),
          clock_timestamp());
  RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER entitlements_history_trg
AFTER INSERT OR UPDATE OR DELETE ON entitlements_entitlement
FOR EACH ROW EXECUTE FUNCTION entitlements_history_capture();
"""
PG_REVERSE = """
DROP TRIGGER IF EXISTS entitlements_history_trg ON entitlements_entitlement;
DROP FUNCTION IF EXISTS entitlements_history_capture();
"""


def _sqlite_trigger(op: str, ref: str) -> str:
    obj = ", ".join(f"'{c}', {ref}.{c}" for c in COLUMNS)
    return f"""
CREATE TRIGGER entitlements_history_{op}
AFTER {op.upper()} ON entitlements_entitlement
BEGIN
  INSERT INTO entitlements_entitlementhistory (entitlement_id, op, version, snapshot, actor_id, reason, at)
  VALUES ({ref}.id, '{op}', {ref}.version, json_object({obj}),
          (SELECT actor_id FROM entitlements_historycontext WHERE id = 1),
          COALESCE((SELECT reason FROM entitlements_historycontext WHERE id = 1), ''),
          strftime('%Y-%m-%d %H:%M:%f', 'now'));
END;
"""


def forward(apps, schema_editor):
    conn = schema_editor.connection
    with conn.cursor() as cur:
        if conn.vendor == "postgresql":
            cur.execute(PG_FORWARD)
        elif conn.vendor == "sqlite":
            for op, ref in (("insert", "NEW"), ("update", "NEW"), ("delete", "OLD")):
                cur.execute(_sqlite_trigger(op, ref))
        else:
            raise RuntimeError(f"entitlement history triggers: unsupported database {conn.vendor}")
    HistoryContext = apps.get_model("entitlements", "HistoryContext")
    HistoryContext.objects.get_or_create(id=1, defaults={"actor_id": None, "reason": ""})


def reverse(apps, schema_editor):
    conn = schema_editor.connection
    with conn.cursor() as cur:
        if conn.vendor == "postgresql":
            cur.execute(PG_REVERSE)
        else:
            for op in ("insert", "update", "delete"):
                cur.execute(f"DROP TRIGGER IF EXISTS entitlements_history_{op}")


def load_registry(apps, schema_editor):
    from entitlements.reasons import ensure_registry

    ensure_registry(apps.get_model("entitlements", "ReasonCode"), apps.get_model("entitlements", "TrafficClass"))


class Migration(migrations.Migration):
    dependencies = [("entitlements", "0001_initial")]
    operations = [
        migrations.RunPython(forward, reverse),
        migrations.RunPython(load_registry, migrations.RunPython.noop),
    ]
