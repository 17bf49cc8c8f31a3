"""3DSPA design variants on synthetic physics: pair accuracy per violation and per scoring rule.

Trains one configuration (object-id features, bottleneck size, width, steps) and reports held-out
pair accuracy (15 pairs per violation, seed 2000, as bench/spa3d_train.py) for four per-video
scoring rules: AJ (the default), minus plain error, and two reference-normalised rules (AJ minus
the untrained network's AJ; error over the untrained network's error), a likelihood-ratio-style
correction for how hard a video is to reconstruct at all [ours, not from the paper]. Baseline: the
default rule (AJ) on the same network untrained; the ratio printed is trained over untrained.

    OMP_NUM_THREADS=1 python bench/spa3d_variants.py --features 8 --latents 4 --steps 1000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

Rule = Callable[[dict[str, float]], float]
RULES: dict[str, Rule] = {
    "AJ": lambda s: s["aj"],
    "-error": lambda s: -s["err"],
    "AJ-refAJ": lambda s: s["aj"] - s["ref_aj"],
    "-error/refError": lambda s: -s["err"] / max(s["ref_err"], 1e-12),
}


def accuracy(rows: list[tuple[str, dict, dict]], rule: Rule) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for violation, real, bad in rows:
        a, b = rule(real), rule(bad)
        out.setdefault(violation, []).append(1.0 if a > b else 0.5 if a == b else 0.0)
    return {k: float(np.mean(v)) for k, v in out.items()}


def main() -> None:
    import torch

    from harness.tasks.spa3d import synth
    from harness.tasks.spa3d.autoencoder import AutoencoderConfig, TrackAutoencoder
    from harness.tasks.spa3d.scorer import RealismScorer
    from harness.tasks.spa3d.train import TrainConfig, train

    ap = argparse.ArgumentParser()
    ap.add_argument("--features", type=int, default=0, help="per-object feature channels (object-id analogue)")
    ap.add_argument("--latents", type=int, default=16)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--videos", type=int, default=150)
    ap.add_argument("--pairs", type=int, default=15, help="pairs per violation")
    args = ap.parse_args()
    torch.set_num_threads(1)
    scene = synth.SceneConfig(feature_dim=args.features)
    videos = synth.realistic_set(args.videos, seed=1, cfg=scene)
    pairs = synth.pair_set(args.pairs, seed=2000, cfg=scene)
    model_cfg = AutoencoderConfig(feature_dim=args.features, num_latents=args.latents, width=args.width)
    t0 = time.perf_counter()
    model, history = train(videos, TrainConfig(steps=args.steps, model=model_cfg))
    print(f"train: {args.steps} steps in {time.perf_counter() - t0:.1f} s; final l1 {history[-1]['l1']:.4f}")
    torch.manual_seed(0)
    trained, reference = RealismScorer(model), RealismScorer(TrackAutoencoder(model_cfg).eval())

    def measures(tracks) -> dict[str, float]:
        a, r = trained.score_tracks(tracks), reference.score_tracks(tracks)
        return {"aj": a["average_jaccard"], "err": a["error"], "ref_aj": r["average_jaccard"], "ref_err": r["error"]}

    rows = [(p.violation, measures(p.realistic), measures(p.violated)) for p in pairs]
    untrained = accuracy(rows, lambda s: s["ref_aj"])
    base_mean = float(np.mean(list(untrained.values())))
    print(f"{'untrained AJ':16s} " + "  ".join(f"{k} {v:.2f}" for k, v in untrained.items())
          + f"  | mean {base_mean:.2f}")
    for name, rule in RULES.items():
        acc = accuracy(rows, rule)
        mean = float(np.mean(list(acc.values())))
        print(f"{name:16s} " + "  ".join(f"{k} {v:.2f}" for k, v in acc.items())
              + f"  | mean {mean:.2f} (x{mean / max(base_mean, 1e-9):.2f} untrained AJ)")

if __name__ == "__main__":
    main()
