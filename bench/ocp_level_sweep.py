"""Multi-level online conformal: how the calibration and the WIS change with the number of levels d.

The seed paper's bounds grow like sqrt(log d) in d for p-norm OMD (against sqrt(d) for per-level OGD).
This sweeps d in (2, 4, 8, 16, 32) coverage levels spaced evenly over [0.5, 0.98] on the heavy-tailed
and the shift streams and prints, per stream, method and d: coverage_gap_max (max over levels of
|coverage - target|), WIS, both as ratios to d = 2, next to sqrt(log d / log 2) and sqrt(d / 2).
WIS averages over a different level set at each d, so its ratio shows how the score moves with the
grid, not a regret. Usage: ``python bench/ocp_level_sweep.py [--T 20000] [--seeds 1] [--methods ...]``.
"""

from __future__ import annotations

import math
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from harness.tasks.conformal.metrics import stream_metrics  # noqa: E402
from harness.tasks.conformal.online import run_online  # noqa: E402
from harness.tasks.conformal.streams import synthetic  # noqa: E402

DS = (2, 4, 8, 16, 32)
METHODS = ("pnorm", "ogd_lazy", "aci", "dtaci")
STREAMS = ("heavy", "shift")


def levels_for(d: int) -> tuple[float, ...]:
    """d coverage levels, evenly spaced from 0.5 to 0.98 (rounded so that the table names them exactly)."""
    return tuple(round(float(v), 6) for v in np.linspace(0.5, 0.98, d))


def measure(kind: str, method: str, d: int, T: int, seeds: int) -> tuple[float, float]:
    levels = levels_for(d)
    gaps, wis = [], []
    for s in range(seeds):
        y = synthetic(kind, T + 100, s)
        res = run_online(y, [1 - v for v in levels], method, "ar", 100)
        m = stream_metrics(y[100:], res.yhat, res.q, levels)
        gaps.append(m["coverage_gap_max"])
        wis.append(m["wis"])
    return float(np.mean(gaps)), float(np.mean(wis))


def main() -> None:
    from ocp_levels import parse_args  # bench/ is the script's folder, so its sibling imports as is

    args, methods = parse_args(METHODS)
    t0 = time.perf_counter()
    print(f"levels: d evenly spaced in [0.5, 0.98]; T={args.T}; mean over {args.seeds} seed(s); default settings")
    print(f"{'stream':7s} {'method':9s} {'d':>3s} {'gap_max':>8s} {'gap/d2':>7s} {'wis':>8s} {'wis/d2':>7s} "
          f"{'sqrt(log d/log 2)':>17s} {'sqrt(d/2)':>9s}")
    for kind in STREAMS:
        for method in methods:
            base: tuple[float, float] | None = None
            for d in DS:
                gap, wis = measure(kind, method, d, args.T, args.seeds)
                base = base or (gap, wis)
                ratio = gap / base[0] if base[0] > 0 else math.nan
                print(f"{kind:7s} {method:9s} {d:3d} {gap:8.4f} {ratio:7.2f} {wis:8.4f} {wis / base[1]:7.3f} "
                      f"{math.sqrt(math.log(d) / math.log(2)):17.2f} {math.sqrt(d / 2):9.2f}", flush=True)
    print(f"total {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
