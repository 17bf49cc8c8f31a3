"""Shared data for the leaderboard tests: a results database filled by real runs plus hand-made
hostile rows (XSS payloads in every text field a page shows). No tests here."""

from __future__ import annotations

import os
import struct
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from requirements import missing
from sqlalchemy.orm import Session, sessionmaker

from harness.runner import EvalConfig, Runner
from harness.store import ops
from harness.store.db import open_db
from harness.store.schema import JudgementRow, RunRow, utcnow
from harness.types import Metric

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
XSS_OUTPUT = f"I think {SCRIPT} and {IMG} #### 42"
XSS_MODEL = f"evil{IMG}"
XSS_RUN = "xss-probe-run"


def tiny_png(path: Path, width: int = 96, height: int = 64) -> Path:
    """A valid RGB gradient PNG written without Pillow."""
    raw = b"".join(b"\x00" + b"".join(bytes((x * 255 // width, y * 255 // height, 160)) for x in range(width))
                   for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    path.write_bytes(png)
    return path


def real_runs(sessions: sessionmaker[Session], limit: int = 30) -> dict[str, int]:
    """gsm8k runs by the built-in models (the number model is right on many questions, echo on none)."""
    out = {}
    for spec, settings in (("builtin:number", {}), ("builtin:echo", {}), ("builtin:constant", {"text": "#### 18"})):
        cfg = EvalConfig(task="gsm8k", model=spec, model_settings=settings, limit=limit, progress=False)
        out[spec] = Runner(cfg, session_factory=sessions).run().run_id
    return out


def hostile_run(sessions: sessionmaker[Session], media_root: Path | None = None) -> int:
    """A hand-made run whose model name, outputs, answers, errors, judge verdicts and breakdown
    values carry script and img-onerror payloads; sample 0 also has an image under ``media_root``."""
    image = tiny_png(media_root / "input.png") if media_root else None
    with sessions.begin() as s:
        task = ops.get_or_create_task(s, name="gsm8k", version="1", content_hash="hostile", family="text",
                                      description=f"hostile {SCRIPT}", modalities=["text", "image"],
                                      primary_metric="exact_match",
                                      metrics={"exact_match": {"direction": "higher", "scale": "fraction",
                                                               "display": f"exact match {IMG}"}})
        model = ops.get_or_create_model(s, f"builtin:constant?text={SCRIPT}", backend="builtin",
                                        display_name=XSS_MODEL, info={"size": IMG})
        run = RunRow(name=XSS_RUN, task_id=task.id, model_id=model.id, judge_spec=f"judge{SCRIPT}",
                     config={"task": "gsm8k", "model": XSS_MODEL, "note": SCRIPT}, config_hash="x" * 64,
                     harness_version="0.1.0", git_revision=IMG, status="finished", n_samples=3,
                     started_at=utcnow(), finished_at=utcnow())
        s.add(run)
        s.flush()
        verdict = {"judge_spec": f"judge{SCRIPT}", "prompt_hash": "p" * 64, "raw": f"raw {IMG}",
                   "verdict": {"value": 1, "reason": SCRIPT}}
        parts = [{"type": "text", "text": f"question {IMG}"}]
        if image is not None:
            parts.append({"type": "image", "path": str(image)})
        rows = []
        for i in range(3):
            rows.append({
                "run_id": run.id, "sample_id": f"x{i}", "epoch": 0, "input_hash": "",
                "input": {"messages": [{"role": "user", "content": parts}], "metadata": {"category": SCRIPT}},
                "target": "42", "output": XSS_OUTPUT, "prediction": None, "answer": IMG,
                "scores": {"exact_match": float(i != 2)}, "unscored": None, "explanation": f"why {SCRIPT}",
                "details": {"_judgements": [verdict]}, "input_tokens": 3, "output_tokens": 9, "calls": 1,
                "cost": 0.001, "latency_s": 0.1, "cached": False, "error": f"boom {SCRIPT}" if i == 2 else None,
                "error_kind": "model" if i == 2 else None, "created_at": utcnow(),
            })
        ops.write_samples(s, rows)
        s.add(JudgementRow(run_id=run.id, sample_id="x0", epoch=0, **verdict))
        ops.replace_metrics(s, run.id, [Metric("exact_match", 1.0, 1.0, 1.0, 2),
                                        Metric("exact_match", 1.0, 1.0, 1.0, 2, "category", SCRIPT),
                                        Metric("cost_per_sample", 0.001, 0.001, 0.001, 3)])
        ops.refresh_run_counts(s, run.id)
        return run.id


def populate(db_url: str, media_root: Path | None = None, limit: int = 30) -> dict[str, int]:
    sessions = open_db(db_url)
    ids = real_runs(sessions, limit)
    ids["hostile"] = hostile_run(sessions, media_root)
    sessions.kw["bind"].dispose()
    return ids


@contextmanager
def fresh_database(kind: str, tmp_dir: Path) -> Iterator[str]:
    """A new empty database URL of ``kind`` (sqlite file, or a database on the test PostgreSQL
    server like tests/conftest.py's ``pg_url``, for module-scoped fixtures that cannot use it)."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_dir / 'lb.db'}"
        return
    from sqlalchemy import create_engine, text

    admin = os.environ.get("HARNESS_TEST_PG_URL")
    if not admin:
        missing("the PostgreSQL server (HARNESS_TEST_PG_URL)", "tests/run.sh starts it (tests/setup.d/10-postgres.sh)")
    name = f"lb_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield f"{admin.rsplit('/', 1)[0]}/{name}"
    finally:
        with engine.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        engine.dispose()
