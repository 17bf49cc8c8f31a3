"""Listing output for the CLI: a table that fits the terminal, or the same records as JSON or CSV.

A command builds plain records (JSON-able dicts) and :class:`Column` s that say how each shows in
a table. The table fits the width it is given: low-priority columns are left out first (the footer
says which, and that ``--json`` has them all), then the remaining text columns wrap; identifier
columns (run ids and names: what a user copies into the next command) are never cut or wrapped,
even when that makes the table wider than the terminal. Piped output has no terminal: it is as wide
as it needs to be (``$COLUMNS``, when set, is the width instead), so ``harness runs | grep x``
sees whole rows, never rich's 80-column ellipses.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the records as JSON")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Print the records as CSV")]

# rich's default box: one border character left of every column, one at the end, a space each side
_EDGE, _PER_COLUMN = 1, 3


@dataclass(frozen=True, slots=True)
class Column:
    """``key``: the record field; ``show``: how a record shows in the cell (default ``str`` of the
    field, empty for None); ``drop``: 0 = always shown, higher = left out sooner when the table is too
    wide; ``ident``: never wrapped or cut."""

    header: str
    key: str
    show: Callable[[dict[str, Any]], str] | None = None
    drop: int = 0
    ident: bool = False
    right: bool = False

    def cell(self, record: dict[str, Any]) -> str:
        if self.show is not None:
            return self.show(record)
        value = record.get(self.key)
        return "" if value is None else str(value)


def output_width() -> int | None:
    """The width tables must fit: the terminal's, else ``$COLUMNS``, else None (as wide as needed)."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    if sys.stdout.isatty():
        return shutil.get_terminal_size((80, 24)).columns
    return None


def _natural(column: Column, cells: list[str]) -> int:
    return max([len(column.header)] + [len(c) for c in cells])


def _least(column: Column, cells: list[str]) -> int:
    """The narrowest a column can wrap to: its full width for identifiers, else its longest word
    (at most 24: a longer one folds)."""
    if column.ident:
        return _natural(column, cells)
    words = [w for c in cells for w in c.split()] + column.header.split()
    return min(_natural(column, cells), max([len(w) for w in words] + [1]), 24)


def _total(widths: list[int]) -> int:
    return _EDGE + sum(w + _PER_COLUMN for w in widths)


def fit_columns(columns: Sequence[Column], cells: list[list[str]], width: int | None) -> list[int]:
    """Indices of the columns to show: all when they fit ``width`` unwrapped, else drop the
    highest-``drop`` ones until the shown columns fit with text columns wrapped down to their
    longest word (identifier columns keep their full width)."""
    shown = list(range(len(columns)))
    if width is None:
        return shown
    by_col = [[row[i] for row in cells] for i in range(len(columns))]
    if _total([_natural(columns[i], by_col[i]) for i in shown]) <= width:
        return shown
    def fits(idx: list[int]) -> bool:
        return _total([_least(columns[j], by_col[j]) for j in idx]) <= width

    dropped: list[int] = []
    for i in sorted((i for i in shown if columns[i].drop > 0), key=lambda i: (-columns[i].drop, -i)):
        if fits(shown):
            break
        shown.remove(i)
        dropped.append(i)
    # a narrow column dropped early may fit again once a wide one has gone (task after model)
    for i in reversed(dropped):
        if fits(sorted([*shown, i])):
            shown = sorted([*shown, i])
    return shown


def render_table(title: str, columns: Sequence[Column], records: Sequence[dict[str, Any]],
                 width: int | None = None, footer: str = "") -> str:
    """The table as text (no colour), fitted to ``width`` (see :func:`fit_columns`)."""
    from rich.console import Console
    from rich.table import Table

    cells = [[c.cell(r) for c in columns] for r in records]
    shown = fit_columns(columns, cells, width)
    by_col = {i: [row[i] for row in cells] for i in shown}
    least = {i: _least(columns[i], by_col[i]) for i in shown}
    table = Table(title=title or None)
    for i in shown:
        c = columns[i]
        # min_width: rich shrinks wrappable columns evenly, which would fold words a narrower
        # neighbour could have spared; identifiers are never shrunk at all
        table.add_column(c.header, justify="right" if c.right else "left", no_wrap=c.ident, overflow="fold",
                         min_width=least[i])
    for row in cells:
        table.add_row(*(row[i] for i in shown))
    natural = _total([_natural(columns[i], by_col[i]) for i in shown])
    # when even the narrowest layout exceeds the terminal, the table is wider than it: never cut
    out_width = min(max(width, _total(list(least.values()))), natural) if width is not None else natural
    buf = io.StringIO()
    con = Console(file=buf, width=max(out_width, 20), no_color=True, highlight=False, emoji=False,
                  markup=False, force_terminal=False, soft_wrap=False)
    con.print(table)
    dropped = [columns[i].header for i in range(len(columns)) if i not in shown]
    notes = [footer] if footer else []
    if dropped:
        notes.append(f"(left out to fit {width} columns: {', '.join(dropped)}; --json or --csv has every field)")
    return buf.getvalue() + "".join(n + "\n" for n in notes)


def to_csv(records: Sequence[dict[str, Any]], fields: Sequence[str] | None = None) -> str:
    """CSV of the records through the project's one CSV writer (:mod:`harness.csvsafe`: lists and
    mappings as JSON, formula-like text neutralised): a header of ``fields`` (default every key,
    in first-seen order)."""
    from harness import csvsafe

    keys = list(fields) if fields is not None else list(dict.fromkeys(k for r in records for k in r))
    buf = io.StringIO()
    csvsafe.write(buf, keys, ([r.get(k) for k in keys] for r in records))
    return buf.getvalue()


def emit(records: Sequence[dict[str, Any]], columns: Sequence[Column], *, title: str = "", as_json: bool = False,
         as_csv: bool = False, json_value: Any = None, footer: str = "") -> None:
    """Print the records as the user asked: JSON (``json_value`` when a command's JSON is more than
    its rows), CSV, or the fitted table."""
    from harness.cli_support import fail

    if as_json and as_csv:
        fail("--json and --csv: choose one")
    if as_json:
        typer.echo(json.dumps(records if json_value is None else json_value, indent=2, default=str))
    elif as_csv:
        typer.echo(to_csv(records), nl=False)
    else:
        typer.echo(render_table(title, columns, records, output_width(), footer), nl=False)
