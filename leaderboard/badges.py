"""Colours of per-sample score badges, from each metric's declared direction (never from its name).

A score is green at its best end and red at its worst end; which end is best is the declared
direction, and where the ends are is the declared scale (0..1, 0..100) or, for a raw score, the
lowest and highest value in the run. A score without a declared direction is never coloured.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field

from harness.types import MetricInfo

from .ranking import direction_of, direction_text

SCALE_BOUNDS = {"fraction": (0.0, 1.0), "percent": (0.0, 100.0)}


@dataclass(slots=True)
class Badges:
    infos: dict[str, MetricInfo | None]
    observed: dict[str, tuple[float, float]] = field(default_factory=dict)  # (min, max) in the run

    def bounds(self, name: str) -> tuple[float, float] | None:
        info = self.infos.get(name)
        if info is not None and info.scale in SCALE_BOUNDS:
            return SCALE_BOUNDS[info.scale]
        seen = self.observed.get(name)
        return seen if seen is not None and seen[0] < seen[1] else None

    def css(self, name: str, value: object) -> str:
        """"good", "bad" or "" for the badge of score ``name`` at ``value``."""
        direction = direction_of(self.infos.get(name))
        span = self.bounds(name)
        if direction is None or span is None or isinstance(value, bool) or not isinstance(value, int | float):
            return ""
        if not math.isfinite(value):
            return ""
        lo, hi = span
        best, worst = (hi, lo) if direction == "higher" else (lo, hi)
        tol = (hi - lo) * 1e-9
        if abs(value - best) <= tol or (value - best) * (1 if direction == "higher" else -1) > 0:
            return "good"
        if abs(value - worst) <= tol or (worst - value) * (1 if direction == "higher" else -1) > 0:
            return "bad"
        return ""

    def title(self, name: str) -> str:
        return direction_text(direction_of(self.infos.get(name)))

    def wrong(self, name: str) -> str | None:
        """A filter for the samples not at the best end of ``name`` (None: no direction or no bounds)."""
        direction = direction_of(self.infos.get(name))
        span = self.bounds(name)
        if direction is None or span is None:
            return None
        lo, hi = span
        return shlex.quote(f"score:{name}<{hi:g}" if direction == "higher" else f"score:{name}>{lo:g}")
