"""The vLLM adapter on vLLM's CPU build, run in its own venv (tests/setup.d/60-vllm.sh).

One engine start per check script: offline batch/seed/logprobs/isolation checks, the managed
server round trip through the OpenAI client, and a full ``harness eval`` writing to SQLite.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from vllm_checks.check_settings import engine_settings, expected_spec
from vllm_checks.venv_runner import ROOT, check_env, run_check, tiny_model, vllm_python

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vllm_python()
    return tmp_path_factory.mktemp("vllm")


@pytest.fixture(scope="module")
def model_dir(work: Path) -> Path:
    return tiny_model()


@pytest.fixture(scope="module")
def offline(work: Path, model_dir: Path) -> dict:
    return run_check("offline.py", str(model_dir), str(work), tmp=work)


def test_one_engine_call_for_a_whole_batch(offline: dict) -> None:
    batch = offline["batch"]
    assert batch["n"] == 16 and batch["errors"] == []
    assert batch["engine_calls"] == 1
    assert batch["texts_nonempty"] >= 15  # a random model may emit its end token first, rarely
    assert all(n > 0 for n in batch["output_tokens"])
    assert batch["input_tokens"] == batch["bare_input_tokens"]  # usage = real prompt token counts
    assert batch["same_as_bare"], "greedy replies differ from a bare LLM.chat over the same prompts"


def test_spec_and_defaults(offline: dict, model_dir: Path) -> None:
    assert offline["spec"] == expected_spec(str(model_dir))  # resource settings left out
    assert offline["spec"].startswith(f"vllm:{model_dir}?dtype=")
    assert offline["batch_size"] >= 10_000
    assert offline["modalities"] == ["text"]


def test_seed_reproducibility(offline: dict) -> None:
    seed = offline["seed"]
    assert seed["same_in_batch"] and seed["same_across_calls"]
    assert seed["other_seed_differs"]


def test_logprobs(offline: dict) -> None:
    lp = offline["logprobs"]
    assert lp["n"] == lp["output_tokens"] > 0
    assert set(lp["top_sizes"]) == {2}
    assert lp["all_negative"]


def test_bad_requests_fail_alone(offline: dict) -> None:
    errors, texts = offline["errors"]["errors"], offline["errors"]["texts"]
    assert errors[0] is None and errors[3] is None and texts[0] and texts[3]
    assert "media file not found" in errors[1]
    assert errors[2] and "256" in errors[2]  # longer than max_model_len
    assert errors[4] and "temperature" in errors[4]
    # the batch with one bad prompt was split until the bad one stood alone: a few calls, not one each
    assert 2 <= offline["errors"]["engine_calls"] <= 5


def test_two_batches_in_flight_are_serialised(offline: dict) -> None:
    conc = offline["concurrent"]
    assert (conc["engine_calls"], conc["n"], conc["errors"]) == (2, [8, 8], [])
    assert conc["tokens"] > 0


def test_managed_server_round_trip(work: Path, model_dir: Path) -> None:
    res = run_check("server.py", str(model_dir), tmp=work)
    assert res["replies"]["n"] == 6 and res["replies"]["errors"] == []
    assert all(n > 0 for n in res["replies"]["input_tokens"])
    assert res["same_as_direct"]
    assert res["seeded_same"]
    assert res["logprobs"]["n"] > 0 and set(res["logprobs"]["tops"]) == {2}
    assert res["healthy_before_close"] and not res["healthy_after_close"]
    assert res["process_gone"]


def test_harness_eval_gsm8k_into_sqlite(work: Path, model_dir: Path) -> None:
    db = work / "eval.db"
    flags = [f"-M{k}={json.dumps(v) if not isinstance(v, str) else v}"
             for k, v in engine_settings(max_model_len=512, max_tokens=16).items()]
    cmd = [vllm_python(), "-m", "harness.cli", "eval", "--task", "gsm8k", "--model", f"vllm:{model_dir}", *flags,
           "--limit", "8", "--no-progress", "--db", f"sqlite:///{db}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=check_env(work), cwd=str(ROOT))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    with sqlite3.connect(db) as con:
        rows = con.execute("select error, output_tokens, input_tokens, calls from sample_results").fetchall()
        (status,) = con.execute("select status from runs").fetchone()
    assert status == "finished"
    assert len(rows) == 8
    assert [r[0] for r in rows] == [None] * 8
    assert all(r[1] > 0 and r[2] > 0 and r[3] == 1 for r in rows)
