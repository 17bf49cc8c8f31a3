"""Crafter's evaluation protocol: parity with Crafter's own analysis code.

The reference below is a literal re-implementation, written from reading danijar/crafter
``analysis/common.py`` at commit e04542a2159f1aad3d4c5ad52e8185717380ee3a (functions
``compute_success_rates`` and ``compute_scores``): per method and seed, an achievement's percent is
``100 * (values >= 1).mean()`` over the episodes within budget; the score is
``exp(nanmean(log(1 + percents), -1)) - 1``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from harness.task import SampleRecord
from harness.tasks.agents.env import ACHIEVEMENTS
from harness.tasks.agents.metrics import crafter_metrics, crafter_score, success_rates


def ref_compute_success_rates(runs, budget=1e6, sortby=None):
    methods = sorted(set(run["method"] for run in runs))
    seeds = sorted(set(run["seed"] for run in runs))
    tasks = sorted(key for key in runs[0] if key.startswith("achievement_"))
    percents = np.empty((len(methods), len(seeds), len(tasks)))
    percents[:] = np.nan
    for run in runs:
        episodes = (np.array(run["xs"]) <= budget).sum()
        i = methods.index(run["method"])
        j = seeds.index(run["seed"])
        for key, values in run.items():
            if key in tasks:
                k = tasks.index(key)
                percent = 100 * (np.array(values[:episodes]) >= 1).mean()
                percents[i, j, k] = percent
    return percents, methods, seeds, tasks


def ref_compute_scores(percents):
    assert (0 <= percents).all() and (percents <= 100).all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        scores = np.exp(np.nanmean(np.log(1 + percents), -1)) - 1
    return scores


def _episodes(rng: np.random.Generator, n: int, p: np.ndarray) -> list[dict[str, float]]:
    # achievement counts (Crafter's stats hold counts: >= 1 means unlocked)
    counts = rng.binomial(3, p[None, :].repeat(n, 0))
    return [{f"achievement_{a}": float(c) for a, c in zip(ACHIEVEMENTS, row, strict=True)} | {"reward": 1.0,
            "length": float(rng.integers(50, 300))} for row in counts]


@pytest.mark.parametrize("seed", range(5))
def test_score_and_rates_match_crafters_analysis_code(seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.0, 0.6, size=len(ACHIEVEMENTS)) * (rng.uniform(size=len(ACHIEVEMENTS)) > 0.3)
    eps = _episodes(rng, int(rng.integers(3, 40)), p)
    run = {"method": "m", "seed": "0", "xs": np.cumsum([e["length"] for e in eps]).tolist()}
    run |= {f"achievement_{a}": [e[f"achievement_{a}"] for e in eps] for a in ACHIEVEMENTS}
    percents, _, _, tasks = ref_compute_success_rates([run])
    ref_score = float(ref_compute_scores(percents)[0, 0])
    ours = success_rates(eps)
    assert [f"achievement_{a}" for a in ACHIEVEMENTS] == tasks  # same order, all 22
    np.testing.assert_allclose([ours[a] for a in ACHIEVEMENTS], percents[0, 0], rtol=0, atol=1e-12)
    assert crafter_score(ours) == pytest.approx(ref_score, abs=1e-12)
    rows = {(m.name, m.breakdown_value): m for m in crafter_metrics(eps)}
    assert rows[("score", "")].value == pytest.approx(ref_score, abs=1e-12)
    assert rows[("score", "")].ci_low <= ref_score + 1e-9 <= rows[("score", "")].ci_high + 2e-9
    assert rows[("success_rate", "collect_wood")].value == pytest.approx(ours["collect_wood"])


def test_score_extremes_and_the_geometric_mean():
    assert crafter_score({a: 0.0 for a in ACHIEVEMENTS}) == 0.0
    assert crafter_score({a: 100.0 for a in ACHIEVEMENTS}) == pytest.approx(100.0)
    one = {a: 0.0 for a in ACHIEVEMENTS} | {"collect_wood": 100.0}
    assert crafter_score(one) == pytest.approx(101 ** (1 / 22) - 1)  # a hard unlock counts far less than 100/22
    assert math.isnan(crafter_score({}))


def test_task_aggregate_counts_episodes_and_leaves_unscored_out():
    from harness.runner import build_task

    task = build_task("crafter", {"episodes": 2, "max_steps": 5})
    eps = _episodes(np.random.default_rng(0), 4, np.full(len(ACHIEVEMENTS), 0.5))
    recs = [SampleRecord(f"s{i}", 0, e, None, None, {}) for i, e in enumerate(eps)]
    recs.append(SampleRecord("bad", 0, {}, "environment: crafter step 3 failed", None, {}))
    rows = {(m.name, m.breakdown_key, m.breakdown_value): m for m in task.aggregate(recs)}
    assert rows[("score", "", "")].n == 4 and rows[("unscored", "", "")].value == 1.0
    assert rows[("score", "", "")].value == pytest.approx(crafter_score(success_rates(eps)))
    assert len([k for k in rows if k[1] == "achievement"]) == 22
