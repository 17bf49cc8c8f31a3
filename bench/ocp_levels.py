"""Multi-level online conformal: every method on the synthetic streams (T = 20,000 by default),
Elec2 (first 2,000 rows) and the five monthly stock series, in one run.

Prints per stream and method: max coverage gap over levels, crossings, WIS, mean width, seconds,
and WIS as a ratio to the per-level OGD baseline (``ogd``). Usage:
``python bench/ocp_levels.py [--T 20000] [--seeds 1] [--methods pnorm,ogd,...]`` (``ogd`` is always run: it is
the ratio's base).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from harness.tasks.conformal.learners import METHODS as KNOWN  # noqa: E402
from harness.tasks.conformal.metrics import stream_metrics  # noqa: E402
from harness.tasks.conformal.online import run_online  # noqa: E402
from harness.tasks.conformal.streams import DEFAULT_LEVELS, STREAMS, elec2, stocks, synthetic  # noqa: E402

METHODS = ("pnorm", "up", "ogd_lazy", "ogd", "ogd_sorted", "aci", "aci_clipped", "dtaci", "saocp")


def measure(series: list[list[float]], forecaster: str, burn_in: int,
            methods: tuple[str, ...] = METHODS) -> dict[str, dict[str, float]]:
    alphas = [1 - v for v in DEFAULT_LEVELS]
    out = {}
    for method in methods:
        rows = []
        for y in series:
            res = run_online(y, alphas, method, forecaster, burn_in)
            m = stream_metrics(y[burn_in:], res.yhat, res.q, DEFAULT_LEVELS)
            rows.append({**{k: m[k] for k in ("coverage_gap_max", "crossings", "wis", "width_mean")},
                         "seconds": res.seconds})
        out[method] = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
    return out


def parse_args(default_methods: tuple[str, ...]) -> tuple[argparse.Namespace, list[str]]:
    """``--T``, ``--seeds`` and ``--methods`` (checked: an unknown method or T/seeds below 1 is one line,
    exit 2), shared with ``bench/ocp_level_sweep.py``."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=20000)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--methods", default=",".join(default_methods))
    args = ap.parse_args()
    picked = [m for m in args.methods.split(",") if m]
    unknown = [m for m in picked if m not in KNOWN]
    if unknown or args.T < 1 or args.seeds < 1:
        print(f"error: unknown methods {unknown} (choose from {', '.join(KNOWN)}), or T/seeds below 1", file=sys.stderr)
        raise SystemExit(2)
    return args, picked


def main() -> None:
    args, picked = parse_args(METHODS)
    methods = tuple(dict.fromkeys(["ogd", *picked]))  # ogd first: every ratio needs it
    cases = [(f"{k} T={args.T}", [synthetic(k, args.T + 100, s) for s in range(args.seeds)], "ar", 100)
             for k in ("stationary", "shift", "sinusoid", "heavy") if k in STREAMS]
    cases.append(("elec2 2000 rows", [elec2(2000)], "ar", 100))
    cases.append(("stocks (5 monthly)", list(stocks().values()), "last", 12))
    print(f"levels {', '.join(f'{v:g}' for v in DEFAULT_LEVELS)}; default settings; mean over {args.seeds} seed(s)")
    print(f"{'stream':22s} {'method':10s} {'gap_max':>8s} {'cross':>6s} {'wis':>9s} {'wis/ogd':>8s} {'width':>8s} "
          f"{'sec':>5s}")
    for name, series, fc, burn in cases:
        res = measure(series, fc, burn, methods)
        base = res["ogd"]["wis"]
        for method, m in res.items():
            print(f"{name:22s} {method:10s} {m['coverage_gap_max']:8.4f} {m['crossings']:6.0f} {m['wis']:9.5f} "
                  f"{m['wis'] / base:8.4f} {m['width_mean']:8.4f} {m['seconds']:5.1f}")


if __name__ == "__main__":
    main()
