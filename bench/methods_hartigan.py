"""Batched Hartigan vs scikit-learn KMeans (lloyd, elkan): time and objective, same seeds, same run.

Two cases on make_blobs data (random_state 0), both 200,000 x 32:
  base: k = 64 centres, cluster_std 2 (well separated);
  hard: k = 256 centres, cluster_std 8 (overlapping: nearest centres are ~33 apart, about 4 std).
Every algorithm starts from the same k-means++ seeds (kmeans_plusplus, random_state = seed);
scikit-learn runs with its defaults (tol 1e-4, max_iter 300). All BLAS/OpenMP pools are pinned
to one thread (threadpoolctl) for every algorithm. Objectives are recomputed from each partition.
Prints per seed: objective, iterations, seconds, ratios to Lloyd (objective, time) and to elkan
(time), and Hartigan's parallel-safe vs sequential move counts, plain and followed by ``--escapes``
dissolve-and-split escapes (hartigan_escape: each kept only if it lowers the objective; the time
shown is Hartigan's plus the escapes'); then the objective against Lloyd
from *random* starts, of two kinds: k data points drawn with the seed as centres, and a uniform
random partition (the start of Telgarsky and Vattani's comparison, where Lloyd begins from the
partition's means). With --reference the classical sequential Hartigan runs from the same random
starts, which shows whether a gap to Lloyd belongs to Hartigan's method or to the batching.
Targets: Hartigan time <= elkan, objective <= Lloyd from the same k-means++ seeds; random starts
are reported, not targeted (no local method beats another from every start).

    python bench/methods_hartigan.py            # both cases, 3 seeds, random starts (~9 min on 2 loaded cores)
    python bench/methods_hartigan.py --quick    # 20,000 points, 2 seeds, with the reference (~1 min)
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import time  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:
    import numpy as np

CASES = {"base": (64, 2.0), "hard": (256, 8.0)}
RANDOM_STARTS = {
    "points": "k distinct data points drawn with the seed as centres",
    "partition": "a uniform random partition (Telgarsky and Vattani's start; Lloyd starts from its means)",
}


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} cores)"


def _random_starts(X: np.ndarray, k: int, case: str, kind: str, seeds: int, reference: bool, escapes: int) -> str:
    """Lloyd vs batched (and with ``reference`` classical) Hartigan from random starts; one summary part."""
    import numpy as np
    from sklearn.cluster import KMeans

    from harness.tasks.methods.backends.hartigan_core import (
        _cluster_sums,
        batched_hartigan,
        objective,
        sequential_hartigan,
    )
    from harness.tasks.methods.backends.hartigan_escape import with_escapes

    print(f"-- {case}, random starts: {RANDOM_STARTS[kind]}")
    print("{:>4} {:>15} {:>15} {:>11} {:>11} {:>11} {:>8} {:>8} {:>8}".format(
        "seed", "lloyd", "hartigan", "hart/lloyd", "classical", f"+escape{escapes}", "lloyd s", "hart s", "+esc s"))
    gaps, esc_gaps = [], []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        if kind == "points":
            init, labels = X[rng.choice(len(X), k, replace=False)], None
        else:
            labels = rng.integers(k, size=len(X))
            init = _cluster_sums(X, labels, k) / np.bincount(labels, minlength=k)[:, None]  # the partition's means
        t0 = time.perf_counter()
        km = KMeans(k, init=init, n_init=1, algorithm="lloyd").fit(X)
        t_l = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = batched_hartigan(X, init, track_objective=False, labels=labels)
        t_h = time.perf_counter() - t0
        lo, ha = objective(X, km.labels_, k), objective(X, res.labels, k)
        t0 = time.perf_counter()
        esc = objective(X, with_escapes(X, res, escapes).labels, k) / lo
        t_e = t_h + time.perf_counter() - t0
        classical = (f"{objective(X, sequential_hartigan(X, init, labels=labels).labels, k) / lo:>11.6f}"
                     if reference else f"{'-':>11}")
        gaps.append(ha / lo)
        esc_gaps.append(esc)
        print(f"{seed:>4} {lo:>15.8e} {ha:>15.8e} {ha / lo:>11.6f} {classical} {esc:>11.6f} {t_l:>8.2f} {t_h:>8.2f} "
              f"{t_e:>8.2f}")
    better = sum(g < 1.0 for g in gaps)
    return (f"{kind} mean {np.mean(gaps):.6f}, range {min(gaps):.6f}-{max(gaps):.6f}, "
            f"below lloyd {better}/{len(gaps)}; +escape{escapes} mean {np.mean(esc_gaps):.6f}, "
            f"range {min(esc_gaps):.6f}-{max(esc_gaps):.6f}, below lloyd {sum(g < 1.0 for g in esc_gaps)}/{len(gaps)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--random-seeds", type=int, default=3, help="random-start runs per case (0: none)")
    ap.add_argument("--cases", default="base,hard", help=f"comma-separated subset of {', '.join(CASES)}")
    ap.add_argument("--escapes", type=int, default=1,
                    help="dissolve-and-split escapes tried after batched Hartigan (the +escapeN rows)")
    ap.add_argument("--reference", action="store_true",
                    help="also run the classical sequential Hartigan (pure Python, slow) from the random starts")
    ap.add_argument("--quick", action="store_true", help="20,000 points, 2 seeds, 2 random starts, with --reference")
    args = ap.parse_args()
    if args.quick:
        args.n, args.seeds, args.random_seeds, args.reference = 20_000, 2, 2, True
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case {unknown[0]!r}; choose from {', '.join(CASES)}")

    import numpy as np
    from sklearn.cluster import KMeans, kmeans_plusplus
    from sklearn.datasets import make_blobs
    from threadpoolctl import threadpool_info, threadpool_limits

    from harness.tasks.methods.backends.hartigan_core import batched_hartigan, objective
    from harness.tasks.methods.backends.hartigan_escape import with_escapes

    with threadpool_limits(limits=1):
        pools = ", ".join(f"{p['internal_api']}={p['num_threads']}" for p in threadpool_info())
        print(f"threads: pinned to 1 for every algorithm by threadpoolctl ({pools}); start {_load()}")
        summary = []
        for case in cases:
            k, std = CASES[case]
            X, _ = make_blobs(args.n, args.d, centers=k, cluster_std=std, random_state=0)
            print(f"\n== {case}: {args.n} x {args.d} blobs, k={k}, std={std}, k-means++ seeds")
            print("{:>4} {:>9} {:>15} {:>5} {:>8} {:>10} {:>7} {:>7}  {}".format(
                "seed", "algorithm", "objective", "iters", "seconds", "obj/lloyd", "t/lloyd", "t/elkan",
                "moves (parallel-safe / sequential)"))
            obj_r, t_r, esc_obj, esc_t = [], [], [], []
            for seed in range(args.seeds):
                init, _ = kmeans_plusplus(X, k, random_state=seed)
                rows = {}
                for algo in ("lloyd", "elkan"):
                    t0 = time.perf_counter()
                    km = KMeans(k, init=init, n_init=1, algorithm=algo).fit(X)
                    rows[algo] = (objective(X, km.labels_, k), int(km.n_iter_), time.perf_counter() - t0, "")
                t0 = time.perf_counter()
                res = batched_hartigan(X, init, track_objective=False)
                secs = time.perf_counter() - t0
                moves = f"{res.parallel_moves} / {res.sequential_moves}" + ("" if res.converged else " (not converged)")
                rows["hartigan"] = (objective(X, res.labels, k), res.iterations, secs, moves)
                t0 = time.perf_counter()
                esc = with_escapes(X, res, args.escapes)
                secs_esc = secs + time.perf_counter() - t0
                rows[f"+escape{args.escapes}"] = (objective(X, esc.labels, k), esc.iterations, secs_esc,
                                                  f"{esc.parallel_moves} / {esc.sequential_moves}")
                base_obj, base_t, elkan_t = rows["lloyd"][0], rows["lloyd"][2], rows["elkan"][2]
                for algo, (obj, iters, t, mv) in rows.items():
                    print(f"{seed:>4} {algo:>9} {obj:>15.8e} {iters:>5} {t:>8.2f} {obj / base_obj:>10.6f} "
                          f"{t / base_t:>7.2f} {t / elkan_t:>7.2f}  {mv}")
                obj_r.append(rows["hartigan"][0] / base_obj)
                t_r.append(secs / elkan_t)
                esc_obj.append(rows[f"+escape{args.escapes}"][0] / base_obj)
                esc_t.append(secs_esc / elkan_t)
            line = (f"{case}: hartigan objective/lloyd worst {max(obj_r):.6f} (target <= 1), "
                    f"time/elkan worst {max(t_r):.2f}x mean {np.mean(t_r):.2f}x (target <= 1); "
                    f"with {args.escapes} escape(s): objective/lloyd worst {max(esc_obj):.6f} mean "
                    f"{np.mean(esc_obj):.6f}, time/elkan worst {max(esc_t):.2f}x mean {np.mean(esc_t):.2f}x")
            if args.random_seeds:
                line += "; random starts, hartigan/lloyd: " + "; ".join(
                    _random_starts(X, k, case, kind, args.random_seeds, args.reference, args.escapes)
                    for kind in RANDOM_STARTS)
            summary.append(line)
        print()
        for line in summary:
            print(line)
        print(f"end {_load()}")


if __name__ == "__main__":
    main()
