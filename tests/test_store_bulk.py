"""The runner's write path on a real SQLite file and a real PostgreSQL server: rows inserted with one
driver executemany read back exactly as rows inserted through SQLAlchemy's own statement did, clash
on (run, sample, epoch) without a second row, keep the run's counts equal to a full recount, and the
JSON encoder, the cache key and the run-time collector settings behave as before."""

from __future__ import annotations

import gc
import hashlib
import json
import math
from dataclasses import asdict
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from harness.gcpause import lighter_gc
from harness.store import leases, ops
from harness.store.db import open_db
from harness.store.jsoncol import dumps, dumps_utf8, loads
from harness.store.schema import CacheRow, RunRow, SampleResultRow, utcnow
from harness.store.schema_leases import SampleLeaseRow
from harness.types import GenerationConfig, Message, Request, stable_hash
from harness.writer import SampleWriter

VALUES: list[Any] = [
    None, "4", 3, 2.5, 1.5e-7, float("nan"), float("inf"), {"a": None}, {"nested": [1, {"x": "ü ✓"}]},
    {1: "int key"}, 2**70, np.float64(0.25), [], {}, "text with null inside", [None, float("-inf")],
]


def _run(sessions: Any, name: str) -> int:
    with sessions.begin() as s:
        task = ops.get_or_create_task(s, name="bulk", version="1", content_hash="h")
        model = ops.get_or_create_model(s, "test:bulk")
        run = RunRow(name=name, task_id=task.id, model_id=model.id)
        s.add(run)
        s.flush()
        return run.id


def _row(run_id: int, i: int, value: Any = None, error: str | None = None, cost: float = 0.5) -> dict[str, Any]:
    return {"run_id": run_id, "sample_id": f"s{i}", "epoch": 0, "input_hash": "h" * 64,
            "input": {"messages": [{"role": "user", "content": [{"type": "text", "text": f"q{i} ü"}]}],
                      "metadata": {"level": i % 3}},
            "target": value, "output": "out ✓", "prediction": value, "answer": None,
            "scores": {"exact": value if isinstance(value, float) else 1.0}, "unscored": None, "explanation": "",
            "details": {"v": value}, "input_tokens": 3, "output_tokens": 1, "calls": 1, "cost": cost,
            "latency_s": 0.1, "cached": i % 2 == 0, "error": error, "error_kind": "model" if error else None,
            "created_at": utcnow().replace(microsecond=0 if i == 0 else 123456)}


def _stored(sessions: Any, run_id: int) -> list[tuple[Any, ...]]:
    with sessions() as s:
        rows = s.scalars(select(SampleResultRow).where(SampleResultRow.run_id == run_id)
                         .order_by(SampleResultRow.sample_id)).all()
        # NaN != NaN: compare the values' canonical JSON text
        return [(r.sample_id, json.dumps([r.input, r.target, r.prediction, r.scores, r.details]), r.output,
                 r.cost, r.cached, r.error, r.error_kind, r.created_at, r.input_tokens) for r in rows]


def test_bulk_rows_read_back_as_sqlalchemy_rows_do(db_url: str) -> None:
    sessions = open_db(db_url)
    fast, slow = _run(sessions, "fast"), _run(sessions, "slow")
    for i, value in enumerate(VALUES):
        row = _row(fast, i, value)
        outcomes = []
        for run_id, write in ((fast, ops.write_samples),
                              (slow, lambda s, rows: ops.insert_ignore(s, SampleResultRow.__table__, rows,
                                                                       ops.SAMPLE_KEY))):
            try:
                with sessions.begin() as s:
                    write(s, [{**row, "run_id": run_id}])
                outcomes.append("stored")
            except Exception as exc:  # a value neither path can store must fail on both
                outcomes.append(type(exc).__name__)
        assert outcomes[0] == outcomes[1], (value, outcomes)
    fast_rows, slow_rows = _stored(sessions, fast), _stored(sessions, slow)
    # PostgreSQL's JSON refuses NaN and infinities (three of the values) on both paths
    assert len(fast_rows) >= len(VALUES) - 3 and fast_rows == slow_rows


