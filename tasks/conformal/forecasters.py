"""Base forecasters for the online runs: the point prediction the conformal sets are centred on.

Both are online: ``predict()`` uses only values already passed to ``update()``.

- ``last``: the previous value (a random walk forecast).
- ``ar``: an AR(p) model with intercept whose coefficients are refitted every step by recursive least
  squares on the history revealed so far (exact running least squares up to the small ridge prior).
"""

from __future__ import annotations

from typing import Any

FORECASTERS = ("ar", "last")


class LastValue:
    def __init__(self) -> None:
        self.last: float | None = None

    def predict(self) -> float | None:
        return self.last

    def update(self, y: float) -> None:
        self.last = float(y)


class RecursiveAR:
    def __init__(self, order: int = 3, ridge: float = 1e-3) -> None:
        import numpy as np

        self.order = order
        self.history: list[float] = []
        self.coef = np.zeros(order + 1)
        # inverse Gram matrix of the ridge prior: P = (ridge I)^-1
        self.P = np.eye(order + 1) / ridge

    def _features(self) -> Any:
        import numpy as np

        lags = self.history[-1: -self.order - 1: -1]
        return np.array([1.0, *lags])

    def predict(self) -> float | None:
        if not self.history:
            return None
        if len(self.history) < self.order + 1:
            return self.history[-1]  # too little history to regress on: fall back to the last value
        return float(self._features() @ self.coef)

    def update(self, y: float) -> None:
        if len(self.history) >= self.order:
            x = self._features()
            Px = self.P @ x
            gain = Px / (1.0 + x @ Px)
            self.coef = self.coef + gain * (y - x @ self.coef)
            self.P = self.P - self.outer(gain, Px)
        self.history.append(float(y))
        if len(self.history) > self.order + 1:
            del self.history[0]

    @staticmethod
    def outer(a: Any, b: Any) -> Any:
        import numpy as np

        return np.outer(a, b)


def make_forecaster(name: str) -> LastValue | RecursiveAR:
    if name == "last":
        return LastValue()
    if name == "ar":
        return RecursiveAR()
    raise ValueError(f"unknown forecaster {name!r}; choose one of {', '.join(FORECASTERS)}")
