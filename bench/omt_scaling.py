"""Optimal Mixture Transport vs the POT baselines, in one run.

Part 1: label transfer on the synthetic pair (n = 1000, k = 4, d = 2), digits (pixel/contrast
shift) and, when scanpy is installed, pbmc68k_reduced (batch shift), for omt, pot:gmm, pot:emd and
pot:sinkhorn: accuracy, component match, restart spread (10 restarts), stability ratio, seconds.
Part 2: seconds against n (1e3 .. 1e6 points per domain, k = 4, d = 2) for omt and pot:emd;
pot:emd needs an n x n cost matrix and is capped at ``--emd-cap`` points (default 4000: 16e6
entries, ~130 MB; 1e5 points would need 80 GB), printed as the ratio emd/omt where both ran.
Usage: ``python bench/omt_scaling.py [--max-n 1000000] [--emd-cap 4000] [--skip-tasks]``.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402

from harness.tasks.transport.data import digits, pbmc, synthetic  # noqa: E402
from harness.tasks.transport.methods import Problem, run_method  # noqa: E402

METHODS = ("omt", "pot_gmm", "pot_emd", "pot_sinkhorn")


def _accuracy(labels: list[int], truth: np.ndarray) -> tuple[float, float]:
    lab = np.asarray(labels)
    match = [float(np.bincount(lab[truth == c]).argmax() == c) for c in np.unique(truth)]
    return float(np.mean(lab == truth)), float(np.mean(match))


def tasks_table() -> None:
    cases = [("synthetic n=1000 k=4", lambda: synthetic(1000, 4, 2, 0)), ("digits shift", lambda: digits(0))]
    try:
        import scanpy  # noqa: F401

        cases.append(("pbmc68k batch shift", lambda: pbmc(0)))
    except ImportError:
        print("scanpy not installed: pbmc skipped")
    print(f"{'problem':22s} {'method':13s} {'label_acc':>9s} {'comp_match':>10s} {'spread':>9s} {'stability':>9s} "
          f"{'seconds':>8s}")
    for name, make in cases:
        D = make()
        p = Problem(D["Xs"], D["ys"], D["Xt"], D["kind"])
        for method in METHODS:
            r = run_method(p, method, {"restarts": 10, "stability": 3})
            acc, match = _accuracy(r["labels"], D["yt"])
            print(f"{name:22s} {method:13s} {acc:9.4f} {match:10.4f} {r['restart_spread']:9.2e} "
                  f"{r['stability_ratio']:9.4f} {r['seconds']:8.2f}", flush=True)


def scaling(max_n: int, emd_cap: int) -> None:
    print(f"\n{'n':>8s} {'omt_s':>8s} {'omt_acc':>8s} {'emd_s':>8s} {'emd_acc':>8s} {'emd/omt':>8s}")
    for n in (n for n in (1000, 2000, 4000, 10_000, 100_000, 1_000_000) if n <= max_n):
        D = synthetic(n, 4, 2, 0)
        p = Problem(D["Xs"], D["ys"], D["Xt"], D["kind"])
        t0 = time.perf_counter()
        r = run_method(p, "omt", {"restarts": 1, "stability": 0})
        omt_s = time.perf_counter() - t0
        omt_acc = _accuracy(r["labels"], D["yt"])[0]
        if n <= emd_cap:
            t0 = time.perf_counter()
            e = run_method(p, "pot_emd", {"restarts": 1, "stability": 0})
            emd_s = time.perf_counter() - t0
            print(f"{n:8d} {omt_s:8.2f} {omt_acc:8.4f} {emd_s:8.2f} {_accuracy(e['labels'], D['yt'])[0]:8.4f} "
                  f"{emd_s / omt_s:8.2f}", flush=True)
        else:
            print(f"{n:8d} {omt_s:8.2f} {omt_acc:8.4f} {'capped':>8s} {'-':>8s} {'-':>8s}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-n", type=int, default=1_000_000)
    ap.add_argument("--emd-cap", type=int, default=4000)
    ap.add_argument("--skip-tasks", action="store_true")
    args = ap.parse_args()
    if not args.skip_tasks:
        tasks_table()
    scaling(args.max_n, args.emd_cap)


if __name__ == "__main__":
    main()