def test_a_clash_inserts_nothing_and_partial_rows_take_the_portable_path(db_url: str) -> None:
    sessions = open_db(db_url)
    run_id = _run(sessions, "clash")
    with sessions.begin() as s:
        assert ops.write_samples(s, [_row(run_id, i) for i in range(5)]) == 5
    with sessions.begin() as s:  # two already there, one new
        assert ops.write_samples(s, [_row(run_id, 3, "changed"), _row(run_id, 4), _row(run_id, 5)]) == 1
    with sessions.begin() as s:  # a row without every column gets the columns' defaults
        ops.write_samples(s, [{"run_id": run_id, "sample_id": "partial", "epoch": 0, "created_at": utcnow()}])
    with sessions() as s:
        rows = {r.sample_id: r for r in s.scalars(select(SampleResultRow).where(SampleResultRow.run_id == run_id))}
    assert sorted(rows) == ["partial", "s0", "s1", "s2", "s3", "s4", "s5"]
    assert rows["s3"].target is None and rows["partial"].scores == {} and rows["partial"].cost == 0.0


def test_writer_counts_match_a_recount_also_when_rows_were_already_there(db_url: str) -> None:
    sessions = open_db(db_url)
    run_id = _run(sessions, "counts")
    other = SampleWriter(sessions, "other")
    other.run_id = run_id
    other.rows = [_row(run_id, i, cost=0.25) for i in (0, 1)]
    other.flush(force=True)
    writer = SampleWriter(sessions, "me")
    writer.run_id = run_id
    batches = [[_row(run_id, 2), _row(run_id, 3, error="boom")],  # first commit: a recount
               [_row(run_id, 4, error="x"), _row(run_id, 5)],  # incremental
               [_row(run_id, 1), _row(run_id, 6)]]  # s1 is the other writer's: recount again
    for batch in batches:
        writer.rows = batch
        writer.flush(force=True)
        with sessions() as s:
            run = s.get(RunRow, run_id)
            counted = (run.n_done, run.n_errors, run.total_cost)
        with sessions.begin() as s:
            ops.refresh_run_counts(s, run_id)
        with sessions() as s:
            run = s.get(RunRow, run_id)
            assert counted == (run.n_done, run.n_errors, run.total_cost)
    assert counted[:2] == (7, 2) and math.isclose(counted[2], 0.25 * 2 + 0.5 * 5)


