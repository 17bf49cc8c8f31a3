"""Export a run's sample rows: csv through the one safe CSV writer (harness.csvsafe), jsonl and parquet with pandas.

A path of ``-`` is standard output (text for csv and jsonl, bytes for parquet), as Unix tools read it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from harness.store.schema import SampleResultRow

COLUMNS = ["sample_id", "epoch", "input_hash", "input", "target", "output", "prediction", "answer", "scores",
           "unscored", "explanation", "details", "input_tokens", "output_tokens", "calls", "cost", "latency_s",
           "cached", "error", "error_kind", "created_at"]


def run_frame(sessions: sessionmaker[Session], run_id: int):  # type: ignore[no-untyped-def]
    import pandas as pd

    cols = [getattr(SampleResultRow, c) for c in COLUMNS]
    with sessions() as s:
        rows = s.execute(select(*cols).where(SampleResultRow.run_id == run_id)
                         .order_by(SampleResultRow.sample_id, SampleResultRow.epoch)).all()
    return pd.DataFrame(rows, columns=COLUMNS)


STDOUT = Path("-")


@contextmanager
def _target(path: Path, binary: bool = False) -> Iterator[IO[Any]]:
    if path == STDOUT:
        yield sys.stdout.buffer if binary else sys.stdout
        (sys.stdout.buffer if binary else sys.stdout).flush()
        return
    with open(path, "wb") if binary else open(path, "w", encoding="utf-8", newline="") as fh:
        yield fh


def export_csv(sessions: sessionmaker[Session], run_id: int, path: Path) -> int:
    """CSV through the one safe writer the web exports use (formula cells neutralised, CR/LF quoted);
    JSON columns are JSON text, even a plain-string target."""
    import json

    from harness.csvsafe import write

    json_cols = {COLUMNS.index(c) for c in ("input", "target", "prediction", "scores", "details")}
    cols = [getattr(SampleResultRow, c) for c in COLUMNS]
    with sessions() as s, _target(path) as fh:
        rows = s.execute(select(*cols).where(SampleResultRow.run_id == run_id)
                         .order_by(SampleResultRow.sample_id, SampleResultRow.epoch))
        return write(fh, COLUMNS, ([json.dumps(v, ensure_ascii=False) if i in json_cols else v
                                    for i, v in enumerate(row)] for row in rows))


def export_run(sessions: sessionmaker[Session], run_id: int, path: Path, fmt: str) -> int:
    import json

    if fmt == "csv":
        return export_csv(sessions, run_id, path)
    df = run_frame(sessions, run_id)
    if fmt == "jsonl":
        with _target(path) as fh:
            df.to_json(fh, orient="records", lines=True, date_format="iso", force_ascii=False)
    else:
        flat = df.copy()
        for c in ("input", "target", "prediction", "scores", "details"):
            flat[c] = flat[c].map(lambda v: json.dumps(v, ensure_ascii=False))
        with _target(path, binary=True) as fh:
            flat.to_parquet(fh, index=False)
    return len(df)
