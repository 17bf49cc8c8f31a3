"""Per-sample and start-up overhead: harness versus lm-evaluation-harness, in one run.

Both evaluate the same 2,000-row exact-match generation task with an instant model (harness:
``builtin:echo`` with every sample written to SQLite; lm-eval 0.4.13: ``--model dummy`` with
``--log_samples``). For each we measure the child process's CPU seconds (user+sys) at N=2,000 and
N=10, alternating, ``--repeats`` times, and report medians:

    marginal CPU per sample = (cpu(2000) - cpu(10)) / 1990
    start-up               = cpu(10)   (and, for harness, wall seconds to the first stored sample)

lm-eval runs from its own virtual environment (``--lmeval-python``; default
$HARNESS_CACHE_DIR/venvs/lmeval/bin/python, made with ``pip install lm-eval==0.4.13``): it is
installed only for this benchmark. Without it, harness's own figures are printed alone.

    python bench/overhead.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

N_BIG, N_SMALL = 2000, 10
LMEVAL_TASK = """task: trivial_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{input}}}}"
doc_to_target: "{{{{target}}}}"
generation_kwargs:
  until: ["\\n"]
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""


def child_cpu(cmd: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-2000:]}")
    return cpu, wall, proc


def harness_once(data: Path, n: int, work: Path) -> dict[str, float]:
    db = work / f"h{n}-{time.monotonic_ns()}.db"
    cmd = [sys.executable, "-m", "harness.cli", "eval", "-t", "qa", "-T", f"path={data}", "-m", "builtin:echo",
           "--limit", str(n), "--db", f"sqlite:///{db}", "--no-progress"]
    start = datetime.utcnow()
    cpu, wall, _ = child_cpu(cmd, dict(os.environ))
    con = sqlite3.connect(db)
    rows, first = con.execute("select count(*), min(created_at) from sample_results").fetchone()
    assert rows == n, f"harness stored {rows} rows, expected {n}"
    to_first = (datetime.fromisoformat(first) - start).total_seconds()
    return {"cpu": cpu, "wall": wall, "first_sample_s": to_first}


def lmeval_once(python: str, task_dir: Path, n: int, work: Path) -> dict[str, float]:
    out = work / f"lm{n}-{time.monotonic_ns()}"
    cmd = [python, "-m", "lm_eval", "--model", "dummy", "--tasks", "trivial_gen", "--include_path", str(task_dir),
           "--output_path", str(out), "--log_samples", "--limit", str(n)]
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cpu, wall, _ = child_cpu(cmd, env)
    logged = sum(1 for p in out.rglob("samples_*.jsonl") for _ in p.open())
    assert logged == n, f"lm-eval logged {logged} samples, expected {n}"
    return {"cpu": cpu, "wall": wall}


def summarise(name: str, big: list[dict[str, float]], small: list[dict[str, float]]) -> dict[str, float]:
    cpu_big = statistics.median(r["cpu"] for r in big)
    cpu_small = statistics.median(r["cpu"] for r in small)
    res = {
        "marginal_ms_per_sample": 1000 * (cpu_big - cpu_small) / (N_BIG - N_SMALL),
        "startup_cpu_s": cpu_small,
        "wall_2000_s": statistics.median(r["wall"] for r in big),
    }
    if "first_sample_s" in small[0]:
        res["wall_to_first_sample_s"] = statistics.median(r["first_sample_s"] for r in small)
    print(f"{name:>10}: " + ", ".join(f"{k}={v:.4g}" for k, v in res.items()))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    default_py = Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache/harness")) / "venvs/lmeval/bin/python"
    ap.add_argument("--lmeval-python", default=str(default_py))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "trivial.jsonl"
        with data.open("w") as f:
            for i in range(N_BIG):
                f.write(json.dumps({"input": f"Repeat after me: token{i}", "target": f"token{i}"}) + "\n")
        task_dir = work / "lmeval_tasks"
        task_dir.mkdir()
        (task_dir / "trivial_gen.yaml").write_text(LMEVAL_TASK.format(data=data))
        have_lmeval = Path(args.lmeval_python).exists()
        if not have_lmeval:
            print(f"lm-eval not found at {args.lmeval_python}: harness figures only")
        runs: dict[str, dict[int, list[dict[str, float]]]] = {"harness": {N_BIG: [], N_SMALL: []},
                                                              "lm-eval": {N_BIG: [], N_SMALL: []}}
        for _ in range(args.repeats):  # alternate so machine load hits both alike
            for n in (N_BIG, N_SMALL):
                runs["harness"][n].append(harness_once(data, n, work))
                if have_lmeval:
                    runs["lm-eval"][n].append(lmeval_once(args.lmeval_python, task_dir, n, work))
        h = summarise("harness", runs["harness"][N_BIG], runs["harness"][N_SMALL])
        if have_lmeval:
            lm = summarise("lm-eval", runs["lm-eval"][N_BIG], runs["lm-eval"][N_SMALL])
            marginal = lm["marginal_ms_per_sample"] / max(h["marginal_ms_per_sample"], 1e-9)
            print(f"ratio lm-eval/harness: marginal CPU per sample x{marginal:.1f}, "
                  f"start-up CPU x{lm['startup_cpu_s'] / h['startup_cpu_s']:.1f}")
        print(f"targets: marginal <= 0.1 ms/sample ({'met' if h['marginal_ms_per_sample'] <= 0.1 else 'NOT met'}), "
              f"start-up to first sample < 1 s ({'met' if h.get('wall_to_first_sample_s', 9) < 1 else 'NOT met'})")


if __name__ == "__main__":
    main()
