"""Bulk inserts on the runner's write path: one driver ``executemany`` per table and commit.

SQLAlchemy's ``insert().on_conflict_do_nothing()`` with a list of parameter dicts processes every
row's every column in Python (bind processors, parameter construction) and, for the JSON columns,
``json.dumps``: at API rates that cost more than the HTTP client. Here the statement text and the
per-column converters are built once per dialect and table; JSON columns go through
:func:`harness.store.jsoncol.dumps` and every other column through the dialect's own bind processor,
so what is stored reads back exactly as before. Rows must carry every column but the primary key;
anything else (another engine, a partial row) takes SQLAlchemy's path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import JSON, Table
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session
from sqlalchemy.sql import FromClause

from harness.store.jsoncol import dumps

_Plan = tuple[str, int, Callable[[dict[str, Any]], tuple[Any, ...]], list[tuple[int, Callable[[Any], Any]]]]
_PLANS: dict[tuple[str, str, tuple[str, ...] | None], _Plan] = {}
_PLACEHOLDER = {"sqlite": "?", "postgresql": "%s"}


def _plan(dialect: Dialect, table: Table, conflict: Sequence[str] | None) -> _Plan:
    key = (dialect.name, table.name, tuple(conflict) if conflict is not None else None)
    plan = _PLANS.get(key)
    if plan is None:
        # the surrogate key is the database's to assign
        columns = [c for c in table.columns if not (c.primary_key and c.name == "id")]
        quote = dialect.identifier_preparer.quote
        mark = _PLACEHOLDER[dialect.name]
        sql = (f"INSERT INTO {quote(table.name)} ({', '.join(quote(c.name) for c in columns)}) "
               f"VALUES ({', '.join(mark for _ in columns)})")
        if conflict is not None:
            sql += f" ON CONFLICT ({', '.join(quote(k) for k in conflict)}) DO NOTHING"
        converters: list[tuple[int, Callable[[Any], Any]]] = []
        for i, c in enumerate(columns):
            conv = dumps if isinstance(c.type, JSON) else c.type.dialect_impl(dialect).bind_processor(dialect)
            if conv is not None:
                converters.append((i, conv))
        # itemgetter: the row's values in column order in one C call (a KeyError when one is missing)
        plan = _PLANS[key] = (sql, len(columns), itemgetter(*(c.name for c in columns)), converters)
    return plan


def insert_rows(session: Session, table: FromClause, rows: Sequence[dict[str, Any]],
                conflict: Sequence[str] | None = None) -> int | None:
    """Insert ``rows`` (ignoring those that clash on ``conflict`` when given) with one driver
    ``executemany``; the number of rows inserted (-1 when the driver cannot say), or None when this
    path does not apply (another engine, rows without every column) and nothing was done."""
    if not rows:
        return 0
    assert isinstance(table, Table)  # a mapped class's __table__
    dialect = session.get_bind().dialect
    if dialect.name not in _PLACEHOLDER:
        return None
    sql, width, values, converters = _plan(dialect, table, conflict)
    params: list[tuple[Any, ...]] = []
    try:
        for row in rows:
            if len(row) != width:
                return None
            vals = list(values(row))
            for i, conv in converters:
                vals[i] = conv(vals[i])
            params.append(tuple(vals))
    except KeyError:
        return None
    result = session.connection().exec_driver_sql(sql, params)
    count = getattr(result, "rowcount", -1)
    return int(count) if isinstance(count, int) else -1
