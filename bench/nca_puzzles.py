"""Adaptive NCA against the fixed-perception NCA and a parameter-matched feed-forward CNN on the
maze_path task (train on one size, test on it and on larger unseen sizes) and on sudoku, in one run.

Every backend trains on the same seeded train split with the same budget (``--iters`` mini-batches
of 8) and answers the same test puzzles. Prints exact-match and cell accuracy per grid size, steps
to converge, train seconds and parameter count, and the ratios of aNCA's exact match and cell
error against each baseline. Defaults take about 8-10 minutes on a loaded 2-core machine; the
README quotes larger runs (``--iters 400 --n-train 1024``).

    python bench/nca_puzzles.py [--puzzles maze,sudoku] [--iters 100] [--n-train 256] [--n-test 20]
                                [--train-size 16] [--test-sizes 16,24,32]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import tempfile  # noqa: E402
from collections import defaultdict  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--puzzles", default="maze,sudoku")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--n-train", type=int, default=256)
    ap.add_argument("--n-test", type=int, default=20)
    ap.add_argument("--train-size", type=int, default=16)
    ap.add_argument("--test-sizes", default="16,24,32")
    args = ap.parse_args()

    from harness.runner import EvalConfig, Runner
    from harness.store import ops
    from harness.store.db import open_db

    archs = ("anca", "nca", "cnn")
    tasks = {"maze": ("maze_path", {"train_size": args.train_size, "test_sizes": args.test_sizes,
                                    "n_train": args.n_train, "n_test": args.n_test}),
             "sudoku": ("sudoku", {"n_train": args.n_train, "n_test": args.n_test})}
    with tempfile.TemporaryDirectory() as tmp:
        sessions = open_db(f"sqlite:///{tmp}/bench.db")
        for puzzle in args.puzzles.split(","):
            name, opts = tasks[puzzle]
            table: dict[str, dict[str, dict[str, float]]] = {}
            fits: dict[str, dict[str, float]] = {}
            for arch in archs:
                summary = Runner(EvalConfig(task=name, model=arch, task_options=opts, progress=False,
                                            model_settings={"iters": args.iters, "progress": False},
                                            use_cache=False), session_factory=sessions).run()
                with sessions() as s:
                    recs = ops.load_records(s, summary.run_id)
                groups: dict[str, list[dict[str, float]]] = defaultdict(list)
                for r in recs:
                    key = str(r.metadata.get("size", "9")) if puzzle == "maze" else "9"
                    groups[key].append(r.scores)
                    groups["all"].append(r.scores)
                table[arch] = {k: {m: sum(x.get(m, 0.0) for x in v) / len(v)
                                   for m in ("exact", "cell_accuracy", "steps_to_converge")}
                               for k, v in groups.items()}
                fit = next((r.details.get("fit") for r in recs if r.details.get("fit")), None) or {}
                fits[arch] = {"seconds": float(fit.get("seconds", 0.0)), "params": float(fit.get("params", 0))}
                print(f"{name} {arch}: {summary.n_new} puzzles, {summary.n_errors} errors", flush=True)
            _print(name, puzzle, table, fits, args)


def _print(name: str, puzzle: str, table: dict, fits: dict, args: argparse.Namespace) -> None:
    print(f"\n{name} (train n={args.n_train}{' size ' + str(args.train_size) if puzzle == 'maze' else ''}, "
          f"iters={args.iters}, test n={args.n_test} per size)")
    print(f"{'arch':6s} {'size':>5s} {'exact':>7s} {'cell_acc':>9s} {'steps':>7s} {'train_s':>8s} {'params':>7s}")
    for arch, rows in table.items():
        for key in sorted(rows, key=lambda k: (k == "all", int(k) if k.isdigit() else 0)):
            r = rows[key]
            print(f"{arch:6s} {key:>5s} {r['exact']:7.3f} {r['cell_accuracy']:9.4f} {r['steps_to_converge']:7.1f} "
                  f"{fits[arch]['seconds']:8.1f} {int(fits[arch]['params']):7d}")
    for base in ("nca", "cnn"):
        for key in sorted(table["anca"], key=lambda k: (k == "all", int(k) if k.isdigit() else 0)):
            a, b = table["anca"][key], table[base].get(key)
            if b is None:
                continue
            ex = f"{a['exact'] / b['exact']:.2f}" if b["exact"] > 0 else ("inf" if a["exact"] > 0 else "-")
            err = (1 - a["cell_accuracy"]) / max(1 - b["cell_accuracy"], 1e-9)
            print(f"  anca / {base} size {key}: exact ratio {ex}, cell-error ratio {err:.3f}")


if __name__ == "__main__":
    main()
