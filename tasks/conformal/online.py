"""One online run over one stream, strictly in order, plus the array encoding of its result.

Only :class:`Feedback` holds the stream. The forecaster and the learner see y_t through
``Feedback.reveal(t)``, which refuses unless the sets of step t were already emitted with
``Feedback.emit(t, ...)`` and every earlier step is finished; so a set can depend on y_<t only (the
tests also check that changing y_t.. leaves every earlier set unchanged). The first ``burn_in``
values are revealed without sets: they warm up the forecaster and give the learners their initial
thresholds and score scale.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.tasks.conformal.forecasters import make_forecaster
from harness.tasks.conformal.learners import make_learner


class OrderError(RuntimeError):
    """Feedback asked for out of order (a bug in a learner loop, never a data problem)."""


class Feedback:
    def __init__(self, stream: Sequence[float], burn_in: int) -> None:
        self._y = [float(v) for v in stream]
        self.burn_in = burn_in
        self.next = 0  # the step whose feedback comes next
        self.emitted: list[tuple[float, list[float]]] = []

    def __len__(self) -> int:
        return len(self._y)

    def emit(self, t: int, yhat: float, thresholds: Sequence[float]) -> None:
        if t != self.next or t < self.burn_in or len(self.emitted) != t - self.burn_in:
            raise OrderError(f"sets for step {t} emitted out of order (next step is {self.next})")
        self.emitted.append((float(yhat), [max(float(q), 0.0) for q in thresholds]))

    def reveal(self, t: int) -> float:
        if t != self.next:
            raise OrderError(f"feedback of step {t} asked before step {self.next}")
        if t >= self.burn_in and len(self.emitted) != t - self.burn_in + 1:
            raise OrderError(f"feedback of step {t} asked before its sets were emitted")
        self.next += 1
        return self._y[t]


@dataclass
class RunResult:
    yhat: list[float]
    q: list[list[float]]  # [T][d], clipped at 0 (a negative threshold is the point forecast alone)
    burn_in: int
    seconds: float


def run_online(stream: Sequence[float], alphas: Sequence[float], method: str, forecaster: str,
               burn_in: int, settings: dict[str, float] | None = None) -> RunResult:
    gate = Feedback(stream, burn_in)
    fc = make_forecaster(forecaster)
    t0 = time.perf_counter()
    warm: list[float] = []
    for t in range(burn_in):
        pred = fc.predict()
        y = gate.reveal(t)
        if pred is not None:
            warm.append(abs(y - pred))
        fc.update(y)
    learner = make_learner(method, alphas, warm, dict(settings or {}))
    for t in range(burn_in, len(gate)):
        pred = fc.predict()
        yhat = float(pred) if pred is not None else 0.0
        gate.emit(t, yhat, learner.thresholds())
        y = gate.reveal(t)
        learner.update(abs(y - yhat))
        fc.update(y)
    return RunResult([e[0] for e in gate.emitted], [e[1] for e in gate.emitted], burn_in,
                     time.perf_counter() - t0)


def encode(values: Any) -> str:
    """float64 little-endian, base64: exact and ~3x smaller than a JSON list of floats."""
    import numpy as np

    return base64.b64encode(np.ascontiguousarray(values, dtype="<f8").tobytes()).decode("ascii")


def decode(text: str, shape: Sequence[int]) -> Any:
    import numpy as np

    arr = np.frombuffer(base64.b64decode(text.encode("ascii")), dtype="<f8")
    n = 1
    for s in shape:
        n *= int(s)
    if arr.size != n:
        raise ValueError(f"encoded array has {arr.size} values, expected {n}")
    return arr.reshape(tuple(int(s) for s in shape))
