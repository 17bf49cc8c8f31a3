"""The read-only results API (harness.results) on a real SQLite file written by real `harness eval`
runs of built-in models, checked against the same file read with plain sqlite3; the families ported
to it read that file as before; and the boundary: no module under tasks/ or models/ imports the
store's tables (harness.store.schema) or its session-level operations (harness.store.ops), only the
results API, its one write (harness.results_write) and the JSON codec harness.store.jsoncol."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import results
from harness.results_write import store_judgements
from harness.store.db import open_db

ROOT = Path(__file__).resolve().parent.parent


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          timeout=180, env=env)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Three runs: gsm8k x builtin:number (6 problems, 2 epochs), gsm8k x builtin:echo (4 problems) and
    reliability_mmlu x builtin:constant (6 questions, a per-subject breakdown)."""
    path = tmp_path_factory.mktemp("results") / "r.db"
    url = f"sqlite:///{path}"
    for args in (["-t", "gsm8k", "-m", "builtin:number", "--limit", "6", "--epochs", "2", "--run-name", "num"],
                 ["-t", "gsm8k", "-m", "builtin:echo", "--limit", "4", "--run-name", "echo"],
                 ["-t", "reliability_mmlu", "-m", "builtin:constant", "-M", "text=Answer: A", "--limit", "6",
                  "--run-name", "mmlu"]):
        done = _harness("eval", *args, "--db", url)
        assert done.returncode == 0, done.stderr
    return path, url


def _sql(path: Path, query: str, *params: Any) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(path)
    try:
        return con.execute(query, params).fetchall()
    finally:
        con.close()


def test_runs_find_run_and_get_run_match_the_file(stored: tuple[Path, str]) -> None:
    path, url = stored
    db = open_db(url)
    expected = _sql(path, "select r.id, r.name, t.name, m.spec, t.primary_metric, r.n_done, r.status from runs r "
                          "join tasks t on t.id = r.task_id join models m on m.id = r.model_id order by r.id")
    got = results.runs(db)
    assert [(r.id, r.name, r.task, r.model, r.primary_metric, r.n_done, r.status) for r in got] == expected
    assert [r.name for r in got] == ["num", "echo", "mmlu"]
    num = got[0]
    assert num.family == "gsm8k" and num.primary_metric == "exact_match_flexible" and num.n_done == 12
    assert num.config["model"] == "builtin:number" and num.model_label == "builtin:number" and num.owner == ""
    assert [r.name for r in results.runs(db, task="gsm8k")] == ["num", "echo"]
    assert [r.name for r in results.runs(db, model="builtin:echo")] == ["echo"]
    assert results.runs(db, task="gsm8k", model="builtin:constant?text=Answer: A") == []
    assert results.find_run(db, "echo") == got[1] and results.find_run(db, str(num.id)) == num
    assert results.get_run(db, got[2].id) == got[2]
    assert results.find_run(db, "no-such-run") is None and results.get_run(db, 10_000) is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        num.name = "other"  # type: ignore[misc]


def test_samples_and_records_match_the_file(stored: tuple[Path, str]) -> None:
    path, url = stored
    db = open_db(url)
    num = results.find_run(db, "num")
    assert num is not None
    rows = _sql(path, "select sample_id, epoch, output, scores, input, answer, error from sample_results "
                      "where run_id = ?", num.id)
    expected = sorted((sid, ep, out, json.loads(sc), json.loads(inp), ans, err)
                      for sid, ep, out, sc, inp, ans, err in rows)
    got = results.samples(db, num)
    assert len(got) == 12 and [(s.sample_id, s.epoch) for s in got] == [(e[0], e[1]) for e in expected]
    assert [(s.sample_id, s.epoch, s.output, s.scores, s.input, s.answer, s.error) for s in got] == expected
    assert all(s.input["messages"][0]["role"] == "user" and "#### " in s.metadata["solution"] for s in got)
    assert {s.target for s in got} <= {json.loads(t) for (t,) in _sql(path, "select target from sample_results")}
    first = results.samples(db, num.id, epoch=0)
    assert [s.epoch for s in first] == [0] * 6 and {s.sample_id for s in first} == {s.sample_id for s in got}
    recs = results.records(db, num)
    assert [(r.sample_id, r.epoch, r.scores) for r in recs] == [(s.sample_id, s.epoch, s.scores) for s in got]
    assert any(s.scores["exact_match_numeric"] == 1.0 for s in got)  # builtin:number gets some right


def test_metrics_filter_by_breakdown_and_match_the_file(stored: tuple[Path, str]) -> None:
    path, url = stored
    db = open_db(url)
    mmlu = results.find_run(db, "mmlu")
    assert mmlu is not None
    expected = _sql(path, "select name, value, ci_low, ci_high, n, breakdown_key, breakdown_value from metrics "
                          "where run_id = ? order by id", mmlu.id)
    got = results.metrics(db, mmlu)
    assert [dataclasses.astuple(m) for m in got] == expected
    overall = results.metrics(db, mmlu, breakdown="")
    cells = results.metrics(db, mmlu, breakdown="subject")
    assert overall and cells and {m.breakdown_key for m in overall} == {""}
    assert {m.breakdown_key for m in cells} == {"subject"} and len(overall) + len(cells) == len(got)
    assert {m.name for m in overall} >= {"correct", "accuracy"}


