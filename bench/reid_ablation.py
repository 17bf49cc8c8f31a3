"""3D-VITAL against the baseline on the synthetic aerial-ground set: mAP and rank-1 per protocol over
seeds (the data seed and the training seed move together), with each ablation's cost.

    python bench/reid_ablation.py                    # seeds 0 1 2, A2G and G2A, the default set (40 ids)
    python bench/reid_ablation.py --seeds 0 --steps 100

Fits are cached (``$HARNESS_CACHE_DIR/reid/fits``), so rerunning after ``harness eval`` runs with the same
settings only embeds and scores. Prints mean and standard deviation over seeds and the difference
to ``reid:baseline`` (paired by seed).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from harness.runner import EvalConfig, Runner
from harness.store.db import open_db

VARIANTS = ("baseline", "vital", "vital-no-cvcf", "vital-no-vaas")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--protocols", nargs="+", default=["A2G", "G2A"])
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: the backend's)")
    args = ap.parse_args()
    db = Path(tempfile.mkdtemp(prefix="reid-bench-")) / "bench.db"
    sessions = open_db(f"sqlite:///{db}")
    res: dict[tuple[str, str, int], dict[str, float]] = {}
    t0 = time.perf_counter()
    for seed in args.seeds:
        for variant in VARIANTS:
            for protocol in args.protocols:
                settings: dict[str, object] = {"seed": seed}
                if args.steps:
                    settings["steps"] = args.steps
                summary = Runner(EvalConfig(task="reid_aerial_ground", model=f"reid:{variant}",
                                            task_options={"protocol": protocol, "seed": seed},
                                            model_settings=settings, progress=False), session_factory=sessions).run()
                res[(variant, protocol, seed)] = {m.name: m.value for m in summary.metrics if not m.breakdown_key}
    print(f"synthetic aerial-ground ReID (40 identities, 4 ground + 4 aerial views), seeds {args.seeds}; "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"{'backend':<20}{'protocol':<10}{'mAP':>14}{'d mAP':>9}{'rank-1':>14}{'d R1':>9}{'mINP':>8}"
          f"{'CVCF':>7}{'fit s':>8}")
    for protocol in args.protocols:
        for variant in VARIANTS:
            rows = [res[(variant, protocol, s)] for s in args.seeds]
            base = [res[("baseline", protocol, s)] for s in args.seeds]

            def ms(key: str, rows: list[dict[str, float]] = rows) -> str:
                vals = [r.get(key, float("nan")) for r in rows]
                sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
                return f"{statistics.mean(vals):.3f}±{sd:.3f}"

            def diff(key: str, rows: list[dict[str, float]] = rows, base: list[dict[str, float]] = base) -> str:
                return f"{statistics.mean(r[key] - b[key] for r, b in zip(rows, base, strict=True)):+.3f}"

            cvcf = [r.get("cvcf_corrupted_removed") for r in rows]
            cv = f"{statistics.mean(cvcf):.2f}" if all(c is not None for c in cvcf) else "-"
            fit = statistics.mean(r.get("fit_seconds", float("nan")) for r in rows)
            print(f"{'reid:' + variant:<20}{protocol:<10}{ms('mAP'):>14}{diff('mAP'):>9}{ms('rank1'):>14}"
                  f"{diff('rank1'):>9}{statistics.mean(r['mINP'] for r in rows):>8.3f}{cv:>7}{fit:>8.0f}")


if __name__ == "__main__":
    main()
