"""Runs never hang and never lose a row: replies the database cannot store as they are (lone
surrogates, NUL bytes) are sanitised and recorded, a run whose every sample failed is `failed`, an
empty task is a one-line error, and unknown or malformed backend settings are refused by name."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from sqlalchemy import select

from harness.runner import EvalConfig, RunConfigError, Runner
from harness.store.db import open_db
from harness.store.schema import RunRow, SampleResultRow
from harness.task import ScoreContext, Task
from harness.types import Message, Output, Sample, Score

BAD_TEXTS = ["lone \ud800 surrogate", "nul \x00 byte", "both \udfff and \x00", "fine"]


def _task(texts: list[str]) -> Task:
    samples = [Sample(f"s{i}", [Message.text("user", t)], target=t) for i, t in enumerate(texts)]

    def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
        return Score({"acc": 1.0}, answer=output.text)

    return Task(name="hardening", version="1", load=lambda: samples, score=score, content_hash="h",
                primary_metric="acc")


class Raising:
    spec = "test:raising"
    batch_size = 2
    concurrency = 2
    modalities = frozenset({"text"})
    cacheable = False

    async def generate(self, requests):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0)
        raise ConnectionResetError("peer reset")


def test_unstorable_replies_are_sanitised_and_every_row_is_stored(db_url: str) -> None:
    sessions = open_db(db_url)
    cfg = EvalConfig(task="hardening", model="builtin:echo", db_url=db_url, progress=False, run_name="bad-text")
    summary = Runner(cfg, session_factory=sessions, task=_task(BAD_TEXTS * 3)).run()
    assert summary.status == "finished" and summary.n_new == 12
    with sessions() as s:
        rows = s.scalars(select(SampleResultRow).order_by(SampleResultRow.sample_id)).all()
    assert len(rows) == 12
    by_id = {r.sample_id: r for r in rows}
    assert "\ufffd" in by_id["s0"].output and "\x00" not in by_id["s1"].output
    assert by_id["s0"].details["sanitized"]["fields"] and "output" in by_id["s0"].details["sanitized"]["fields"]
    assert by_id["s3"].output == "fine" and "sanitized" not in (by_id["s3"].details or {})
    # a rerun resumes: nothing new, nothing duplicated
    again = Runner(cfg, session_factory=sessions, task=_task(BAD_TEXTS * 3)).run()
    assert again.n_new == 0 and again.n_skipped == 12


def test_a_run_whose_every_sample_failed_is_failed(db_url: str) -> None:
    sessions = open_db(db_url)
    cfg = EvalConfig(task="hardening", model="test:raising", db_url=db_url, progress=False, run_name="all-bad")
    summary = Runner(cfg, session_factory=sessions, task=_task(["a", "b", "c"]), model=Raising()).run()
    assert summary.status == "failed" and summary.n_errors == 3
    with sessions() as s:
        assert s.scalar(select(RunRow.status).where(RunRow.name == "all-bad")) == "failed"


def test_an_empty_task_is_an_error_not_a_finished_run(sqlite_url: str) -> None:
    cfg = EvalConfig(task="hardening", model="builtin:echo", db_url=sqlite_url, progress=False)
    with pytest.raises(RunConfigError, match="no samples"):
        Runner(cfg, task=_task([])).run()


@pytest.mark.parametrize(("setting", "expected"), [
    ("temprature=0.5", "did you mean 'temperature'"),
    ("batch_size=many", "bad setting value"),
    ("concurrency=-3", "must be >= 1"),
])
def test_bad_backend_settings_are_one_line_errors(sqlite_url: str, setting: str, expected: str) -> None:
    done = subprocess.run([sys.executable, "-m", "harness.cli", "eval", "-t", "gsm8k", "-m", "builtin:number",
                           "-M", setting, "--limit", "2", "--db", sqlite_url], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and expected in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_unknown_builtin_model_is_one_line(sqlite_url: str) -> None:
    done = subprocess.run([sys.executable, "-m", "harness.cli", "eval", "-t", "gsm8k", "-m", "builtin:nope",
                           "--limit", "2", "--db", sqlite_url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "unknown builtin model 'nope'" in done.stderr and "Traceback" not in done.stderr


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "COLUMNS": "200"})


def test_a_continued_run_keeps_every_invocation_and_resume_refuses_new_settings(sqlite_url: str) -> None:
    first = _cli("eval", "-t", "gsm8k", "-m", "builtin:number", "--limit", "5", "--db", sqlite_url,
                 "--run-name", "grow", "--no-progress")
    assert first.returncode == 0, first.stderr
    more = _cli("eval", "-t", "gsm8k", "-m", "builtin:number", "--limit", "12", "--db", sqlite_url,
                "--run-name", "grow", "--no-progress")
    assert more.returncode == 0, more.stderr
    shown = _cli("show", "grow", "--db", sqlite_url)
    assert "samples stored: 12" in shown.stdout
    assert "invocation 1:" in shown.stdout and "limit=5" in shown.stdout and "limit=12" in shown.stdout
    refused = _cli("eval", "--resume", "grow", "-M", "temperature=0.7", "--db", sqlite_url)
    assert refused.returncode == 2 and "-M" in refused.stderr and "identity" in refused.stderr
    # resuming with only --limit is how-much, not what: allowed
    resumed = _cli("eval", "--resume", "grow", "--limit", "14", "--db", sqlite_url, "--no-progress")
    assert resumed.returncode == 0 and "2 new, 12 already done" in resumed.stdout


def test_two_identical_evals_started_together_share_one_run(db_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Both processes open a brand-new database and the same run at once: neither dies, every sample
    is sent to the model once (the other process leaves leased samples alone) and stored once."""
    args = [sys.executable, "-m", "harness.cli", "eval", "-t", "gsm8k", "-m", "builtin:number", "-M", "delay=0.05",
            "-M", "batch_size=4", "--limit", "40", "--db", db_url, "--no-progress"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=180) for p in procs]
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
    # sample leases: each sample went to the model once, from one of the two processes
    import re

    new = [int(re.search(r"(\d+) new", out).group(1)) for out, _ in results]  # type: ignore[union-attr]
    assert sum(new) == 40, [out for out, _ in results]
    sessions = open_db(db_url)
    with sessions() as s:
        assert s.scalar(select(__import__("sqlalchemy").func.count()).select_from(RunRow)) == 1
        ids = s.scalars(select(SampleResultRow.sample_id)).all()
    assert len(ids) == 40 and len(set(ids)) == 40


