"""The demo ships the conversation trace imported, once (issue 22: the calculator's trace mode lists it)."""

from io import StringIO

from django.core.management import call_command

from demo.trace import NAME
from telemetry.models import Trace


def test_load_demo_imports_the_conversation_trace_once(db):
    call_command("load_demo", stdout=StringIO())
    out = StringIO()
    call_command("load_demo", stdout=out)
    trace = Trace.objects.get(name=NAME)
    assert trace.tenant_id is None and trace.requests > 10_000
    assert "already imported" in out.getvalue()
    assert Trace.objects.count() == 1
