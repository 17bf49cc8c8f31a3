"""LongShOTBench aggregation, as released (eval/scoring.py of mbzuai-oryx/LongShOT), with CIs.

Released arithmetic (all sums over *items*; an item's turns are re-joined here):
- task accuracy = sum of earned weight / sum of positive weight over the items of a canonical task
  (source tasks merged by TASK_REMAP) -- a weighted micro average, not a mean of item ratios; a task
  (or modality / duration group) whose items carry no positive weight has accuracy 0.0 and still
  counts in its category, as released (``perf['total'] > 0 else 0.0``);
- category = unweighted mean of the accuracies of its tasks present; overall = unweighted mean of
  the categories present;
- modality rows (visual / audio / speech; an item counts in every group it touches) and duration
  rows (<30, 30-45, >45 min) are micro averages over their items.
Met penalty criteria are never subtracted in the released numbers (``overall`` etc.); the rows
named ``*_penalized`` subtract them (floored at 0 per turn), which is what the rubric design intends.
Values are percentages (0-100) like the paper. CIs: percentile bootstrap over items (turns of one
item stay together), ``harness.stats.BOOTSTRAP_ROUNDS`` rounds, seed 0. Tasks outside the 16
canonical ones get their own task rows but, as released, count in no category.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from harness.aggregate import per_sample_means
from harness.stats import BOOTSTRAP_ROUNDS, mean_ci, percentile_interval, resample_counts
from harness.task import SampleRecord
from harness.types import Metric

from .items import DURATION_BINS, TASK_CATEGORIES


@dataclass(slots=True)
class ItemTotals:
    item: str
    task: str
    modalities: tuple[str, ...]
    duration_bin: str
    earned: float = 0.0
    earned_pen: float = 0.0  # earned after penalties (floored per turn)
    possible: float = 0.0


def item_totals(records: Sequence[SampleRecord]) -> list[ItemTotals]:
    """Sum scored turns into items; epochs of a turn are averaged first (the reference has none)."""
    per_turn: dict[tuple[str, str], list[SampleRecord]] = defaultdict(list)
    for r in records:
        if r.error is None and r.unscored is None and "possible" in r.scores:
            item = str(r.metadata.get("sample_id") or r.sample_id.split("#")[0])
            per_turn[(item, r.sample_id)].append(r)
    items: dict[str, ItemTotals] = {}
    for (item, _), reps in per_turn.items():
        m = reps[0].metadata
        tot = items.get(item)
        if tot is None:
            tot = items[item] = ItemTotals(item, str(m.get("canonical_task", "unknown")),
                                           tuple(m.get("modality") or ()), str(m.get("duration_bin", "")))
        n = len(reps)
        possible = float(reps[0].scores["possible"])
        tot.possible += possible
        tot.earned += sum(float(r.scores["earned"]) for r in reps) / n
        tot.earned_pen += sum(possible * float(r.scores.get("score_penalized", 0.0)) for r in reps) / n
    return list(items.values())


def _mean_present(stack: np.ndarray) -> np.ndarray:
    """Column means ignoring NaN (an absent task or category); NaN where nothing is present."""
    present = ~np.isnan(stack)
    counts = present.sum(axis=0)
    sums = np.where(present, stack, 0.0).sum(axis=0)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _headline(task_acc: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Category means and the overall mean, vectorised over bootstrap rounds (NaN = absent)."""
    cats: dict[str, np.ndarray] = {}
    for cat, tasks in TASK_CATEGORIES.items():
        present = [task_acc[t] for t in tasks if t in task_acc]
        if present:
            cats[cat] = _mean_present(np.vstack(present))
    if not cats:
        return cats, np.array([np.nan])
    return cats, _mean_present(np.vstack(list(cats.values())))