def test_unreadable_inputs_and_databases_are_one_line_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes('{"question": "café", "answer": "1"}\n'.encode("latin-1"))
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"x": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(bytes(range(256)) * 4)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    db = f"sqlite:///{tmp_path / 'ok.db'}"
    cases = {str(latin1): "not UTF-8", str(deep): "nested too deeply", str(binary): "not UTF-8",
             str(empty): "no samples", "/dev/null": "no samples", str(tmp_path): "is a folder"}
    for path, expected in cases.items():
        done = _cli("eval", "-t", "qa", "-T", f"path={path}", "-m", "builtin:echo", "--db", db)
        assert done.returncode == 2, (path, done.stderr)
        assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1, (path, done.stderr)
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"\x13" * 5000)
    truncated = tmp_path / "truncated.db"
    assert _cli("eval", "-t", "gsm8k", "-m", "builtin:number", "--limit", "2", "--db", db,
                "--no-progress").returncode == 0
    truncated.write_bytes((tmp_path / "ok.db").read_bytes()[:8192])
    read_only = f"sqlite:///file:{tmp_path / 'ok.db'}?mode=ro&uri=true"
    for url, expected in ((f"sqlite:///{corrupt}", "not a database"), (f"sqlite:///{truncated}", "malformed"),
                          (read_only, "readonly")):
        done = _cli("eval", "-t", "gsm8k", "-m", "builtin:number", "--limit", "4", "--db", url, "--no-progress")
        assert done.returncode == 2 and expected in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_names_longer_than_the_columns_are_refused_up_front(db_url: str) -> None:
    long_task = _task(["x"])
    long_task.load = lambda: [Sample("s" * 301, [Message.text("user", "x")])]  # type: ignore[method-assign]
    with pytest.raises(RunConfigError, match="longer than 300"):
        Runner(EvalConfig(task="hardening", model="builtin:echo", db_url=db_url, progress=False),
               task=long_task).run()
    with pytest.raises(RunConfigError, match="run name"):
        Runner(EvalConfig(task="hardening", model="builtin:echo", db_url=db_url, progress=False, run_name="r" * 301),
               task=_task(["x"])).run()


@pytest.mark.parametrize(("spec", "key", "closest"), [
    ("builtin:echo", "temprature", "temperature"), ("openai:m", "temprature", "temperature"),
    ("openai:m", "base_ur", "base_url"), ("hf:./nowhere", "dtyp", "dtype"), ("hf:./nowhere", "max_token", "max_tokens"),
])
def test_a_near_miss_setting_is_refused_on_every_backend(spec: str, key: str, closest: str) -> None:
    from harness.modelspec import ModelSpecError, build_model

    with pytest.raises(ModelSpecError, match=f"unknown setting {key!r}; did you mean {closest!r}"):
        build_model(spec, {key: 1})


def test_every_backend_refuses_a_misspelt_generation_key() -> None:
    """The registry's check runs before any factory: whatever a backend declares, `temprature` is
    never passed on (and silently ignored)."""
    from harness.modelspec import ModelSpecError, check_settings
    from harness.registry import entries

    backends = [e for e in entries("model") if not e.operator]
    assert len(backends) >= 10
    for entry in backends:
        with pytest.raises(ModelSpecError, match="temperature"):
            check_settings(entry, {"temprature": 0.5})