def test_leases_are_renewed_every_renew_seconds_not_every_commit(sqlite_url: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sessions = open_db(sqlite_url)
    run_id = _run(sessions, "leases")
    writer = SampleWriter(sessions, "me")
    writer.run_id = run_id
    with sessions.begin() as s:
        leases.claim(s, run_id, "me", [("s0", 0)], seconds=5)

    def expiry() -> Any:
        with sessions() as s:
            return s.scalar(select(SampleLeaseRow.expires_at))

    first = expiry()
    writer.rows = [_row(run_id, 0)]
    writer.flush(force=True)
    assert expiry() == first  # claimed a moment ago: not renewed yet
    monkeypatch.setattr("harness.writer.RENEW_SECONDS", 0.0)
    writer.rows = [_row(run_id, 1)]
    writer.flush(force=True)
    assert expiry() > first


def test_cache_rows_and_judgements_go_through_the_bulk_path(db_url: str) -> None:
    sessions = open_db(db_url)
    run_id = _run(sessions, "cache")
    entry = {"key": "k" * 64, "model_spec": "test:bulk", "response": {"text": "4", "usage": {"seconds": 1e-5}},
             "created_at": utcnow()}
    with sessions.begin() as s:
        ops.cache_put(s, [entry, {**entry, "key": "j" * 64}])
        ops.cache_put(s, [{**entry, "response": {"text": "other"}}])  # the same key: ignored
        ops.write_judgements(s, [{"run_id": run_id, "sample_id": "s0", "epoch": 0, "judge_spec": "j",
                                  "prompt_hash": "p", "raw": "yes", "verdict": {"value": True},
                                  "created_at": utcnow()}])
        assert ops.cache_get(s, ["k" * 64]) == {"k" * 64: entry["response"]}
        assert len(s.scalars(select(CacheRow)).all()) == 2


def test_json_column_encoding_reads_back_as_json_dumps() -> None:
    for value in VALUES + ["lone \ud800", {"t": (1, 2)}, -0.0, 1e300, True]:
        assert json.dumps(json.loads(dumps(value))) == json.dumps(json.loads(json.dumps(value))), value
    for unstorable in (object(), {("tuple", "key"): 1}, utcnow()):
        with pytest.raises(TypeError):
            dumps(unstorable)


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (NaN equal to NaN, 1 not equal to 1.0 or True)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


JSON_TEXTS = [
    "null", "[NaN, Infinity, -Infinity]", '"\\ud800 lone"', '"\\ud83d\\ude00 pair"', "18446744073709551615",
    "18446744073709551616", "-9223372036854775809",
    "-9223372036854775808", "9999999999999999999", "123456789012345678901234567890", "1e400", "-0.0", "0.1",
    '{"a": 1, "a": 2}', '{"digits in text": "12345678901234567890"}', "1.00000000000000000001", '"\\u0000 nul"',
    '{"nested": [1, {"x": "\\u00fc \\u2713"}, [], {}]}', "2.5e-324", "[1, 2", "", "nul", '"unterminated',
]


def test_json_columns_decode_to_exactly_what_json_loads_gives() -> None:
    texts = JSON_TEXTS + [json.dumps(v) for v in VALUES if not isinstance(v, np.floating)] + [dumps(v) for v in VALUES]
    for text in texts:
        for given in (text, text.encode("utf-8", "surrogatepass")):
            try:
                expected = json.loads(given)
            except ValueError as exc:
                with pytest.raises(type(exc)):
                    loads(given)
                continue
            assert _same(loads(given), expected), given


def test_request_bodies_encode_to_what_json_dumps_sends() -> None:
    bodies = VALUES + [{"messages": [{"role": "user", "content": "ü ✓ \u0000"}], "temperature": 0.7, "seed": 3}]
    for body in bodies:
        try:
            expected = json.dumps(body, ensure_ascii=False).encode()
        except (TypeError, ValueError):
            with pytest.raises((TypeError, ValueError)):
                dumps_utf8(body)
            continue
        assert _same(json.loads(dumps_utf8(body)), json.loads(expected)), body
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate cannot be sent, as before
        dumps_utf8({"content": "lone \ud800"})


def test_cache_keys_and_request_dicts_are_unchanged() -> None:
    """The response cache is keyed by this hash: the same request must keep its key."""
    for config in (GenerationConfig(max_tokens=8), GenerationConfig(stop=["\n"], seed=3, temperature=0.7),
                   GenerationConfig(extra={"reasoning": {"effort": "low"}})):
        request = Request([Message.text("user", "What is 2 + 2? ü")], config)
        assert config.to_dict() == asdict(config) and list(config.to_dict()) == list(asdict(config))
        obj = ["openai:test", request.to_dict()]
        legacy = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        assert stable_hash(obj) == hashlib.sha256(legacy.encode("utf-8", "surrogatepass")).hexdigest()
    copy = GenerationConfig(stop=["a"])
    copy.to_dict()["stop"].append("b")
    assert copy.stop == ["a"]


def test_short_switch_interval_restores_even_when_nested() -> None:
    import sys

    from harness.gcpause import SWITCH_INTERVAL, short_switch_interval

    before = sys.getswitchinterval()
    with short_switch_interval():
        assert sys.getswitchinterval() == pytest.approx(min(before, SWITCH_INTERVAL))
        with short_switch_interval():
            pass
        assert sys.getswitchinterval() == pytest.approx(min(before, SWITCH_INTERVAL))  # the outer run goes on
    assert sys.getswitchinterval() == before


def test_lighter_gc_freezes_and_restores_even_when_nested() -> None:
    before = gc.get_threshold()
    with lighter_gc():
        assert gc.get_freeze_count() > 0 and gc.get_threshold()[0] > before[0]
        with lighter_gc():
            pass
        assert gc.get_threshold()[0] > before[0]  # the outer run is still going
        cycle: list[Any] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # cyclic garbage made during a run is still collectable
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_a_commit_is_due_when_the_oldest_waiting_row_is_old_not_when_the_last_commit_is(sqlite_url: str,
                                                                                        monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sessions = open_db(sqlite_url)
    run_id = _run(sessions, "due")
    writer = SampleWriter(sessions, "me")
    writer.run_id = run_id
    monkeypatch.setattr("harness.writer.FLUSH_SECONDS", 1e9)  # the last commit was "just now", always
    monkeypatch.setattr("harness.writer.FLUSH_DUE", 1e9)
    writer.record(_row(run_id, 0))
    writer.flush()
    assert writer.rows  # nothing due yet
    monkeypatch.setattr("harness.writer.FLUSH_DUE", 0.0)  # the oldest waiting row is now due
    writer.flush()
    assert not writer.rows and writer.oldest is None
    with sessions() as s:
        assert s.scalar(select(SampleResultRow.sample_id).where(SampleResultRow.run_id == run_id)) == "s0"
