"""Parity of the LongShOTBench aggregation with the released scorer.

Reference: mbzuai-oryx/LongShOT at commit 48108009c3120f7c8ac095ab5bb3a2e9608a32d7, ``eval/scoring.py``:
``_compute_scores`` (per canonical task, TASK_REMAP applied, ``result.get('task', 'unknown')`` as the
fallback name, obtained / total with 0.0 when the total is 0), ``_compute_breakdown_scores`` (modality
and duration groups) and ``_format_report`` (category = mean of its tasks present, overall = mean of
the categories present). The ``ref_*`` functions re-implement them from reading them; the judged items
are seeded random ones (empty criteria lists, zero and negative weights, penalties, missing ``task``,
tasks outside the canonical 16, items touching several modalities).
"""

from __future__ import annotations

import random

import pytest

from harness.data import DatasetError
from harness.task import SampleRecord
from harness.tasks.longshot import rubric
from harness.tasks.longshot.items import (
    DURATION_BINS,
    MODALITY_GROUPS,
    TASK_CATEGORIES,
    TASK_REMAP,
    item_samples,
    items_samples,
)
from harness.tasks.longshot.scoring import aggregate


# ---- literal re-implementation of the reference -------------------------------------------------
def ref_compute_scores(eval_results: list[dict]) -> tuple[dict[str, float], dict[str, int]]:
    task_performance: dict = {}
    for result in eval_results:
        task_type = TASK_REMAP.get(result.get("task", ""), result.get("task", "unknown"))
        if task_type not in task_performance:
            task_performance[task_type] = {"obtained": 0, "total": 0, "count": 0}
        obtained = 0
        max_score = 0
        for turn in result["conversations"]:
            if turn["role"] == "assistant":
                for criteria in turn["criteria"]:
                    if criteria["criteria_met"] and not criteria["is_penalty"]:
                        obtained += criteria["weight"]
                    if criteria["weight"] > 0:
                        max_score += criteria["weight"]
        task_performance[task_type]["obtained"] += obtained
        task_performance[task_type]["total"] += max_score
        task_performance[task_type]["count"] += 1
    accuracies, counts = {}, {}
    for task, perf in task_performance.items():
        counts[task] = perf["count"]
        accuracies[task] = perf["obtained"] / perf["total"] if perf["total"] > 0 else 0.0
    return accuracies, counts


def ref_breakdown(eval_results: list[dict]) -> tuple[dict[str, float], dict[str, float]]:
    def sample_score(result: dict) -> tuple[float, float]:
        obtained = max_score = 0
        for turn in result["conversations"]:
            if turn["role"] == "assistant":
                for criteria in turn["criteria"]:
                    if criteria["criteria_met"] and not criteria["is_penalty"]:
                        obtained += criteria["weight"]
                    if criteria["weight"] > 0:
                        max_score += criteria["weight"]
        return obtained, max_score

    def sample_modalities(result: dict) -> set[str]:
        raw = {m for turn in result["conversations"] if turn["role"] == "user" for m in turn.get("modalities", [])}
        return {MODALITY_GROUPS.get(m, "visual") for m in raw}

    def bucket_of(duration: float) -> str:
        for label, lo, hi in DURATION_BINS:
            if lo <= duration < hi:
                return label
        return DURATION_BINS[-1][0]

    modality_perf: dict = {}
    duration_perf: dict = {}
    for result in eval_results:
        obtained, max_score = sample_score(result)
        for mod in sample_modalities(result):
            perf = modality_perf.setdefault(mod, {"obtained": 0, "total": 0})
            perf["obtained"] += obtained
            perf["total"] += max_score
        perf = duration_perf.setdefault(bucket_of(result.get("duration", 0)), {"obtained": 0, "total": 0})
        perf["obtained"] += obtained
        perf["total"] += max_score

    def acc(d: dict) -> dict[str, float]:
        return {k: p["obtained"] / p["total"] if p["total"] > 0 else 0.0 for k, p in d.items()}

    return acc(modality_perf), acc(duration_perf)


def ref_headline(accuracies: dict[str, float]) -> tuple[dict[str, float], float | None]:
    category_avgs = {}
    for category, tasks in TASK_CATEGORIES.items():
        cat_accs = [accuracies[t] for t in tasks if t in accuracies]
        if cat_accs:
            category_avgs[category] = sum(cat_accs) / len(cat_accs)
    overall = sum(category_avgs.values()) / len(category_avgs) if category_avgs else None
    return category_avgs, overall


