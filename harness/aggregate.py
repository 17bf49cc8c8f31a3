"""Default aggregation: mean of every score value with a CI, overall and per breakdown.

Epochs are averaged within a sample first, then over samples (the bootstrap resamples samples),
so repeated draws of one item never pass for independent evidence; samples are taken in sample-id
order, so the seeded bootstrap gives one interval for one set of records. Unscored and errored samples
are left out of the means and counted in their own rows (``unscored``, ``errors``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from harness.stats import mean_ci
from harness.task import SampleRecord, Task
from harness.types import Metric


def per_sample_means(records: Iterable[SampleRecord]) -> dict[str, dict[str, float]]:
    """{metric name: {sample id: mean over that sample's scored epochs}}."""
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.error is not None or r.unscored is not None:
            continue
        for name, value in r.scores.items():
            if value is None:
                continue
            sums[name][r.sample_id].append(float(value))
    # sample-id order, whatever order the records came in: the bootstrap resamples positions, so the
    # same samples listed differently would otherwise give a different interval
    return {name: {sid: sum(by_id[sid]) / len(by_id[sid]) for sid in sorted(by_id)} for name, by_id in sums.items()}


def _metrics_for(records: list[SampleRecord], key: str = "", value: str = "", seed: int = 0) -> list[Metric]:
    out = []
    for name, by_id in sorted(per_sample_means(records).items()):
        est = mean_ci(list(by_id.values()), seed=seed)
        out.append(Metric(name, est.value, est.ci_low, est.ci_high, est.n, key, value))
    return out


def default_aggregate(task: Task, records: list[SampleRecord], seed: int = 0) -> list[Metric]:
    records = sorted(records, key=lambda r: (r.sample_id, r.epoch))  # cost_per_sample resamples them in this order
    metrics = _metrics_for(records, seed=seed)
    n_ids = len({r.sample_id for r in records})
    n_err = sum(1 for r in records if r.error is not None)
    n_unscored = sum(1 for r in records if r.error is None and r.unscored is not None)
    metrics.append(Metric("errors", float(n_err), n=len(records)))
    metrics.append(Metric("unscored", float(n_unscored), n=len(records)))
    costs = [r.cost for r in records]
    if any(costs):
        est = mean_ci(costs, seed=seed)
        metrics.append(Metric("cost_per_sample", est.value, est.ci_low, est.ci_high, n_ids))
    for key in task.breakdowns:
        groups: dict[str, list[SampleRecord]] = defaultdict(list)
        for r in records:
            raw = r.metadata.get(key)
            for val in raw if isinstance(raw, list) else [raw]:
                if val is not None:
                    groups[str(val)].append(r)
        for val, group in sorted(groups.items()):
            metrics += _metrics_for(group, key, val, seed)
    return metrics


def aggregate(task: Task, records: list[SampleRecord], seed: int = 0) -> list[Metric]:
    """Every metric of a run. Records are put in (sample id, epoch) order first, so a task's own
    aggregate and the default one give the same numbers and CIs for the same records in any order
    (the runner's completion order, or a database's row order)."""
    records = sorted(records, key=lambda r: (r.sample_id, r.epoch))
    metrics = task.aggregate(records) if task.aggregate is not None else default_aggregate(task, records, seed)
    # an undefined metric (a correlation over constant values, an empty breakdown) is no row,
    # never a failed run
    return [m for m in metrics if m.value is not None and math.isfinite(m.value)]
