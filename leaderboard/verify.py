"""Server-side check of pushed metrics: each one is recomputed from the run's stored sample rows.

A pushed metric is kept only when the server reproduces it (same value within 1e-6 relative, same
n) with the harness's default aggregation (per-sample means over epochs, then the mean over
samples; ``errors``, ``unscored``, ``cost_per_sample``; breakdowns by sample metadata). Everything
else (a task's own aggregate, a value or n the rows do not support, a run with no rows) is refused:
not stored, so never shown or ranked, and named in the push reply. The stored value, n and 95% CI
are the server's own, never the client's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from harness.aggregate import per_sample_means
from harness.stats import mean_ci
from harness.task import SampleRecord
from harness.types import Metric

REL_TOL = 1e-6


def _subset(records: list[SampleRecord], key: str, value: str) -> list[SampleRecord]:
    if not key:
        return records
    out = []
    for r in records:
        raw = r.metadata.get(key)
        if any(v is not None and str(v) == value for v in (raw if isinstance(raw, list) else [raw])):
            out.append(r)
    return out


def _point(records: list[SampleRecord], name: str) -> tuple[float, int, list[float]] | None:
    """(value, n, the values a CI is drawn from) as the default aggregation computes it, or None."""
    if name == "errors":
        return float(sum(r.error is not None for r in records)), len(records), []
    if name == "unscored":
        return float(sum(r.error is None and r.unscored is not None for r in records)), len(records), []
    if name == "cost_per_sample":
        costs = [r.cost for r in records]
        if not any(costs):
            return None
        return float(sum(costs) / len(costs)), len({r.sample_id for r in records}), costs
    by_id = per_sample_means(records).get(name)
    if not by_id:
        return None
    values = list(by_id.values())
    return float(sum(values) / len(values)), len(values), values


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12)


def verify(records: list[SampleRecord], pushed: Iterable[Metric]) -> tuple[list[Metric], list[str]]:
    """(the metrics to store, recomputed; labels of the pushed ones refused)."""
    kept: list[Metric] = []
    refused: list[str] = []
    for m in pushed:
        label = m.name if not m.breakdown_key else f"{m.name}[{m.breakdown_key}={m.breakdown_value}]"
        group = _subset(records, m.breakdown_key, m.breakdown_value)
        point = _point(group, m.name) if group else None
        if point is None or point[1] != m.n or not _close(point[0], m.value):
            refused.append(label)
            continue
        value, n, values = point
        if values:
            est = mean_ci(values)
            kept.append(Metric(m.name, est.value, est.ci_low, est.ci_high, n, m.breakdown_key, m.breakdown_value))
        else:
            kept.append(Metric(m.name, value, None, None, n, m.breakdown_key, m.breakdown_value))
    return kept, refused
