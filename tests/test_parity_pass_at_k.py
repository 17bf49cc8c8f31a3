"""Parity of pass@k with openai/human-eval.

Reference: openai/human-eval at commit 6d43fb980f9fee3c892a914eda09951f772ad10d,
``human_eval/evaluation.py``: ``estimate_pass_at_k`` and the pass@k dict of
``evaluate_functional_correctness`` (mean over problems, only for k every problem reaches). The
``ref_*`` functions re-implement them from reading them; ours are in
``harness.tasks.reliability.pass_at_k`` and the ``reliability_humaneval`` task's aggregate. Inputs:
seeded random pass tables (all fail, all pass, n - c < k, one completion, uneven completion counts)
and records with errored / unscored epochs, which are not completions.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from harness.task import SampleRecord
from harness.tasks.reliability.pass_at_k import estimate_pass_at_k, pass_at_k_metrics


def ref_estimate_pass_at_k(num_samples, num_correct, k):  # type: ignore[no-untyped-def]
    def estimator(n: int, c: int, k: int) -> float:
        if n - c < k:
            return 1.0
        return 1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1))

    if isinstance(num_samples, int):
        num_samples_it = itertools.repeat(num_samples, len(num_correct))
    else:
        assert len(num_samples) == len(num_correct)
        num_samples_it = iter(num_samples)
    return np.array([estimator(int(n), int(c), k) for n, c in zip(num_samples_it, num_correct, strict=False)])


def ref_pass_at_k(results: dict[str, list[bool]], ks: list[int]) -> dict[str, float]:
    total, correct = [], []
    for passed in results.values():
        total.append(len(passed))
        correct.append(sum(passed))
    total_a, correct_a = np.array(total), np.array(correct)
    return {f"pass@{k}": ref_estimate_pass_at_k(total_a, correct_a, k).mean() for k in ks if (total_a >= k).all()}


@pytest.mark.parametrize("case", range(300))
def test_estimator_equals_human_eval(case: int) -> None:
    rng = random.Random(case)
    n = rng.choice([1, 2, 5, 10, 20, 100, 200, rng.randint(1, 300)])
    c = rng.choice([0, n, rng.randint(0, n)])
    k = rng.choice([1, 2, 10, 100, n, max(1, n - c), n - c + 1])
    assert estimate_pass_at_k(n, c, k) == pytest.approx(float(ref_estimate_pass_at_k(n, [c], k)[0]), abs=1e-12)
    if n - c >= k:  # the closed form, for the record
        assert estimate_pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-9)


@pytest.mark.parametrize("case", range(100))
def test_task_rows_equal_human_eval(case: int) -> None:
    rng = random.Random(1000 + case)
    n_problems = rng.randint(1, 12)
    even = case % 3 != 0
    n_each = rng.choice([1, 10, 12, 100])
    results, records = {}, []
    for p in range(n_problems):
        n = n_each if even else rng.choice([n_each, n_each + 3, max(1, n_each - 2)])
        rate = rng.choice([0.0, 1.0, rng.random()])
        passed = [rng.random() < rate for _ in range(n)]
        results[f"HumanEval/{p}"] = passed
        for e, ok in enumerate(passed):
            values = {"pass@1": float(ok), "correct": float(ok)}
            records.append(SampleRecord(f"HumanEval/{p}", e, values, None, None, {}))
        # epochs that never produced a completion: not counted by either side
        records.append(SampleRecord(f"HumanEval/{p}", n, {}, None, "HTTP 500 after retries", {}))
        records.append(SampleRecord(f"HumanEval/{p}", n + 1, {}, "judge gave no verdict", None, {}))
    ref = ref_pass_at_k(results, [1, 10, 100])
    ours = {m.name: m.value for m in pass_at_k_metrics(records, ks=(1, 10, 100))}
    assert ours.keys() == ref.keys()
    for name, value in ref.items():
        assert ours[name] == pytest.approx(value, abs=1e-12), name


def test_the_humaneval_task_reports_pass_at_10_with_ten_epochs() -> None:
    from harness.tasks.reliability.task import reliability_humaneval

    task = reliability_humaneval(allow_unsandboxed=True)
    records = [SampleRecord(f"HumanEval/{p}", e, {"pass@1": float(e < p), "correct": float(e < p)}, None, None, {})
               for p in range(3) for e in range(10)]
    rows = {m.name: m.value for m in task.aggregate(records) if not m.breakdown_key}
    expected = np.mean([float(ref_estimate_pass_at_k(10, [p], 10)[0]) for p in range(3)])  # 0, 1, 1
    assert rows["pass@10"] == pytest.approx(expected) and rows["pass@1"] == pytest.approx(np.mean([0, 0.1, 0.2]))
    assert "pass@100" not in rows
