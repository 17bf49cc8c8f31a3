"""pass@k for HumanEval-style tasks: the unbiased estimator of Chen et al. (2021), as released in
openai/human-eval ``human_eval/evaluation.py`` (``estimate_pass_at_k``).

Per problem with n sampled completions of which c pass, pass@k = 1 - C(n - c, k) / C(n, k) (1 when
n - c < k), computed as a running product so large n never overflows; the task's pass@k is the mean
over problems, reported only when every problem has at least k completions (as released). Here the
completions are a run's epochs (``--epochs N`` with sampling); errored or unscored epochs are not
completions and are left out (counted in the ``errors`` / ``unscored`` rows). pass@1 equals the
default per-sample mean of the 0/1 score, so only k > 1 is added.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from harness.stats import mean_ci
from harness.task import SampleRecord
from harness.types import Metric

KS = (10, 100)


def estimate_pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n - c, k) / C(n, k) for one problem."""
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_counts(records: Iterable[SampleRecord], score: str = "pass@1") -> dict[str, tuple[int, int]]:
    """{sample id: (completions scored, completions passed)}."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        if r.error is None and r.unscored is None and r.scores.get(score) is not None:
            counts[r.sample_id][0] += 1
            counts[r.sample_id][1] += int(float(r.scores[score]) >= 0.5)
    return {sid: (n, c) for sid, (n, c) in counts.items()}


def pass_at_k_metrics(records: Iterable[SampleRecord], ks: Sequence[int] = KS, score: str = "pass@1",
                      seed: int = 0) -> list[Metric]:
    """``pass@k`` rows (mean over problems, bootstrap CI over problems) for each k that every problem reaches."""
    counts = pass_counts(records, score)
    if not counts:
        return []
    out = []
    for k in ks:
        if all(n >= k for n, _ in counts.values()):
            est = mean_ci([estimate_pass_at_k(n, c, k) for n, c in counts.values()], seed=seed)
            out.append(Metric(f"pass@{k}", est.value, est.ci_low, est.ci_high, est.n))
    return out
