"""Votes needed to recover a known ranking: the arena's active pair sampler vs uniform pairs.

Simulated voters judge K models with known ratings (evenly spaced over ``--spread`` Elo points):
P(A better) follows Bradley-Terry on the true ratings, with a constant share of ties. After every
``--refit`` votes the ratings are refitted (harness.ratings, sandwich SEs) and the Spearman rank
correlation with the truth is taken. "Votes needed" is the first checkpoint from which the
correlation stays >= ``--target`` until the budget ends (a run that never settles counts as the
budget). Both samplers see the same seeds; the ratio is uniform / active (above 1: active is faster).

    python bench/arena_sampling.py            # 20 models over 500 Elo, 16 seeds
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import numpy as np

from harness.leaderboard.arena.sampler import pair_order
from harness.ratings import ELO_SCALE, PairCounts, rate_counts


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def simulate(k: int, spread: float, budget: int, refit: int, target: float, active: bool, seed: int,
             uniform_share: float, tie_share: float) -> int:
    rng = random.Random(seed)
    truth = np.linspace(-spread / 2, spread / 2, k) / ELO_SCALE
    np_rng = np.random.default_rng(seed)
    truth = truth[np_rng.permutation(k)]
    names = [f"m{i:02d}" for i in range(k)]
    index = {m: i for i, m in enumerate(names)}
    wins = np.zeros((k, k))
    ties = np.zeros((k, k))
    votes: dict[frozenset[str], int] = {}
    ratings: dict[str, float] = {}
    se: dict[str, float] = {}
    settled_at: int | None = None
    for n in range(1, budget + 1):
        a, b = pair_order(names, rng, ratings=ratings, se=se, votes=votes, uniform_share=uniform_share,
                          active=active)[0]
        i, j = index[a], index[b]
        u = rng.random()
        if u < tie_share:
            ties[i, j] += 0.5
            ties[j, i] += 0.5
        elif rng.random() < 1.0 / (1.0 + np.exp(truth[j] - truth[i])):
            wins[i, j] += 1
        else:
            wins[j, i] += 1
        votes[frozenset((a, b))] = votes.get(frozenset((a, b)), 0) + 1
        if n % refit == 0:
            fit = rate_counts(PairCounts(names, wins.copy(), ties.copy()), ci="sandwich")
            by = fit.by_model()
            ratings = {m: by[m].rating for m in names}
            se = {m: by[m].se if by[m].votes >= 5 else 400.0 for m in names}
            rho = spearman(np.array([ratings[m] for m in names]), truth)
            if rho >= target:
                settled_at = settled_at or n
            else:
                settled_at = None
    return settled_at or budget


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--spread", type=float, default=500.0, help="Elo points between the best and the worst")
    ap.add_argument("--budget", type=int, default=5000)
    ap.add_argument("--refit", type=int, default=20)
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--uniform-share", type=float, default=0.25)
    ap.add_argument("--tie-share", type=float, default=0.2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    started = time.perf_counter()
    result: dict[str, list[int]] = {"uniform": [], "active": []}
    for seed in range(args.seeds):
        for name in result:
            result[name].append(simulate(args.models, args.spread, args.budget, args.refit, args.target,
                                         name == "active", seed, args.uniform_share, args.tie_share))
    med = {k: statistics.median(v) for k, v in result.items()}
    mean = {k: statistics.fmean(v) for k, v in result.items()}
    out = {"models": args.models, "spread_elo": args.spread, "target_spearman": args.target, "seeds": args.seeds,
           "uniform_share": args.uniform_share, "votes": result, "median": med, "mean": mean,
           "ratio_median_uniform_over_active": round(med["uniform"] / med["active"], 3),
           "ratio_mean_uniform_over_active": round(mean["uniform"] / mean["active"], 3),
           "seconds": round(time.perf_counter() - started, 1)}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{args.models} models over {args.spread:.0f} Elo, target Spearman {args.target}, {args.seeds} seeds")
    for k in result:
        print(f"  {k:8s} votes needed: median {med[k]:.0f}, mean {mean[k]:.0f}  {result[k]}")
    print(f"  ratio uniform/active: median {out['ratio_median_uniform_over_active']}, "
          f"mean {out['ratio_mean_uniform_over_active']}  ({out['seconds']} s)")


if __name__ == "__main__":
    main()
