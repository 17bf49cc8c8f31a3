"""3D-VITAL against the baseline on the synthetic aerial-ground set: mAP and rank-1 per protocol over
seeds (the data seed and the training seed move together), with each ablation's cost, and how good the
lifts were (the lifting model's failures on the training images, what CVCF removed of them).

    python bench/reid_ablation.py                    # seeds 0 1 2, A2G and G2A, the default set (40 ids)
    python bench/reid_ablation.py --seeds 0 --steps 100

Fits are cached (``$HARNESS_CACHE_DIR/reid/fits``; the lifting model once for all seeds), so rerunning
after ``harness eval`` runs with the same settings only embeds and scores. Prints mean and standard
deviation over seeds, the difference to ``reid:baseline`` (paired by seed) and the per-seed values.
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


def _mean(vals: list[float | None], fmt: str = ".2f") -> str:
    nums = [v for v in vals if v is not None]
    return format(statistics.mean(nums), fmt) if vals and len(nums) == len(vals) else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--protocols", nargs="+", default=["A2G", "G2A"])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--ids", type=int, default=40, help="identities in the synthetic set (half train)")
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: the backend's)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per fit")
    ap.add_argument("--lift-figures", type=int, default=600, help="the lifting model's pretraining figures")
    ap.add_argument("--lift-steps", type=int, default=2000, help="the lifting model's training steps")
    ap.add_argument("--workers", type=int, default=1, help="Blender processes for the lifting set's renders")
    args = ap.parse_args()
    lifter = None
    if any(v != "baseline" for v in args.variants):
        from harness.tasks.reid.lifting import LifterConfig, load_or_fit

        # the fit the vital backends will load from the cache (workers and threads are not in its key)
        t_lift = time.perf_counter()
        lifter = load_or_fit(LifterConfig.sized(args.lift_figures, args.lift_steps, threads=args.threads,
                                                workers=args.workers))
        print(f"lifting model ({args.lift_figures} figures x 2 views, {args.lift_steps} steps): "
              f"{time.perf_counter() - t_lift:.0f} s; held-out {lifter.record['heldout']}, "
              f"calibrated tau {lifter.record['cvcf_tau']}, fit {lifter.record.get('fit_seconds')} s")
    variants = ["baseline", *[v for v in args.variants if v != "baseline"]]  # the differences need the baseline
    db = Path(tempfile.mkdtemp(prefix="reid-bench-")) / "bench.db"
    sessions = open_db(f"sqlite:///{db}")
    res: dict[tuple[str, str, int], dict[str, float]] = {}
    t0 = time.perf_counter()
    for seed in args.seeds:
        for variant in variants:
            for protocol in args.protocols:
                settings: dict[str, object] = {"seed": seed, "threads": args.threads,
                                               "lift_figures": args.lift_figures, "lift_steps": args.lift_steps}
                if args.steps:
                    settings["steps"] = args.steps
                summary = Runner(EvalConfig(task="reid_aerial_ground", model=f"reid:{variant}",
                                            task_options={"protocol": protocol, "seed": seed, "ids": args.ids},
                                            model_settings=settings, progress=False), session_factory=sessions).run()
                res[(variant, protocol, seed)] = {m.name: m.value for m in summary.metrics if not m.breakdown_key}
    print(f"synthetic aerial-ground ReID ({args.ids} identities, 4 ground + 4 aerial views), seeds {args.seeds}; "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"{'backend':<20}{'protocol':<10}{'mAP':>14}{'d mAP':>9}{'rank-1':>14}{'d R1':>9}{'mINP':>8}"
          f"{'failed':>8}{'rm fail':>8}{'rm good':>8}{'views':>7}{'fit s':>7}")
    for protocol in args.protocols:
        for variant in variants:
            rows = [res[(variant, protocol, s)] for s in args.seeds]
            base = [res[("baseline", protocol, s)] for s in args.seeds]

            def ms(key: str, rows: list[dict[str, float]] = rows) -> str:
                vals = [r.get(key, float("nan")) for r in rows]
                sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
                return f"{statistics.mean(vals):.3f}±{sd:.3f}"

            def diff(key: str, rows: list[dict[str, float]] = rows, base: list[dict[str, float]] = base) -> str:
                return f"{statistics.mean(r[key] - b[key] for r, b in zip(rows, base, strict=True)):+.3f}"

            got = lambda key, rows=rows: [r.get(key) for r in rows]  # noqa: E731
            fit = statistics.mean(r.get("fit_seconds", float("nan")) for r in rows)
            print(f"{'reid:' + variant:<20}{protocol:<10}{ms('mAP'):>14}{diff('mAP'):>9}{ms('rank1'):>14}"
                  f"{diff('rank1'):>9}{statistics.mean(r['mINP'] for r in rows):>8.3f}{_mean(got('lift_failed')):>8}"
                  f"{_mean(got('cvcf_corrupted_removed')):>8}{_mean(got('cvcf_clean_removed')):>8}"
                  f"{_mean(got('synthetic_views_used'), '.0f'):>7}{fit:>7.0f}")
    print("per seed (mAP/rank-1):")
    for protocol in args.protocols:
        for variant in variants:
            cells = [f"{res[(variant, protocol, s)]['mAP']:.3f}/{res[(variant, protocol, s)]['rank1']:.3f}"
                     for s in args.seeds]
            print(f"  {'reid:' + variant:<20}{protocol:<6}{'  '.join(cells)}")
    lifts = [res[(v, p, s)] for v in variants for p in args.protocols for s in args.seeds
             if res[(v, p, s)].get("lift_attribute_accuracy") is not None]
    if lifts:
        print(f"lifts of the training images: attribute accuracy "
              f"{statistics.mean(r['lift_attribute_accuracy'] for r in lifts):.3f}, median azimuth error "
              f"{statistics.mean(r['lift_azimuth_error'] for r in lifts):.1f} deg, failed "
              f"{statistics.mean(r['lift_failed'] for r in lifts):.2f} (means over seeds)")


if __name__ == "__main__":
    main()
