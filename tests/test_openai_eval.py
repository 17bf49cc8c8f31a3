"""End to end: ``harness eval --task gsm8k --model openai:test -M base_url=...`` into SQLite against the
scripted server, with a garbled reply for one sample, and a run killed mid-way then resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from openai_server import correct_with_probability, last_user_text
from sqlalchemy import select

from harness.registry import lookup
from harness.store.db import open_db
from harness.store.schema import MetricRow, RunRow, SampleResultRow

pytest_plugins = ("openai_server",)  # the scripted_server fixture


@pytest.fixture(scope="module")
def gsm8k_prompts() -> dict[str, tuple[str, str]]:
    """prompt text the server sees -> (sample id, target answer)."""
    task = lookup("task", "gsm8k").factory()
    return {s.messages[-1].text_content: (s.id, s.target) for s in task.load()}


def harness_eval(db: str, base_url: str, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "harness.cli", "eval", "--task", "gsm8k", "--model", "openai:test",
           "-M", f"base_url={base_url}", "-M", "retry_base=0.01", "--db", db, "--no-progress", *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}  # rich wraps narrower output
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out
    return out


def rows(db: str) -> list[SampleResultRow]:
    with open_db(db)() as s:
        return list(s.scalars(select(SampleResultRow).order_by(SampleResultRow.id)))


def test_eval_into_sqlite_with_a_garbled_sample(scripted_server, gsm8k_prompts, sqlite_url):
    srv = scripted_server
    srv.set_reply(correct_with_probability(
        0.6, right=lambda b: f"Adding up.\n#### {gsm8k_prompts[last_user_text(b)][1]}",
        wrong=lambda b: "#### -1", seed=7))
    texts = list(gsm8k_prompts)[:20]
    broken_text = texts[3]
    broken_id = gsm8k_prompts[broken_text][0]
    srv.garble(times=None, match=lambda b: last_user_text(b) == broken_text)

    out = finish(harness_eval(sqlite_url, srv.base_url, "--limit", "20", "-M", "max_retries=1",
                              "-M", "concurrency=3", "-M", "price_in=1000", "-M", "price_out=2000"))
    assert "finished" in out and "1 errors" in out

    stored = rows(sqlite_url)
    assert len(stored) == 20 and len({r.sample_id for r in stored}) == 20
    (bad,) = [r for r in stored if r.error is not None]
    assert bad.sample_id == broken_id and bad.error_kind == "bad_response"  # the kind, not just "model"
    assert bad.error.startswith("APIResponseValidationError: reply is not valid JSON")
    # the other 19 hold exactly what the server said, scored against the truth
    expected = correct_with_probability(0.6, right=lambda b: "right", wrong=lambda b: "wrong", seed=7)
    good = [r for r in stored if r.error is None]
    for r in good:
        text = r.input["messages"][-1]["content"][0]["text"]
        is_right = expected({"messages": [{"role": "user", "content": text}]}) == "right"
        assert r.scores["exact_match_flexible"] == float(is_right)
        assert r.output == (f"Adding up.\n#### {r.target}" if is_right else "#### -1")
        assert r.input_tokens == len(text.split()) and r.output_tokens == len(r.output.split())
        assert r.calls == 1 and r.latency_s > 0
        assert r.cost == pytest.approx((1000 * r.input_tokens + 2000 * r.output_tokens) / 1e6)
    assert Counter(last_user_text(b) for b in srv.bodies())[broken_text] == 2  # first try + 1 retry
    assert srv.max_in_flight <= 3
    with open_db(sqlite_url)() as s:
        run = s.scalars(select(RunRow)).one()
        metric = s.scalars(select(MetricRow).where(MetricRow.run_id == run.id, MetricRow.name == "exact_match_flexible",
                                                   MetricRow.breakdown_key == "")).one()
    assert run.status == "finished" and run.n_done == 20 and run.n_errors == 1
    assert run.total_cost == pytest.approx(sum(r.cost for r in good)) and run.total_cost > 0
    assert metric.n == 19
    assert metric.value == pytest.approx(sum(r.scores["exact_match_flexible"] for r in good) / 19)
    assert 0 < metric.value < 1


def test_killed_run_resumes_without_duplicates_or_repeated_requests(scripted_server, gsm8k_prompts, sqlite_url):
    srv = scripted_server
    srv.set_reply(lambda b: f"#### {gsm8k_prompts[last_user_text(b)][1]}")
    srv.delay = 0.1  # 2 in flight -> ~20 requests/s: the kill lands mid-run
    args = ("--limit", "40", "-M", "concurrency=2", "--concurrency", "2")

    first = harness_eval(sqlite_url, srv.base_url, *args)
    try:
        assert srv.wait_for_requests(16, timeout=60), "the first run never got going"
        time.sleep(0.7)  # past one group commit
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    done_before = {r.sample_id for r in rows(sqlite_url)}
    asked_before = len(srv.requests)
    assert 5 <= len(done_before) < 40, (len(done_before), asked_before)

    out = finish(harness_eval(sqlite_url, srv.base_url, *args))
    assert f"{len(done_before)} already done" in out

    stored = rows(sqlite_url)
    assert len(stored) == 40 and len({(r.sample_id, r.epoch) for r in stored}) == 40
    assert all(r.error is None and r.scores["exact_match_flexible"] == 1.0 for r in stored)
    asked = Counter(gsm8k_prompts[last_user_text(b)][0] for b in srv.bodies())
    assert set(asked) == {r.sample_id for r in stored}
    # a sample finished before the kill was never asked again; only the in-flight ones were
    assert all(asked[sid] == 1 for sid in done_before)
    repeated = [sid for sid, n in asked.items() if n > 1]
    assert len(repeated) <= asked_before - len(done_before)
    assert srv.max_in_flight <= 2
    with open_db(sqlite_url)() as s:
        run = s.scalars(select(RunRow)).one()
    assert run.status == "finished" and run.n_done == 40
