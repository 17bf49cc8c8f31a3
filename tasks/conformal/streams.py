"""The series the online runs are scored on, and the option parsing they share.

- Synthetic (seeded): y_t = 0.8 y_{t-1} + sigma_t e_t with
  ``stationary`` (Gaussian e, sigma = 1), ``shift`` (Gaussian e, sigma triples half-way),
  ``sinusoid`` (Gaussian e, sigma_t = 1 + 0.8 sin(2 pi t / 500)) and ``heavy`` (Student-t, 3 degrees
  of freedom, sigma = 1).
- Elec2: the shipped CSV (``data/elec2.csv``, see ``data/PROVENANCE.md``), the first ``rows`` rows,
  y = ``nswdemand``.
- Stocks: monthly closing prices 2000-2010 of five tickers from the ``vega_datasets`` package
  (its bundled ``stocks.csv``, read offline), one stream per ticker.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
STREAMS = ("heavy", "shift", "sinusoid", "stationary")
DEFAULT_LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.98)


def parse_levels(levels: Any) -> tuple[float, ...]:
    """Coverage levels from ``"0.5,0.9"`` or a list; strictly increasing, each in (0, 1)."""
    if isinstance(levels, str):
        parts: list[Any] = [p for p in levels.replace(";", ",").split(",") if p.strip()]
    elif isinstance(levels, int | float):
        parts = [levels]
    else:
        parts = list(levels)
    try:
        out = tuple(float(p) for p in parts)
    except (TypeError, ValueError):
        raise ValueError(f"levels must be numbers like 0.5,0.9, got {levels!r}") from None
    if not out or any(not (0.0 < v < 1.0) or math.isnan(v) for v in out):
        raise ValueError(f"levels must lie strictly between 0 and 1, got {list(out)}")
    if any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise ValueError(f"levels must be strictly increasing coverage levels, got {list(out)}")
    return out


def synthetic(kind: str, n: int, seed: int) -> list[float]:
    import numpy as np

    if kind not in STREAMS:
        raise ValueError(f"unknown stream {kind!r}; choose one of {', '.join(STREAMS)}")
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    if kind == "heavy":
        noise = rng.standard_t(3, size=n)
    else:
        noise = rng.standard_normal(n)
    sigma = np.ones(n)
    if kind == "shift":
        sigma[n // 2:] = 3.0
    elif kind == "sinusoid":
        sigma = 1.0 + 0.8 * np.sin(2 * np.pi * t / 500.0)
    y = np.empty(n)
    prev = 0.0
    for i in range(n):
        prev = 0.8 * prev + sigma[i] * noise[i]
        y[i] = prev
    return [float(v) for v in y]


def elec2(rows: int) -> list[float]:
    with (DATA / "elec2.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        out = []
        for i, row in enumerate(reader):
            if i >= rows:
                break
            out.append(float(row["nswdemand"]))
    return out


def stocks() -> dict[str, list[float]]:
    try:
        from vega_datasets import local_data
    except ImportError:
        raise ValueError("ocp_stocks needs the vega_datasets package (pip install vega_datasets)") from None
    df = local_data.stocks()
    out: dict[str, list[float]] = {}
    for symbol, group in df.sort_values(["symbol", "date"]).groupby("symbol", sort=True):
        out[str(symbol)] = [float(v) for v in group["price"]]
    return out


def nan_steps(stream: Sequence[float]) -> list[int]:
    return [i for i, v in enumerate(stream) if not math.isfinite(float(v))]
