"""Make values storable on every engine: no NUL bytes (PostgreSQL text and JSON refuse them) and
no lone surrogates (not encodable as UTF-8: SQLite's driver and every JSON column refuse them).

Each offending character becomes U+FFFD. The runner calls this only when a write has failed, so
the hot path pays nothing, and records on the row which of its fields were changed."""

from __future__ import annotations

import re
from typing import Any

_BAD = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def clean(value: Any) -> tuple[Any, int]:
    """``(value with every bad character replaced, how many were replaced)``; containers are copied."""
    if isinstance(value, str):
        fixed, n = _BAD.subn(REPLACEMENT, value)
        return fixed, n
    if isinstance(value, dict):
        total, out = 0, {}
        for key, item in value.items():
            k, nk = clean(key) if isinstance(key, str) else (key, 0)
            v, nv = clean(item)
            out[k] = v
            total += nk + nv
        return out, total
    if isinstance(value, list | tuple):
        total, items = 0, []
        for item in value:
            v, n = clean(item)
            items.append(v)
            total += n
        return (items if isinstance(value, list) else tuple(items)), total
    return value, 0


def clean_row(row: dict[str, Any]) -> dict[str, Any]:
    """A sample row fit for storage; ``details["sanitized"]`` names the fields that were changed."""
    out: dict[str, Any] = {}
    changed: list[str] = []
    for key, value in row.items():
        fixed, n = clean(value)
        out[key] = fixed
        if n:
            changed.append(key)
    if changed:
        details = dict(out.get("details") or {})
        details["sanitized"] = {"fields": changed, "replacement": "U+FFFD",
                                "why": "NUL bytes and lone surrogates cannot be stored"}
        out["details"] = details
    return out
