"""`manage.py import_history FILE`: hourly totals from another gateway, stored as imported rollups.

FILE is a CSV with the header `hour,tenant,model,region,traffic_class,requests,prompt_tokens,output_tokens,
throttled` or a JSON list of objects with those keys (or `{"rows": [...]}`); docs/migrating.md. Bad rows
are printed (CSV line or JSON index, the field, what is wrong) and refused; the good rows are kept. The
exit status is non-zero when any row was refused. Importing the same file again changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from telemetry.history_import import CSVError, import_history, parse_csv

SHOWN_ERRORS = 50


class Command(BaseCommand):
    help = "Import hourly history (CSV or JSON) per tenant × model × region × class as rollups marked imported."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--format", choices=("csv", "json"), default=None, help="default: from the file's suffix")

    def handle(self, *args: Any, file: Path, format: str | None, **options: Any) -> None:  # noqa: A002
        kind = format or ("json" if file.suffix.lower() == ".json" else "csv")
        try:
            data = file.read_bytes()
        except OSError as e:
            raise CommandError(f"cannot read {file}: {e.strerror or e}") from None
        try:
            rows = _rows(data, kind)
        except (CSVError, ValueError) as e:
            raise CommandError(f"{file}: {e}") from None
        result = import_history(rows)
        self.stdout.write(
            f"{file}: {result.accepted} hour(s) imported, {result.duplicates} already imported, "
            f"{result.live} kept as live telemetry measured them, {len(result.errors)} refused"
        )
        for err in result.errors[:SHOWN_ERRORS]:
            where = f"line {err['index'] + 2}" if kind == "csv" else f"row {err['index']}"
            self.stderr.write(f"{file}: {where}: {err['field']}: {err['message']}")
        if len(result.errors) > SHOWN_ERRORS:
            self.stderr.write(f"… and {len(result.errors) - SHOWN_ERRORS} more")
        if result.errors:
            raise CommandError(f"{len(result.errors)} bad row(s) refused; the other rows were kept")


def _rows(data: bytes, kind: str) -> list[Any]:
    if kind == "csv":
        return parse_csv(data)
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"not JSON: {e}") from None
    rows = doc.get("rows") if isinstance(doc, dict) else doc
    if not isinstance(rows, list):
        raise ValueError('a JSON list of rows, or {"rows": [...]}')
    return rows
