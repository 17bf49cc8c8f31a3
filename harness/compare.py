"""Paired comparison of two stored runs on the samples (and epochs) they share."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from harness.aggregate import per_sample_means
from harness.stats import PairedResult, paired_test
from harness.store import ops


def compare_runs(sessions: sessionmaker[Session], run_a: int, run_b: int,
                 metric: str | None = None, seed: int = 0) -> list[PairedResult]:
    with sessions() as s:
        means_a = per_sample_means(ops.load_records(s, run_a))
        means_b = per_sample_means(ops.load_records(s, run_b))
    names = [metric] if metric else sorted(set(means_a) & set(means_b))
    if not names:
        raise ValueError("the two runs share no score names")
    out = []
    for name in names:
        if name not in means_a or name not in means_b:
            raise ValueError(f"score {name!r} is not in both runs")
        ids = sorted(set(means_a[name]) & set(means_b[name]))
        if not ids:
            raise ValueError(f"no scored samples in common for {name!r}")
        out.append(paired_test([means_a[name][i] for i in ids], [means_b[name][i] for i in ids],
                               metric=name, seed=seed))
    return out
