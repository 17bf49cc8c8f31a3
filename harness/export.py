"""Export a run's sample rows with pandas (csv, jsonl, parquet)."""

from __future__ import annotations

from pathlib import Path

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


def export_run(sessions: sessionmaker[Session], run_id: int, path: Path, fmt: str) -> int:
    import json

    df = run_frame(sessions, run_id)
    if fmt == "jsonl":
        df.to_json(path, orient="records", lines=True, date_format="iso", force_ascii=False)
    elif fmt == "csv":
        flat = df.copy()
        for c in ("input", "target", "prediction", "scores", "details"):
            flat[c] = flat[c].map(lambda v: json.dumps(v, ensure_ascii=False))
        flat.to_csv(path, index=False)
    else:
        flat = df.copy()
        for c in ("input", "target", "prediction", "scores", "details"):
            flat[c] = flat[c].map(lambda v: json.dumps(v, ensure_ascii=False))
        flat.to_parquet(path, index=False)
    return len(df)