# ---- random judged items -------------------------------------------------------------------------
TASKS = [*TASK_REMAP, *(t for ts in TASK_CATEGORIES.values() for t in ts), "made_up_task", None]
MODALITIES = [*MODALITY_GROUPS, "smell"]


def judged_item(rng: random.Random, i: int) -> dict:
    conv = []
    for _ in range(rng.randint(1, 3)):
        conv.append({"role": "user", "content": "q", "modalities": rng.sample(MODALITIES, rng.randint(0, 3))})
        criteria = []
        for _ in range(rng.choice([0, 1, 3, 5])):
            penalty = rng.random() < 0.25
            weight = rng.choice([0, 1, 2, 3, 5]) * (-1 if penalty and rng.random() < 0.7 else 1)
            criteria.append({"name": f"c{len(criteria)}", "description": "d", "weight": weight,
                             "is_penalty": penalty, "criteria_met": rng.random() < 0.5})
        conv.append({"role": "assistant", "content": "a", "criteria": criteria})
    item = {"sample_id": f"s{i}", "video_id": f"v{i % 7}", "conversations": conv,
            "duration": rng.choice([0, 100, 1799.9, 1800, 2699, 2700, 5000])}
    task = rng.choice(TASKS)
    if task is not None:
        item["task"] = task
    return item


def records_of(item: dict) -> list[SampleRecord]:
    out = []
    for s in item_samples(item, "here"):
        turn = item["conversations"][s.metadata["turn_index"]]
        marks = [rubric.Mark(c["name"], c["description"], float(c["weight"]), c["is_penalty"], c["criteria_met"],
                             None) for c in turn["criteria"]]  # type: ignore[arg-type]
        t = rubric.tally(marks, unmet_on_failure=False)
        values = {"earned": t.earned, "possible": t.possible, "penalty_met": t.penalty_met}
        if t.score is not None:
            values["score"], values["score_penalized"] = t.score, t.score_penalized or 0.0
        out.append(SampleRecord(s.id, 0, values, None, None, s.metadata))
    return out


@pytest.mark.parametrize("case", range(200))
def test_aggregate_equals_the_released_scorer(case: int) -> None:
    rng = random.Random(case)
    items = [judged_item(rng, i) for i in range(rng.randint(1, 25))]
    if case % 9 == 0:  # a canonical task whose items carry no positive weight
        for it in items[: max(1, len(items) // 3)]:
            it["task"] = "summarization"
            for turn in it["conversations"]:
                for c in turn.get("criteria", []):
                    c["weight"] = -abs(c["weight"])
    records = [r for it in items for r in records_of(it)]
    got = {(m.name, m.breakdown_key, m.breakdown_value): m.value for m in aggregate(records, rounds=20)}
    accuracies, _ = ref_compute_scores(items)
    for task, acc in accuracies.items():
        assert got[("accuracy", "task", task)] == pytest.approx(100 * acc, abs=1e-9), task
    cats, overall = ref_headline(accuracies)
    for cat, acc in cats.items():
        assert got[("accuracy", "category", cat)] == pytest.approx(100 * acc, abs=1e-9), cat
    if overall is None:
        assert ("overall", "", "") not in got or got[("overall", "", "")] != got[("overall", "", "")]
    else:
        assert got[("overall", "", "")] == pytest.approx(100 * overall, abs=1e-9)
    modality, duration = ref_breakdown(items)
    for g, acc in modality.items():
        assert got[("accuracy", "modality", g)] == pytest.approx(100 * acc, abs=1e-9), g
    for g, acc in duration.items():
        assert got[("accuracy", "duration", g)] == pytest.approx(100 * acc, abs=1e-9), g
    assert {k[2] for k in got if k[:2] == ("accuracy", "task")} == set(accuracies)


def test_duplicate_sample_ids_are_rejected_at_load() -> None:
    item = judged_item(random.Random(0), 1)
    with pytest.raises(DatasetError, match="duplicate sample_id 's1'") as err:
        items_samples([("a.jsonl:1", item), ("a.jsonl:2", {**item, "task": "summarization"})])
    assert "\n" not in str(err.value) and "a.jsonl:1" in str(err.value)


def test_an_item_without_a_task_is_unknown() -> None:
    item = judged_item(random.Random(0), 1)
    item.pop("task", None)
    assert {s.metadata["canonical_task"] for s in item_samples(item, "here")} == {"unknown"}
