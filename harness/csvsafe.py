"""The one CSV writer (web exports and ``harness export --format csv``), safe to open in a spreadsheet.

Cells come from untrusted model outputs and pushed rows. A spreadsheet runs a cell that starts with
``=``, ``+``, ``-``, ``@``, TAB or CR (also after leading spaces) as a formula, so such text cells
get a leading ``'`` (plain numbers, which are harmless, are left alone). A cell with a comma, quote,
CR or LF is quoted (``csv``'s minimal quoting misses a lone CR when lines end in LF), so an embedded
line break can never start a new row.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable, Sequence
from typing import IO, Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_QUOTE_IF = (",", '"', "\r", "\n")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def neutralise(text: str) -> str:
    """``text`` with a leading ``'`` when a spreadsheet would take it for a formula."""
    head = text.lstrip(" ")
    if head[:1] in FORMULA_START and not _is_number(text.strip()):
        return "'" + text
    return text


def cell(value: Any) -> str:
    """One value as CSV cell text (before quoting): None and non-finite floats are empty, dicts and
    lists are JSON, text is neutralised."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, dict | list):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    elif not isinstance(value, str):
        return str(value)  # numbers, booleans, datetimes: never formulas
    return neutralise(value)


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in _QUOTE_IF) else text


def line(values: Iterable[Any]) -> str:
    return ",".join(_quoted(cell(v)) for v in values) + "\n"


def write(fh: IO[str], columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Write a header and rows; returns the number of rows."""
    fh.write(line(columns))
    n = 0
    for row in rows:
        fh.write(line(row))
        n += 1
    return n


def to_text(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    buf = io.StringIO()
    write(buf, columns, rows)
    return buf.getvalue()
