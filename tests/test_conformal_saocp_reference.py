"""SAOCP against a literal re-implementation of its authors' released code: salesforce/online_conformal
@ d71cce3a5575cf91c4483b3af13de989f0bd848e, ``online_conformal/saocp.py`` (``_OGD`` and ``SAOCP.get_p``,
``predict``, ``create_expert``, ``update``) with ``pinball_loss`` and ``pinball_loss_grad`` of
``online_conformal/utils.py``: one scalar residual at a time, experts in a dict keyed by start time, the
scale sqrt(3) max |calibration residual|, the calibration residuals fed through ``update`` first, and the
interval's half-width ``predict(horizon)[1]`` read before each new residual. Written from reading the
code; the pandas/horizon plumbing is left out (one horizon, no forecast)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.tasks.conformal.learners import SAOCP, make_learner
from harness.tasks.conformal.metrics import stream_metrics
from harness.tasks.conformal.online import run_online
from harness.tasks.conformal.streams import DEFAULT_LEVELS, synthetic


def pinball_loss(y: float, yhat: float, q: float) -> float:
    return max(q * (y - yhat), (1 - q) * (yhat - y))


def pinball_loss_grad(y: float, yhat: float, q: float) -> float:
    return -q * (y > yhat) + (1 - q) * (y < yhat)


class RefOGD:
    def __init__(self, t: int, scale: float, alpha: float, yhat_0: float, g: int = 8) -> None:
        self.scale, self.base_lr, self.alpha = scale, scale / math.sqrt(3), alpha
        self.yhat, self.grad_norm = yhat_0, 0.0
        u = 0
        while t % 2 == 0:
            t //= 2
            u += 1
        self.lifetime = g * 2**u
        self.z = self.wz = 0.0
        self.s_t = 0

    @property
    def expired(self) -> bool:
        return self.s_t > self.lifetime

    def loss(self, y: float) -> float:
        return pinball_loss(y, self.yhat, 1 - self.alpha)

    @property
    def w(self) -> float:
        return 0 if self.s_t == 0 else self.z / self.s_t * (1 + self.wz)

    def update(self, y: float, meta_loss: float) -> None:
        w = self.w
        g = float(np.clip((meta_loss - self.loss(y)) / self.scale / max(self.alpha, 1 - self.alpha), -1 * (w > 0), 1))
        self.z += g
        self.wz += g * w
        self.s_t += 1
        grad = pinball_loss_grad(y, self.yhat, 1 - self.alpha)
        self.grad_norm += grad**2
        if self.grad_norm != 0:
            self.yhat = max(0, self.yhat - self.base_lr / math.sqrt(self.grad_norm) * grad)


class RefSAOCP:
    def __init__(self, calibration: list[float], coverage: float, lifetime: int = 8) -> None:
        self.t, self.coverage, self.lifetime = 1, coverage, lifetime
        self.experts: dict[int, RefOGD] = {}
        self.scale = 1 if not calibration else max(abs(r) for r in calibration) * math.sqrt(3)
        self.update(calibration)

    def get_p(self) -> dict[int, float]:
        prior = {t: 1 / (t**2 * (1 + math.floor(math.log2(t)))) for t in self.experts}
        z = sum(prior.values())
        prior = {t: v / z for t, v in prior.items()}
        p = {t: prior[t] * max(0, e.w) for t, e in self.experts.items()}
        sum_p = sum(p.values())
        return {t: v / sum_p for t, v in p.items()} if sum_p > 0 else prior

    def predict(self) -> float:
        p = self.get_p()
        return sum(p[t] * e.yhat for t, e in self.experts.items())

    def update(self, residuals: list[float]) -> None:
        for s in residuals:
            s_hat = self.predict()
            for t in [k for k, v in self.experts.items() if v.expired]:
                self.experts.pop(t)
            self.experts[self.t] = RefOGD(self.t, self.scale, 1 - self.coverage, g=self.lifetime, yhat_0=s_hat)
            meta_loss = pinball_loss(s, self.predict(), self.coverage)
            for e in self.experts.values():
                e.update(s, meta_loss)
            self.t += 1


def reference_run(warm: list[float], scores: list[float], coverage: float, lifetime: int) -> list[float]:
    ref = RefSAOCP(warm, coverage, lifetime)
    out = []
    for s in scores:
        out.append(ref.predict())
        ref.update([s])
    return out


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("lifetime", [8, 3])
def test_shifted_streams_match_the_reference_at_every_level(seed: int, lifetime: int) -> None:
    rng = np.random.default_rng(seed)
    warm = list(rng.exponential(1.0, 30))
    scores = list(rng.exponential(1.0, 400) * np.where(np.arange(400) > 200, 5.0, 1.0))  # a shift halfway
    levels = [0.5, 0.8, 0.9, 0.98]
    learner = make_learner("saocp", [1 - v for v in levels], warm, {"lifetime": lifetime})
    assert isinstance(learner, SAOCP)
    played = []
    for s in scores:
        played.append(learner.thresholds())
        learner.update(s)
    for k, cov in enumerate(levels):
        ref = reference_run(warm, scores, cov, lifetime)
        assert [p[k] for p in played] == pytest.approx(ref, rel=1e-9, abs=1e-12)
    # experts expire: far fewer live than steps taken (geometric covering intervals)
    assert learner.levels[0].start.size < 8 * math.log2(len(warm) + len(scores)) + 8


def test_zero_scores_and_a_jump_match_the_reference() -> None:
    """Ties at zero (the OGD gradient is 0 for y == yhat, so grad_norm can stay 0) and a 100x jump."""
    warm = [0.0, 0.0, 1.0, 2.0]
    scores = [0.0] * 5 + [100.0] * 20 + [0.5] * 20
    learner = make_learner("saocp", [0.1], warm, {})
    played = []
    for s in scores:
        played.append(learner.thresholds()[0])
        learner.update(s)
    assert played == pytest.approx(reference_run(warm, scores, 0.9, 8), rel=1e-9, abs=1e-12)
    assert max(played) > 10  # it follows the jump


def test_saocp_runs_online_and_its_settings_are_checked() -> None:
    y = synthetic("shift", 1100, 0)
    res = run_online(y, [1 - v for v in DEFAULT_LEVELS], "saocp", "ar", 100)
    m = stream_metrics(y[100:], res.yhat, res.q, DEFAULT_LEVELS)
    assert m["coverage_gap_max"] < 0.15 and m["infinite_sets"] == 0
    from harness.modelspec import build_model

    assert build_model("ocp:saocp", {"lifetime": 4}).spec == "ocp:saocp?lifetime=4"
    with pytest.raises(ValueError, match="whole number"):
        build_model("ocp:saocp", {"lifetime": 2.5})
    with pytest.raises(ValueError, match="does not apply"):
        build_model("ocp:saocp", {"lr": 0.1})
