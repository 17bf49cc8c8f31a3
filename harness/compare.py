"""Comparison of two stored runs: a paired test on the samples (and epochs) they share, or, for metrics
that exist only over the whole run (ARI, NMI, a k-means objective: no per-sample score to pair), the two
runs' own values side by side with an unpaired interval for the difference."""

from __future__ import annotations

import math

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from harness.aggregate import per_sample_means
from harness.stats import PairedResult, paired_test
from harness.store import ops
from harness.store.schema import MetricRow

Z95 = 1.959963984540054
# counts the runner writes for every run: not scores to compare
BOOKKEEPING = frozenset({"errors", "unscored", "cost", "seconds", "streams"})


def _run_metrics(s: Session, run_id: int) -> dict[str, MetricRow]:
    rows = s.scalars(select(MetricRow).where(MetricRow.run_id == run_id, MetricRow.breakdown_key == "")).all()
    return {m.name: m for m in rows if m.value is not None and math.isfinite(m.value)}


def corpus_result(name: str, a: MetricRow, b: MetricRow) -> PairedResult:
    """B - A from each run's stored value. With both runs' 95% CIs the difference's interval treats them
    as independent (sqrt of the summed squared half-widths) and the p-value is the matching normal one:
    conservative next to a paired test, which these metrics do not allow. Without CIs: values only."""
    diff = b.value - a.value
    n = min(a.n or 0, b.n or 0)
    if None in (a.ci_low, a.ci_high, b.ci_low, b.ci_high):
        return PairedResult(name, n, a.value, b.value, diff, math.nan, math.nan, math.nan,
                            "whole-run metric, no interval stored: values only")
    half = math.hypot((a.ci_high - a.ci_low) / 2, (b.ci_high - b.ci_low) / 2)  # type: ignore[operator]
    if half == 0:
        p = 1.0 if diff == 0 else 0.0
    else:
        p = math.erfc(abs(diff) / (half / Z95) / math.sqrt(2))
    return PairedResult(name, n, a.value, b.value, diff, diff - half, diff + half, p,
                        "whole-run metric: unpaired, from each run's 95% CI")


def compare_runs(sessions: sessionmaker[Session], run_a: int, run_b: int,
                 metric: str | None = None, seed: int = 0) -> list[PairedResult]:
    with sessions() as s:
        means_a = per_sample_means(ops.load_records(s, run_a))
        means_b = per_sample_means(ops.load_records(s, run_b))
        stored_a, stored_b = _run_metrics(s, run_a), _run_metrics(s, run_b)
    paired = sorted(set(means_a) & set(means_b))
    whole_run = sorted((set(stored_a) & set(stored_b)) - set(means_a) - set(means_b) - BOOKKEEPING)
    names = [metric] if metric else paired + whole_run
    if not names:
        raise ValueError("the two runs share no score names")
    out = []
    for name in names:
        if name in means_a and name in means_b:
            ids = sorted(set(means_a[name]) & set(means_b[name]))
            if not ids:
                raise ValueError(f"no scored samples in common for {name!r}")
            out.append(paired_test([means_a[name][i] for i in ids], [means_b[name][i] for i in ids],
                                   metric=name, seed=seed))
        elif name in stored_a and name in stored_b and name not in means_a and name not in means_b:
            out.append(corpus_result(name, stored_a[name], stored_b[name]))
        else:
            raise ValueError(f"score {name!r} is not in both runs")
    return out