def test_a_session_and_a_session_factory_read_the_same(stored: tuple[Path, str]) -> None:
    _, url = stored
    db = open_db(url)
    with db() as s:
        in_session = (results.runs(s), results.samples(s, 1), results.metrics(s, 1), results.find_run(s, "num"))
    assert in_session == (results.runs(db), results.samples(db, 1), results.metrics(db, 1),
                          results.find_run(db, "num"))


def test_store_judgements_is_the_one_write(stored: tuple[Path, str]) -> None:
    path, url = stored
    db = open_db(url)
    run = results.find_run(db, "echo")
    assert run is not None
    before = _sql(path, "select count(*) from judgements")[0][0]
    assert store_judgements(db, []) == 0
    row = {"run_id": run.id, "sample_id": "0", "epoch": 0, "judge_spec": "builtin:constant", "prompt_hash": "h",
           "raw": "Verdict: a", "verdict": {"winner": "a"}}
    assert store_judgements(db, [row, {**row, "sample_id": "1"}]) == 2
    written = _sql(path, "select run_id, sample_id, raw, verdict from judgements order by id")[before:]
    assert [(r, s, raw, json.loads(v)) for r, s, raw, v in written] == [
        (run.id, "0", "Verdict: a", {"winner": "a"}), (run.id, "1", "Verdict: a", {"winner": "a"})]


def test_the_ported_families_read_the_file(stored: tuple[Path, str]) -> None:
    """Each family module that used to hold ORM rows, on the same file: the numbers they derive are
    the ones plain SQL gives."""
    path, url = stored
    db = open_db(url)
    from harness.tasks.alignment.profile import load_profiles
    from harness.tasks.code3d.judge import load_run_outputs
    from harness.tasks.dsgg.analysis import load as dsgg_runs
    from harness.tasks.reliability.analysis import load_points, load_prompts

    points = load_points(db, "gsm8k")
    assert [p.run_name for p in points] == ["num", "echo"]
    for p in points:
        rows = _sql(path, "select s.sample_id, s.scores from sample_results s join runs r on r.id = s.run_id "
                          "where r.name = ?", p.run_name)
        by: dict[str, list[float]] = {}
        for sid, scores in rows:
            by.setdefault(sid, []).append(json.loads(scores)["exact_match_flexible"])
        means = [sum(v) / len(v) for v in by.values()]
        assert p.n == len(by) and p.quality == pytest.approx(sum(means) / len(means))
        assert p.operator == "plain" and p.cost == 1.0
    prompts = load_prompts(db, [points[0].run_id])
    assert len(prompts) == 6 and all("#### <number>" in text for text in prompts.values())
    assert dsgg_runs(db, "gsm8k") == []  # no run of this task stores a precision
    outputs = load_run_outputs(db, points[1].run_id)
    assert sorted(outputs) == sorted(sid for (sid,) in _sql(path, "select sample_id from sample_results s join "
                                                                  "runs r on r.id = s.run_id where r.name = 'echo'"))
    assert all(o["prompt"].startswith("Solve the following") for o in outputs.values())
    with pytest.raises(ValueError, match="not an alignment probe"):
        load_profiles(db, ["num"])
    with pytest.raises(ValueError, match="no run named"):
        load_profiles(db, ["no-such-run"])


# ------------------------------------------------------------------------------- the boundary

# the JSON codec the OpenAI backends share with the store is a codec, not rows
ALLOWED_STORE = {"harness.store.jsoncol"}


def store_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every ``harness.store`` module a file imports, ``from harness.store import x``
    read as ``harness.store.x`` (lazy imports inside functions included)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "harness" or node.module == "harness.store":
                found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module))
    return [(n, m) for n, m in found if m == "harness.store" or m.startswith("harness.store.")]


def store_violations(folders: tuple[Path, ...] = (ROOT / "tasks", ROOT / "models")) -> list[str]:
    return [f"{path.relative_to(folder.parent)}:{lineno} imports {module}"
            for folder in folders for path in sorted(folder.rglob("*.py"))
            for lineno, module in store_imports(path) if module not in ALLOWED_STORE]


def test_no_family_or_backend_imports_the_store_tables_or_its_operations() -> None:
    assert store_violations() == []


def test_the_store_rule_sees_a_family_reading_rows(tmp_path: Path) -> None:
    pkg = tmp_path / "tasks" / "probe"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("from harness.store.schema import RunRow\nfrom harness.store import jsoncol\n"
                              "from harness import results, store\n")
    (pkg / "b.py").write_text("def f():\n    from harness.store import ops\n    import harness.store.schema\n")
    found = store_violations((tmp_path / "tasks",))
    assert found == ["tasks/probe/a.py:1 imports harness.store.schema", "tasks/probe/a.py:3 imports harness.store",
                     "tasks/probe/b.py:2 imports harness.store.ops", "tasks/probe/b.py:3 imports harness.store.schema"]
