"""A table as plain data (columns + rows of scalars) and its CSV / JSON renderings.

Every table a page shows is built once as a :class:`Table`, so the page, its CSV export and its
JSON export can never disagree.
"""

from __future__ import annotations

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
    # the one CSV writer (also `harness export`): formula cells neutralised, CR/LF always quoted
    from harness.csvsafe import to_text

    return to_text(table.columns, table.rows)


def to_json(table: Table) -> dict[str, Any]:
    return {"table": table.name, "columns": table.columns, "rows": table.records()}