def _ratio(num: np.ndarray, den: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Accuracy in percent per bootstrap row: 0 where the group is present but has no positive weight
    (released), NaN where a resample drew none of its items (absent: left out of the means)."""
    with np.errstate(all="ignore"):
        acc = np.where(den > 0, 100.0 * num / np.where(den > 0, den, 1.0), 0.0)
    return np.where(present, acc, np.nan)


def _ci(point: float, boots: np.ndarray) -> tuple[float | None, float | None]:
    """The percentile interval of the resamples where the group is present; none for an absent point."""
    if np.isnan(point):
        return None, None
    lo, hi = percentile_interval(boots)
    return (None, None) if np.isnan(lo) else (lo, hi)


def aggregate(records: list[SampleRecord], *, seed: int = 0, rounds: int = BOOTSTRAP_ROUNDS) -> list[Metric]:
    items = item_totals(records)
    out: list[Metric] = []
    n_err = sum(1 for r in records if r.error is not None)
    n_unscored = sum(1 for r in records if r.error is None and r.unscored is not None)
    if items:
        n = len(items)
        # row 0 = the observed data, rows 1.. = bootstrap resamples of items (counts per item; items are
        # the sampling units, each holding its turns with their epochs averaged)
        weights = np.vstack([np.ones(n), resample_counts(n, rounds=rounds, seed=seed, multinomial=True)])
        earned = np.array([i.earned for i in items])
        earned_pen = np.array([i.earned_pen for i in items])
        possible = np.array([i.possible for i in items])

        def group_rows(key: str, groups: dict[str, np.ndarray], with_headline: bool) -> None:
            """Micro accuracy per group; with_headline: the group is a task -> categories, overall."""
            for variant, num in (("", earned), ("_penalized", earned_pen)):
                accs: dict[str, np.ndarray] = {}
                for g, mask in sorted(groups.items()):
                    acc = _ratio(weights[:, mask] @ num[mask], weights[:, mask] @ possible[mask],
                                 weights[:, mask].sum(axis=1) > 0)
                    accs[g] = acc
                    lo, hi = _ci(acc[0], acc[1:])
                    out.append(Metric(f"accuracy{variant}", float(acc[0]), lo, hi, int(mask.sum()), key, g))
                if with_headline:
                    cats, overall = _headline(accs)
                    for cat, acc in cats.items():
                        lo, hi = _ci(acc[0], acc[1:])
                        n_cat = int(sum(groups[t].sum() for t in TASK_CATEGORIES[cat] if t in groups))
                        out.append(Metric(f"accuracy{variant}", float(acc[0]), lo, hi, n_cat, "category", cat))
                    lo, hi = _ci(overall[0], overall[1:])
                    n_all = int(sum(groups[t].sum() for c in cats for t in TASK_CATEGORIES[c] if t in groups))
                    out.append(Metric(f"overall{variant}", float(overall[0]), lo, hi, n_all))

        def masks(key_of: Callable[[ItemTotals], Sequence[str]]) -> dict[str, np.ndarray]:
            found: dict[str, np.ndarray] = {}
            for idx, it in enumerate(items):
                for g in key_of(it):
                    found.setdefault(g, np.zeros(n, bool))[idx] = True
            return found

        group_rows("task", masks(lambda it: [it.task]), with_headline=True)
        group_rows("modality", masks(lambda it: list(it.modalities)), with_headline=False)
        order = {label: k for k, (label, _, _) in enumerate(DURATION_BINS)}
        group_rows("duration", dict(sorted(masks(lambda it: [it.duration_bin] if it.duration_bin else []).items(),
                                           key=lambda kv: order.get(kv[0], 99))), with_headline=False)
        # micro accuracy over all items (not the paper's headline; handy for small subsets)
        for variant, num in (("", earned), ("_penalized", earned_pen)):
            acc = _ratio(weights @ num, weights @ possible, weights.sum(axis=1) > 0)
            lo, hi = _ci(acc[0], acc[1:])
            out.append(Metric(f"micro_accuracy{variant}", float(acc[0]), lo, hi, n))
    # mean of per-turn ratios, the harness's usual per-sample mean
    turn_scores = per_sample_means(records).get("score", {})
    if turn_scores:
        est = mean_ci(list(turn_scores.values()), seed=seed)
        out.append(Metric("turn_score", 100 * est.value, 100 * est.ci_low, 100 * est.ci_high, est.n))
    out.append(Metric("errors", float(n_err), n=len(records)))
    out.append(Metric("unscored", float(n_unscored), n=len(records)))
    out.append(Metric("items", float(len(items)), n=len(items)))
    return out
