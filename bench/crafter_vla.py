"""crafter_instruct with corrupted demonstrations: vla:3a vs vla:bc vs vla:3a-no-aar, beside the
random and scripted reference agents, over several seeds.

Each seed s changes the demonstration worlds (demo_seed = 100000 + 1000 s), the test worlds
(seed = 1000 s) and the training seed (-M seed=s). Prints success rate per method and seed, the
mean +- std over seeds and the ratio to BC, and for the 3A-VLA variants what their fit reports:
the train accuracy of the two abstraction heads on their hindsight labels and the mean AAR weight
of clean and of corrupted demonstration steps (the corruption marks score the weights here only;
training never reads them). Runs through the harness runner into a throwaway SQLite file.

    python bench/crafter_vla.py [--seeds 3] [--episodes 5] [--demos 8] [--corrupt 0.3] [--max-steps 150]
    python bench/crafter_vla.py --free-play [--episodes 50]   # crafter: random / scripted Crafter score
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")

METHODS = ("crafter:random", "crafter:scripted", "vla:bc", "vla:3a-no-aar", "vla:3a")


def _metric(summary: object, name: str, key: str = "", value: str = "") -> float:
    for m in summary.metrics:  # type: ignore[attr-defined]
        if m.name == name and m.breakdown_key == key and m.breakdown_value == value:
            return float(m.value)
    return float("nan")


FIT_KEYS = ("ia_accuracy", "esa_accuracy", "weight_clean", "weight_corrupted")


def instruct(args: argparse.Namespace, db: str) -> None:
    from harness.modelspec import build_model
    from harness.runner import EvalConfig, evaluate

    table: dict[str, list[float]] = {m: [] for m in METHODS}
    fits: dict[str, list[dict[str, float]]] = {m: [] for m in METHODS}
    for s in range(args.seeds):
        opts = {"episodes": args.episodes, "max_steps": args.max_steps, "seed": 1000 * s,
                "demo_episodes": args.demos, "demo_seed": 100_000 + 1000 * s, "corrupt": args.corrupt}
        for method in METHODS:
            settings = {"seed": s} if method.startswith("vla:") else {}
            cfg = EvalConfig(task="crafter_instruct", model=method, task_options=opts, model_settings=settings,
                             db_url=db, progress=False, use_cache=False)
            model = build_model(method, settings) if method.startswith("vla:") else None
            summary = evaluate(cfg, model=model)
            rate = _metric(summary, "success")
            table[method].append(rate)
            record = getattr(model, "record", {})
            fits[method].append({k: float(record[k]) for k in FIT_KEYS if k in record})
            shown = "  ".join(f"{k} {record[k]:.3f}" for k in FIT_KEYS if k in record)
            print(f"seed {s}  {method:<18} success {rate:.3f}  ({summary.seconds:.0f}s)  {shown}", flush=True)
    bc = statistics.mean(table["vla:bc"])
    print(f"\ncrafter_instruct, {args.corrupt:.0%} corrupted demonstrations ({args.demos}/goal), "
          f"{args.episodes} episodes/goal x 9 goals, max_steps {args.max_steps}, {args.seeds} seeds")
    print(f"{'method':<18} {'success (mean +- std)':>22} {'per seed':>24} {'ratio to BC':>12}")
    for method, rates in table.items():
        sd = statistics.pstdev(rates) if len(rates) > 1 else 0.0
        per = " ".join(f"{r:.3f}" for r in rates)
        ratio = statistics.mean(rates) / bc if bc else float("nan")
        print(f"{method:<18} {statistics.mean(rates):>14.3f} +- {sd:.3f} {per:>24} {ratio:>12.2f}")
    for method, runs in fits.items():
        if runs and all(runs):
            means = "  ".join(f"{k} {statistics.mean(r[k] for r in runs):.3f}" for k in FIT_KEYS if k in runs[0])
            print(f"fit of {method:<14} (mean over seeds)  {means}")


def free_play(args: argparse.Namespace, db: str) -> None:
    from harness.runner import EvalConfig, evaluate

    for method in ("crafter:random", "crafter:scripted"):
        episodes = args.episodes if method == "crafter:random" else max(1, args.episodes // 10)
        cfg = EvalConfig(task="crafter", model=method, db_url=db, progress=False, use_cache=False,
                         task_options={"episodes": episodes, "max_steps": 10_000, "seed": 0})
        summary = evaluate(cfg)
        print(f"{method:<18} episodes {episodes:>3}  score {_metric(summary, 'score'):6.2f}%  "
              f"reward {_metric(summary, 'reward'):6.2f}  length {_metric(summary, 'length'):8.1f}  "
              f"({summary.seconds:.0f}s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--demos", type=int, default=8)
    ap.add_argument("--corrupt", type=float, default=0.3)
    ap.add_argument("--max-steps", type=int, default=150)
    ap.add_argument("--free-play", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("HARNESS_ARTIFACTS", os.path.join(tmp, "artifacts"))
        db = f"sqlite:///{tmp}/bench.db"
        (free_play if args.free_play else instruct)(args, db)


if __name__ == "__main__":
    main()
