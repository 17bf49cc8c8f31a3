"""Dataset helpers: JSONL/JSON reading with errors that name the file, the row and the field.

Local files are read with the standard library (fast start-up); hub ids go through
``datasets.load_dataset``, imported only then.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.errors import UserError


class DatasetError(UserError, ValueError):
    """A malformed dataset: the message says which file, which row and which field."""


def file_hash(*paths: str | Path, extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for p in paths:
        path = Path(p)
        if path.is_dir():
            raise DatasetError(f"{path}: is a folder, not a data file")
        try:
            h.update(path.read_bytes())
        except OSError as exc:
            raise DatasetError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return h.hexdigest()


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, row) for each non-empty line. Anything that is not a readable
    UTF-8 JSONL file (a folder, a binary or latin-1 file, absurdly deep nesting) is a one-line
    DatasetError naming the file and line. (An empty file yields nothing: the runner then refuses a
    task without samples.)"""
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: file not found")
    if path.is_dir():
        raise DatasetError(f"{path}: is a folder, not a JSONL file")
    try:
        with path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                if "\x00" in line:
                    raise DatasetError(f"{path}:{lineno}: a NUL byte: a binary file, not JSONL")
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
                except RecursionError:
                    raise DatasetError(f"{path}:{lineno}: JSON nested too deeply to read") from None
                if not isinstance(row, dict):
                    raise DatasetError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
                yield lineno, row
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); a binary or latin-1 "
                           "file? convert it to UTF-8 JSONL") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror or exc})") from None


def require(row: dict[str, Any], field: str, where: str, kind: type | tuple[type, ...] = str) -> Any:
    if field not in row or row[field] is None:
        raise DatasetError(f"{where}: missing field {field!r}")
    value = row[field]
    if not isinstance(value, kind):
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise DatasetError(f"{where}: field {field!r} should be {name}, got {type(value).__name__}")
    return value


def load_hub(path: str, name: str | None = None, split: str = "test") -> list[dict[str, Any]]:
    """Load a split through ``datasets.load_dataset`` (hub id, or a builder like "json")."""
    from datasets import load_dataset

    return list(load_dataset(path, name, split=split))
