"""Importance-Aware Fine-tuning against plain fine-tuning and the frequency prior on the dsgg fixture.

Runs ``harness eval --task dsgg -T setting=predcls`` in-process for ``dsgg-prior:freq`` and for
``dsgg-ft`` with ``iaf=true`` and ``iaf=false`` at each seed, into one SQLite database, and prints the
pooled metrics (R@20, set precision / recall / F1, redundancy, informativeness-weighted recall, trivial rate,
parse errors) with their 95% bootstrap intervals as a Markdown table.

    OMP_NUM_THREADS=2 python bench/dsgg_iaf.py --db /tmp/dsgg_iaf.db --seeds 0 1
    OMP_NUM_THREADS=2 python bench/dsgg_iaf.py --close-truncated                 # + closed replies
    OMP_NUM_THREADS=2 python bench/dsgg_iaf.py --steps 96 --train-limit 12      # other budgets

Fits are cached (``$HARNESS_CACHE_DIR/fits``) and runs resume, so a rerun only does what is missing.
"""

from __future__ import annotations

import argparse
import time

from harness.runner import EvalConfig, Runner
from harness.store.db import open_db

METRICS = ("R@20", "precision", "recall", "f1", "redundancy", "informative_recall", "trivial_rate", "parse_errors")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="/tmp/dsgg_iaf.db")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--steps", type=int, default=None, help="dsgg-ft steps (default: the backend's)")
    ap.add_argument("--train-limit", type=int, default=None)
    ap.add_argument("--extra", nargs="*", default=[], help="more dsgg-ft settings, KEY=VALUE")
    ap.add_argument("--close-truncated", action="store_true",
                    help="also score each fit with -M close_truncated=true (the same fit, from the cache)")
    args = ap.parse_args()
    sessions = open_db(f"sqlite:///{args.db}")
    base: dict[str, object] = dict(kv.split("=", 1) for kv in args.extra)
    if args.steps:
        base["steps"] = args.steps
    if args.train_limit:
        base["train_limit"] = args.train_limit
    runs: list[tuple[str, str, dict[str, object]]] = [("frequency prior", "dsgg-prior:freq", {})]
    for seed in args.seeds:
        for iaf in (True, False):
            name = f"{'IAF' if iaf else 'plain FT'}, seed {seed}"
            runs.append((name, "dsgg-ft", {**base, "iaf": iaf, "seed": seed}))
            if args.close_truncated:
                runs.append((name + ", truncated replies closed", "dsgg-ft",
                             {**base, "iaf": iaf, "seed": seed, "close_truncated": True}))
    rows = []
    for label, spec, settings in runs:
        t0 = time.perf_counter()
        cfg = EvalConfig(task="dsgg", model=spec, task_options={"setting": "predcls"}, model_settings=settings,
                         progress=False)
        summary = Runner(cfg, session_factory=sessions).run()
        found = {m.name: m for m in summary.metrics if not m.breakdown_key}
        cells = []
        for name in METRICS:
            m = found.get(name)
            if m is None:
                cells.append("-")
            elif m.ci_low is not None and m.ci_high is not None and name != "parse_errors":
                cells.append(f"{m.value:.3f} [{m.ci_low:.2f}, {m.ci_high:.2f}]")
            else:
                cells.append(f"{m.value:.3g}")
        rows.append(f"| {label} | " + " | ".join(cells) + f" | {time.perf_counter() - t0:.0f} |")
        print(rows[-1], flush=True)
    print("\n| model | " + " | ".join(METRICS) + " | wall s |")
    print("|" + " --- |" * (len(METRICS) + 2))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
