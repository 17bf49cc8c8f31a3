"""Runner behaviour on a real SQLite file and a real PostgreSQL server: rows, resume, cache, errors."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sqlalchemy import func, select

from harness.runner import EvalConfig, RunConfigError, Runner
from harness.store.db import open_db
from harness.store.schema import CacheRow, MetricRow, RunRow, SampleResultRow
from harness.task import ScoreContext, Task
from harness.types import GenerationConfig, Message, Output, Request, Sample, Score


def _count(sessions, run_id: int | None = None) -> int:
    with sessions() as s:
        q = select(func.count(SampleResultRow.id))
        if run_id is not None:
            q = q.where(SampleResultRow.run_id == run_id)
        return s.scalar(q)


def _duplicates(sessions) -> int:
    with sessions() as s:
        q = (select(SampleResultRow.run_id, SampleResultRow.sample_id, SampleResultRow.epoch)
             .group_by(SampleResultRow.run_id, SampleResultRow.sample_id, SampleResultRow.epoch)
             .having(func.count() > 1))
        return len(s.execute(q).all())


def test_gsm8k_run_stores_every_sample_and_metrics(db_url):
    sessions = open_db(db_url)
    summary = Runner(EvalConfig(task="gsm8k", model="builtin:number", limit=30, progress=False),
                     session_factory=sessions).run()
    assert summary.status == "finished"
    assert summary.n_new == 30 and summary.n_errors == 0
    assert _count(sessions, summary.run_id) == 30
    with sessions() as s:
        run = s.get(RunRow, summary.run_id)
        assert run.n_done == 30 and run.status == "finished"
        assert run.config["task_hash"] and run.harness_version
        em = s.scalar(select(MetricRow).where(MetricRow.run_id == run.id, MetricRow.name == "exact_match_flexible"))
        rows = s.scalars(select(SampleResultRow).where(SampleResultRow.run_id == run.id)).all()
    # the metric is the mean of the stored per-sample scores, with a CI around it
    mean = sum(r.scores["exact_match_flexible"] for r in rows) / len(rows)
    assert em.value == pytest.approx(mean)
    assert em.n == 30 and em.ci_low <= em.value <= em.ci_high
    # builtin:number answers with the question's last number; some GSM8K answers are exactly that
    assert 0 < em.value < 0.5
    first = next(r for r in rows if r.sample_id == "0")
    assert first.target == "18" and first.input["messages"][0]["role"] == "user"
    assert first.input_hash and first.output.startswith("####")


def test_rerun_resumes_extends_and_never_duplicates(db_url):
    sessions = open_db(db_url)
    cfg = EvalConfig(task="gsm8k", model="builtin:number", limit=10, progress=False)
    first = Runner(cfg, session_factory=sessions).run()
    again = Runner(cfg, session_factory=sessions).run()
    assert again.run_id == first.run_id
    assert again.n_new == 0 and again.n_skipped == 10
    more = Runner(EvalConfig(task="gsm8k", model="builtin:number", limit=25, progress=False),
                  session_factory=sessions).run()
    assert more.run_id == first.run_id and more.n_new == 15 and more.n_skipped == 10
    assert _count(sessions, first.run_id) == 25
    assert _duplicates(sessions) == 0


def test_epochs_and_sample_selection(sqlite_url):
    sessions = open_db(sqlite_url)
    s = Runner(EvalConfig(task="gsm8k", model="builtin:number", sample_ids=["3", "7"], epochs=3,
                          progress=False), session_factory=sessions).run()
    assert s.n_new == 6
    with sessions() as ses:
        keys = set(ses.execute(select(SampleResultRow.sample_id, SampleResultRow.epoch)).all())
    assert keys == {(i, e) for i in ("3", "7") for e in range(3)}
    with pytest.raises(RunConfigError, match="unknown sample ids"):
        Runner(EvalConfig(task="gsm8k", model="builtin:number", sample_ids=["nope"], progress=False),
               session_factory=sessions).run()


def test_same_name_different_config_is_refused(sqlite_url):
    sessions = open_db(sqlite_url)
    Runner(EvalConfig(task="gsm8k", model="builtin:number", limit=2, run_name="r1", progress=False),
           session_factory=sessions).run()
    with pytest.raises(RunConfigError, match="different configuration"):
        Runner(EvalConfig(task="gsm8k", model="builtin:echo", limit=2, run_name="r1", progress=False),
               session_factory=sessions).run()


class CountingModel:
    """A cacheable model that counts the requests it really served."""

    spec = "test:counting"
    batch_size = 4
    concurrency = 2
    modalities = frozenset({"text"})
    cacheable = True

    def __init__(self) -> None:
        self.served = 0

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        self.served += len(requests)
        return [Output(text=f"#### {len(r.messages[0].text_content)}") for r in requests]


def test_response_cache_is_shared_across_runs_and_bypassable(db_url):
    sessions = open_db(db_url)
    m1 = CountingModel()
    Runner(EvalConfig(task="gsm8k", model="test:counting", limit=12, run_name="a", progress=False),
           session_factory=sessions, model=m1).run()
    assert m1.served == 12
    m2 = CountingModel()
    s2 = Runner(EvalConfig(task="gsm8k", model="test:counting", limit=12, run_name="b", progress=False),
                session_factory=sessions, model=m2).run()
    assert m2.served == 0 and s2.n_new == 12
    with sessions() as s:
        assert s.scalar(select(func.count(CacheRow.key))) == 12
        assert all(s.scalars(select(SampleResultRow.cached).where(SampleResultRow.run_id == s2.run_id)))
    m3 = CountingModel()
    Runner(EvalConfig(task="gsm8k", model="test:counting", limit=12, run_name="c", use_cache=False,
                      progress=False), session_factory=sessions, model=m3).run()
    assert m3.served == 12


def test_every_reply_reaches_the_cache_across_many_commits(db_url, monkeypatch):
    """Replies are cached through the group commit; with a commit every 2 rows, the cache rows that
    arrive after the first commit must land too (not in a buffer a commit already took)."""
    import harness.writer

    monkeypatch.setattr(harness.writer, "FLUSH_ROWS", 2)
    sessions = open_db(db_url)
    m1 = CountingModel()
    Runner(EvalConfig(task="gsm8k", model="test:counting", limit=12, run_name="many", progress=False),
           session_factory=sessions, model=m1).run()
    with sessions() as s:
        assert s.scalar(select(func.count(CacheRow.key))) == 12
    m2 = CountingModel()
    Runner(EvalConfig(task="gsm8k", model="test:counting", limit=12, run_name="again", progress=False),
           session_factory=sessions, model=m2).run()
    assert m2.served == 0


def test_a_database_that_stops_taking_rows_fails_the_run_loudly_and_a_rerun_completes(db_url, monkeypatch):
    """Commits run on the writer's thread: a write that keeps failing still fails the run with one
    line counting what was not stored, the run says failed, and a rerun stores exactly the rest."""
    from sqlalchemy.exc import OperationalError

    import harness.writer
    from harness.store import ops
    from harness.writer import StoreWriteError

    monkeypatch.setattr(harness.writer, "FLUSH_ROWS", 2)
    real = ops.write_samples
    calls = {"n": 0}

    def failing(session, rows):
        calls["n"] += 1
        if calls["n"] > 1:
            raise OperationalError("INSERT", {}, Exception("disk I/O error"))
        return real(session, rows)

    monkeypatch.setattr(ops, "write_samples", failing)
    sessions = open_db(db_url)
    cfg = EvalConfig(task="gsm8k", model="test:counting", limit=12, run_name="w", progress=False)
    with pytest.raises(StoreWriteError, match=r"could not store \d+ finished samples .*disk I/O error"):
        Runner(cfg, session_factory=sessions, model=CountingModel()).run()
    with sessions() as s:
        run = s.scalars(select(RunRow).where(RunRow.name == "w")).one()
        stored = s.scalar(select(func.count()).select_from(SampleResultRow).where(SampleResultRow.run_id == run.id))
        assert run.status == "failed" and 0 < stored < 12
    monkeypatch.setattr(ops, "write_samples", real)
    again = Runner(cfg, session_factory=sessions, model=CountingModel()).run()
    assert again.n_skipped == stored and again.n_new == 12 - stored and again.status == "finished"


def test_in_memory_sqlite_commits_inline_and_keeps_every_row(monkeypatch):
    """An in-memory database is one per connection: the writer's thread would write elsewhere, so its
    commits stay on the loop and every row is in the one database the run reads back."""
    import harness.writer

    monkeypatch.setattr(harness.writer, "FLUSH_ROWS", 2)
    sessions = open_db("sqlite://")
    summary = Runner(EvalConfig(task="gsm8k", model="test:counting", limit=12, run_name="mem", progress=False),
                     session_factory=sessions, model=CountingModel()).run()
    with sessions() as s:
        stored = s.scalar(select(func.count()).select_from(SampleResultRow)
                          .where(SampleResultRow.run_id == summary.run_id))
    assert summary.n_new == 12 and stored == 12 and summary.status == "finished"


def test_records_read_ahead_give_the_same_aggregation_as_reading_them_all(db_url):
    """The runner reads stored rows while its last replies arrive; the final aggregation reads only
    the rest. Rows stored after the read-ahead are added and rows gone since are left out."""
    from harness.store import ops
    from harness.task import SampleRecord

    sessions = open_db(db_url)
    summary = Runner(EvalConfig(task="gsm8k", model="test:counting", limit=12, run_name="ahead", progress=False),
                     session_factory=sessions, model=CountingModel()).run()
    with sessions() as s:
        everything = ops.load_records(s, summary.run_id)
        by_id = ops.records_by_id(s, summary.run_id)
        ids = sorted(by_id)
        partial = {i: by_id[i] for i in ids[:5]}  # as if the last 7 rows were stored after the read-ahead
        partial[max(ids) + 1000] = SampleRecord("gone", 0, {"acc": 1.0}, None, None, {})  # a row deleted since
        again = ops.load_records(s, summary.run_id, partial)
        assert len(everything) == 12 and again == everything
        assert ops.records_by_id(s, summary.run_id, ids[5:7]).keys() == set(ids[5:7])


def test_the_runner_finalises_from_the_rows_it_read_ahead(db_url, monkeypatch):
    from harness.store import ops

    seen: list[object] = []
    real = ops.load_records

    def spy(session, run_id, prefetched=None):
        seen.append(prefetched)
        return real(session, run_id, prefetched)

    monkeypatch.setattr(ops, "load_records", spy)
    sessions = open_db(db_url)
    summary = Runner(EvalConfig(task="gsm8k", model="test:counting", limit=12, run_name="ra", progress=False),
                     session_factory=sessions, model=CountingModel()).run()
    assert summary.n_new == 12 and len(seen) == 1 and isinstance(seen[0], dict)
    m = {x.name: x.value for x in summary.metrics if not x.breakdown_key}
    with sessions() as s:
        # the metrics equal an aggregation over every stored row read afresh
        from harness.aggregate import aggregate
        from harness.run_config import build_task

        fresh = {x.name: x.value for x in aggregate(build_task("gsm8k", {}), real(s, summary.run_id))
                 if not x.breakdown_key}
    assert m == fresh


def _toy_task(score_fn=None, prompt_fn=None) -> Task:
    samples = [Sample(str(i), [Message.text("user", f"q{i}")], target=str(i)) for i in range(8)]

    def prompt(sample: Sample) -> Request:
        if prompt_fn:
            prompt_fn(sample)
        return Request(sample.messages, GenerationConfig())

    def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
        if score_fn:
            return score_fn(sample, output)
        return Score({"acc": float(output.text == sample.target)})

    return Task(name="toy", version="1", load=lambda: samples, prompt=prompt, score=score, content_hash="x",
                primary_metric="acc")


class FlakyModel:
    spec = "test:flaky"
    batch_size = 1
    concurrency = 4
    modalities = frozenset({"text"})
    cacheable = False

    async def generate(self, requests):
        r = requests[0]
        i = int(r.sample_id)
        if i == 1:
            raise TimeoutError("server took too long")
        if i == 2:
            return [Output(error="HTTP 429 after 3 retries")]
        return [Output(text=str(i))]


def test_failures_are_recorded_per_sample_never_fatal(sqlite_url):
    sessions = open_db(sqlite_url)

    def score(sample, output):
        if sample.id == "3":
            raise ValueError("reply had no answer field")
        if sample.id == "4":
            return Score.not_scored("judge refused")
        return Score({"acc": 1.0})

    def prompt(sample):
        if sample.id == "5":
            raise FileNotFoundError("video 5.mp4 missing")

    summary = Runner(EvalConfig(task="toy", model="test:flaky", progress=False), session_factory=sessions,
                     task=_toy_task(score, prompt), model=FlakyModel()).run()
    assert summary.status == "finished"
    assert summary.n_new == 8 and summary.n_errors == 4 and summary.n_unscored == 1
    with sessions() as s:
        rows = {r.sample_id: r for r in s.scalars(select(SampleResultRow))}
        acc = s.scalar(select(MetricRow).where(MetricRow.name == "acc"))
    assert rows["1"].error_kind == "timeout"
    assert rows["2"].error_kind == "model" and "429" in rows["2"].error
    assert rows["3"].error_kind == "scorer" and "no answer field" in rows["3"].error
    assert rows["4"].unscored == "judge refused" and rows["4"].error is None
    assert rows["5"].error_kind == "input" and "5.mp4" in rows["5"].error
    # unscored and failed samples are not zeros: acc is over the 3 scored samples only
    assert acc.value == 1.0 and acc.n == 3


def test_modality_mismatch_is_refused_before_any_call(sqlite_url):
    task = _toy_task()
    task.modalities = frozenset({"text", "video"})
    model = CountingModel()
    with pytest.raises(RunConfigError, match="video"):
        Runner(EvalConfig(task="toy", model="test:counting", progress=False), session_factory=open_db(sqlite_url),
               task=task, model=model).run()
    assert model.served == 0


def test_async_scorers_of_a_batch_run_concurrently(sqlite_url):
    import asyncio

    state = {"now": 0, "peak": 0}

    async def slow_score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.02)
        state["now"] -= 1
        return Score({"acc": 1.0})

    task = _toy_task()
    task.score = slow_score
    model = CountingModel()
    model.batch_size, model.concurrency = 8, 1
    s = Runner(EvalConfig(task="toy", model="test:counting", progress=False), session_factory=open_db(sqlite_url),
               task=task, model=model).run()
    assert s.n_new == 8 and s.n_errors == 0
    assert state["peak"] == 8  # the whole batch was being judged at once
