"""Batched Hartigan vs scikit-learn KMeans (lloyd, elkan) on 200,000 x 32 blobs, k = 64 (issue 12).

Same data (make_blobs, 64 centres, cluster_std 2.0, random_state 0) and the same k-means++ seeds
(kmeans_plusplus, random_state = seed) for every algorithm; one thread each (OMP_NUM_THREADS=1 unless
set). Prints objective and seconds per algorithm and seed, and the ratios against Lloyd:
objective ratio (target <= 1 on every seed) and time ratio (target <= 1.5).

    python bench/methods_hartigan.py [--n 200000] [--d 32] [--k 64] [--seeds 3]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import time  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--k", type=int, default=64)
    ap.add_argument("--std", type=float, default=2.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--init", choices=["k-means++", "random"], default="k-means++",
                    help="random: k distinct data points drawn with the seed (the note's hard start)")
    args = ap.parse_args()

    import numpy as np
    from sklearn.cluster import KMeans, kmeans_plusplus
    from sklearn.datasets import make_blobs

    from harness.tasks.methods.backends.hartigan_core import batched_hartigan, objective

    X, _ = make_blobs(args.n, args.d, centers=args.k, cluster_std=args.std, random_state=0)
    threads = os.environ["OMP_NUM_THREADS"]
    print(f"data: {args.n} x {args.d} blobs, k={args.k}, std={args.std}, init={args.init}, OMP_NUM_THREADS={threads}")
    head = ("seed", "algorithm", "objective", "iters", "seconds", "obj/lloyd", "t/lloyd")
    print("{:>4} {:>10} {:>16} {:>6} {:>8} {:>10} {:>8}".format(*head))
    worst_obj, worst_time = 0.0, 0.0
    for seed in range(args.seeds):
        if args.init == "random":
            init = X[np.random.default_rng(seed).choice(len(X), args.k, replace=False)]
        else:
            init, _ = kmeans_plusplus(X, args.k, random_state=seed)
        rows = {}
        for algo in ("lloyd", "elkan"):
            t0 = time.perf_counter()
            km = KMeans(args.k, init=init, n_init=1, algorithm=algo).fit(X)
            rows[algo] = (objective(X, km.labels_, args.k), int(km.n_iter_), time.perf_counter() - t0)
        t0 = time.perf_counter()
        res = batched_hartigan(X, init, track_objective=False)
        secs = time.perf_counter() - t0
        rows["hartigan"] = (objective(X, res.labels, args.k), res.iterations, secs)
        base_obj, _, base_t = rows["lloyd"]
        for algo, (obj, iters, t) in rows.items():
            print(f"{seed:>4} {algo:>10} {obj:>16.8e} {iters:>6} {t:>8.2f} {obj / base_obj:>10.6f} {t / base_t:>8.2f}")
        print(f"     hartigan moves: {res.parallel_moves} parallel-safe, {res.sequential_moves} sequential")
        worst_obj = max(worst_obj, rows["hartigan"][0] / base_obj)
        worst_time = max(worst_time, rows["hartigan"][2] / base_t)
    print(f"batched hartigan vs lloyd: worst objective ratio {worst_obj:.6f} (target <= 1), "
          f"worst time ratio {worst_time:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
