"""A table as plain data (columns + rows of scalars) and its CSV / JSON renderings.

Every table a page shows is built once as a :class:`Table`, so the page, its CSV export and its
JSON export can never disagree.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Table:
    name: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, (_clean(v) for v in row), strict=True)) for row in self.rows]


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None  # JSON has no NaN/inf
    return v


def to_csv(table: Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(table.columns)
    for row in table.rows:
        w.writerow(["" if _clean(v) is None else _csv_cell(v) for v in row])
    return buf.getvalue()


def _csv_cell(v: Any) -> Any:
    if isinstance(v, dict | list):
        return json.dumps(v, ensure_ascii=False, sort_keys=True)
    if isinstance(v, str) and v[:1] in ("=", "+", "-", "@") and not _is_number(v):
        return "'" + v  # spreadsheet formula injection: model names and outputs are untrusted
    return v


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def to_json(table: Table) -> dict[str, Any]:
    return {"table": table.name, "columns": table.columns, "rows": table.records()}
