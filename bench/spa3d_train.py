"""3DSPA on synthetic physics: train time, pair accuracy per violation, scoring throughput.

Trains with ``fit_scorer`` (a fifth of the realistic videos held out to calibrate the score) and
reports held-out pair accuracy per violation for two per-video scores: the calibrated surprise (the
default ``realism``) and the Average Jaccard (TRAJAN's score). Baseline: the same network untrained,
calibrated on the same held-out videos; the ratio printed is trained over untrained mean accuracy.

    OMP_NUM_THREADS=1 python bench/spa3d_train.py --steps 1000 --videos 300 --pairs 25 --pair-seed 3000
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def accuracy(results: list[tuple[str, dict, dict]], key: str) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for violation, real, bad in results:
        a, b = real[key], bad[key]
        out.setdefault(violation, []).append(1.0 if a > b else 0.5 if a == b else 0.0)
    return {k: float(np.mean(v)) for k, v in out.items()}


def main() -> None:
    import torch

    from harness.tasks.spa3d import synth
    from harness.tasks.spa3d.autoencoder import AutoencoderConfig, TrackAutoencoder
    from harness.tasks.spa3d.calibration import fit_calibration
    from harness.tasks.spa3d.scorer import RealismScorer
    from harness.tasks.spa3d.train import TrainConfig, fit_scorer, split_for_calibration

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--videos", type=int, default=300)
    ap.add_argument("--pairs", type=int, default=25, help="pairs per violation")
    ap.add_argument("--pair-seed", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    videos = synth.realistic_set(args.videos, seed=1)
    pairs = synth.pair_set(args.pairs, seed=args.pair_seed)
    cfg = TrainConfig(steps=args.steps, batch_size=args.batch, seed=args.seed)
    t0 = time.perf_counter()
    scorer, history = fit_scorer(videos, cfg)
    train_s = time.perf_counter() - t0
    torch.manual_seed(0)
    untrained = RealismScorer(TrackAutoencoder(AutoencoderConfig()).eval())
    _, calibration_videos = split_for_calibration(videos, seed=args.seed)
    untrained.calibration = fit_calibration([untrained.score_tracks(v) for v in calibration_videos])

    t0 = time.perf_counter()
    trained_rows = [(p.violation, scorer.score_tracks(p.realistic), scorer.score_tracks(p.violated)) for p in pairs]
    per_video = (time.perf_counter() - t0) / (2 * len(pairs))
    base_rows = [(p.violation, untrained.score_tracks(p.realistic), untrained.score_tracks(p.violated)) for p in pairs]
    print(f"train: {args.steps} steps x {args.batch} on {args.videos} videos (a fifth held out to calibrate) in "
          f"{train_s:.1f} s; final l1 {history[-1]['l1']:.4f}; pairs: {args.pairs}/violation, seed {args.pair_seed}")
    for label, key in (("calibrated surprise (realism)", "realism"), ("average Jaccard", "average_jaccard")):
        trained, base = accuracy(trained_rows, key), accuracy(base_rows, key)
        print(f"{label}:")
        for k in trained:
            print(f"  {k:14s} trained {trained[k]:.2f}   untrained {base[k]:.2f}")
        mean_t, mean_b = float(np.mean(list(trained.values()))), float(np.mean(list(base.values())))
        ratio = mean_t / max(mean_b, 1e-9)
        print(f"  {'mean':14s} trained {mean_t:.2f}   untrained {mean_b:.2f}   (ratio {ratio:.2f})")
    print(f"scoring: {per_video * 1000:.1f} ms per video ({scorer.folds} folds)")


if __name__ == "__main__":
    main()
