"""`manage.py import_trace FILE [--name NAME] [--tenant SLUG]`: store a trace, print its characterisation.

A file with bad rows is rejected whole: every bad line is printed (line number, column, what is
wrong), the exit status is non-zero and no Trace row is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from capacity.traces import TraceParseError
from entitlements.models import Tenant
from telemetry.trace_import import trace_import, trace_summary

SHOWN_ERRORS = 50


class Command(BaseCommand):
    help = "Import a TIMESTAMP,ContextTokens,GeneratedTokens CSV (Azure LLM trace format) and print its statistics."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--name", default="", help="default: the file name")
        parser.add_argument("--tenant", default="", help="tenant slug; default: platform-wide (everyone may use it)")

    def handle(self, *args: Any, file: Path, name: str, tenant: str, **options: Any) -> None:
        owner = None
        if tenant:
            owner = Tenant.objects.filter(slug=tenant).first()
            if owner is None:
                raise CommandError(f"no tenant '{tenant}'")
        try:
            data = file.read_bytes()
        except OSError as e:
            raise CommandError(f"cannot read {file}: {e.strerror or e}")
        try:
            trace = trace_import(data=data, name=name or file.name, tenant=owner)
        except TraceParseError as e:
            for line, field, message in e.errors[:SHOWN_ERRORS]:
                self.stderr.write(f"{file}:{line}: {field}: {message}")
            more = len(e.errors) - SHOWN_ERRORS
            if more > 0:
                self.stderr.write(f"… and {more} more")
            raise CommandError(f"{len(e.errors)} bad line(s) in {file}; nothing was imported")
        summary = trace_summary(trace)
        self.stdout.write(
            f"imported trace {trace.pk} '{trace.name}' ({'tenant ' + tenant if tenant else 'platform-wide'})"
        )
        self.stdout.write(
            json.dumps({k: v for k, v in summary.items() if k not in ("id", "name", "tenant", "created_at")}, indent=2)
        )
