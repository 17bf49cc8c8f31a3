"""3DSPA on synthetic physics: train time, pair accuracy per violation, scoring throughput.

Baseline: the same autoencoder untrained (random weights) — the ratio printed is trained accuracy
over untrained accuracy per violation, and seconds per scored video.

    OMP_NUM_THREADS=1 python bench/spa3d_train.py --steps 600 --videos 150 --pairs 15
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def accuracy(scorer, pairs) -> dict[str, float]:
    out: dict[str, list[bool]] = {}
    for p in pairs:
        a, b = scorer.score_tracks(p.realistic)["realism"], scorer.score_tracks(p.violated)["realism"]
        out.setdefault(p.violation, []).append(1.0 if a > b else 0.5 if a == b else 0.0)
    return {k: float(np.mean(v)) for k, v in out.items()}


def main() -> None:
    import torch

    from harness.tasks.spa3d import synth
    from harness.tasks.spa3d.autoencoder import AutoencoderConfig, TrackAutoencoder
    from harness.tasks.spa3d.scorer import RealismScorer
    from harness.tasks.spa3d.train import TrainConfig, train

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--videos", type=int, default=150)
    ap.add_argument("--pairs", type=int, default=15, help="pairs per violation")
    args = ap.parse_args()
    torch.set_num_threads(1)
    videos = synth.realistic_set(args.videos, seed=1)
    pairs = synth.pair_set(args.pairs, seed=2000)
    t0 = time.perf_counter()
    model, history = train(videos, TrainConfig(steps=args.steps))
    train_s = time.perf_counter() - t0
    torch.manual_seed(0)
    base = accuracy(RealismScorer(TrackAutoencoder(AutoencoderConfig()).eval()), pairs)
    scorer = RealismScorer(model)
    t0 = time.perf_counter()
    trained = accuracy(scorer, pairs)
    per_video = (time.perf_counter() - t0) / (2 * len(pairs))
    print(f"train: {args.steps} steps on {args.videos} videos in {train_s:.1f} s; final l1 {history[-1]['l1']:.4f}")
    for k in trained:
        print(f"{k:14s} accuracy trained {trained[k]:.3f} vs untrained baseline {base[k]:.3f} "
              f"(ratio {trained[k] / max(base[k], 1e-9):.2f})")
    print(f"scoring: {per_video * 1000:.1f} ms per video")


if __name__ == "__main__":
    main()
