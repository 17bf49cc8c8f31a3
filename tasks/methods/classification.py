"""Image/tabular classification for binary-network methods (HTAF, ICBM and their baselines).

Data: scikit-learn's bundled digits (8x8 images), breast_cancer and wine, split once with a
stratified ``train_test_split(test_size=0.25, random_state=split_seed)`` (digits: 1347 / 450, the
split of the reference runs quoted in the family README).

Per sample (a backend answers with one prediction per trained seed, see backends/htaf.py):
``soft_accuracy`` (surrogate activations), ``hard_accuracy`` (every binary unit thresholded),
``gap`` = soft - hard, ``concept_sparsity`` = fraction of the last binary layer's units that are
off, each averaged over seeds. The aggregate adds per-seed rows (breakdown ``seed``) and the
across-seed mean with a Student-t 95% interval (``*_over_seeds``) beside the usual bootstrap over
samples. A plain text model's reply is read as one class (soft = hard, no sparsity).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict

from harness.registry import task
from harness.task import SampleRecord, ScoreContext, Task
from harness.tasks.methods.data import load_table, to_sample
from harness.types import GenerationConfig, Metric, Output, Request, Sample, Score, higher, lower, neutral, stable_hash

_INT = re.compile(r"-?\d+")
DATASETS = {"digits": "handwritten digits, 8x8 grey images (0-16)", "breast_cancer": "breast cancer (Wisconsin)",
            "wine": "wine cultivars"}


def _split(name: str, split_seed: int, train_limit: int | None, test_limit: int | None
           ) -> tuple[list[Sample], list[Sample]]:
    from sklearn.model_selection import train_test_split

    table = load_table(name)
    idx = list(range(len(table.y)))
    tr, te = train_test_split(idx, test_size=0.25, random_state=split_seed, stratify=table.y)
    n_classes = int(table.y.max()) + 1
    instr = f"Classify this {DATASETS[name]} item; reply with the class number (0-{n_classes - 1})."
    meta = {"n_classes": n_classes}
    train = [to_sample(table, i, f"{name}-", instr, meta) for i in sorted(tr)[:train_limit]]
    test = [to_sample(table, i, f"{name}-", instr, meta) for i in sorted(te)[:test_limit]]
    return train, test


def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    pred = output.prediction
    if isinstance(pred, dict) and "hard" in pred:
        soft, hard = [int(c) for c in pred["soft"]], [int(c) for c in pred["hard"]]
        active = [float(a) for a in pred.get("active_fraction", [])]
    else:
        found = _INT.findall(output.text or "")
        if not found:
            return Score.not_scored("no class number in the reply")
        soft = hard = [int(found[-1])]
        active = []
    y = int(sample.target)
    soft_ok = [float(c == y) for c in soft]
    hard_ok = [float(c == y) for c in hard]
    values = {"soft_accuracy": sum(soft_ok) / len(soft_ok), "hard_accuracy": sum(hard_ok) / len(hard_ok)}
    values["gap"] = values["soft_accuracy"] - values["hard_accuracy"]
    if active:
        values["concept_sparsity"] = 1.0 - sum(active) / len(active)
    return Score(values=values, answer=str(hard[0]),
                 details={"soft_by_seed": soft_ok, "hard_by_seed": hard_ok, "active_by_seed": active})


def t_interval(values: list[float]) -> tuple[float, float, float]:
    from scipy import stats

    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def seed_metrics(records: list[SampleRecord]) -> list[Metric]:
    """Per-seed accuracies (breakdown ``seed``) and their across-seed mean with a t interval."""
    per_seed: dict[str, dict[int, list[float]]] = {"soft_accuracy": defaultdict(list),
                                                   "hard_accuracy": defaultdict(list),
                                                   "concept_sparsity": defaultdict(list)}
    for r in records:
        if r.error is not None or r.unscored is not None:
            continue
        for name, key in (("soft_accuracy", "soft_by_seed"), ("hard_accuracy", "hard_by_seed"),
                          ("concept_sparsity", "active_by_seed")):
            for seed, v in enumerate(r.details.get(key) or []):
                per_seed[name][seed].append(1.0 - v if name == "concept_sparsity" else v)
    out: list[Metric] = []
    seed_means: dict[str, list[float]] = {}
    for name, by_seed in per_seed.items():
        means = [sum(v) / len(v) for _, v in sorted(by_seed.items())]
        seed_means[name] = means
        for seed, v in sorted(by_seed.items()):
            out.append(Metric(name, sum(v) / len(v), n=len(v), breakdown_key="seed", breakdown_value=str(seed)))
    if seed_means.get("soft_accuracy") and len(seed_means["soft_accuracy"]) == len(seed_means["hard_accuracy"]):
        seed_means["gap"] = [s - h for s, h in zip(seed_means["soft_accuracy"], seed_means["hard_accuracy"],
                                                    strict=True)]
    for name, means in seed_means.items():
        if means:
            m, lo, hi = t_interval(means)
            # few seeds give wide t intervals; clip them to the metric's range (a choice, not a formula)
            floor = -1.0 if name == "gap" else 0.0
            out.append(Metric(f"{name}_over_seeds", m, max(lo, floor), min(hi, 1.0), n=len(means)))
    return out


def make_task(name: str, split_seed: int = 0, train_limit: int | None = None, test_limit: int | None = None) -> Task:
    cache: dict[str, tuple[list[Sample], list[Sample]]] = {}

    def split() -> tuple[list[Sample], list[Sample]]:
        if "s" not in cache:
            cache["s"] = _split(name, split_seed, train_limit, test_limit)
        return cache["s"]

    def prompt(sample: Sample) -> Request:
        return Request(sample.messages, GenerationConfig(temperature=0.0, max_tokens=8))

    def aggregate(records: list[SampleRecord]) -> list[Metric]:
        from harness.aggregate import default_aggregate  # numpy: only when aggregating

        return default_aggregate(t, records) + seed_metrics(records)

    import sklearn

    t = Task(
        metrics={
            **{f"{m}{s}": higher(f"{m.replace('_', ' ')}{' (mean over seeds)' if s else ''}")
               for m in ("soft_accuracy", "hard_accuracy") for s in ("", "_over_seeds")},
            "gap": lower("soft - hard accuracy", "fraction"),
            "gap_over_seeds": lower("gap (mean over seeds)", "fraction"),
            "concept_sparsity": neutral("inactive concepts", "fraction"),
            "concept_sparsity_over_seeds": neutral("inactive concepts (mean over seeds)", "fraction"),
        },
        name=f"methods_{name}", version="1", load=lambda: split()[1], prompt=prompt, score=score,
        description=f"{DATASETS[name]}: soft/hard accuracy of binary networks, gap, concept sparsity",
        family="methods", modalities=frozenset({"text"}), primary_metric="hard_accuracy",
        aggregate=aggregate, train=lambda: split()[0],
        content_hash=stable_hash({"data": name, "sklearn": sklearn.__version__, "split_seed": split_seed,
                                  "train_limit": train_limit, "test_limit": test_limit, "v": 1}),
        options={"split_seed": split_seed, "train_limit": train_limit, "test_limit": test_limit},
    )
    return t


@task("methods_digits", description="scikit-learn digits 8x8 (1347/450): binary-network soft/hard accuracy, gap, "
      "concept sparsity", family="methods")
def methods_digits(split_seed: int = 0, train_limit: int | None = None, test_limit: int | None = None) -> Task:
    return make_task("digits", split_seed, train_limit, test_limit)


@task("methods_breast_cancer", description="scikit-learn breast_cancer (426/143): binary-network soft/hard accuracy",
      family="methods")
def methods_breast_cancer(split_seed: int = 0, train_limit: int | None = None, test_limit: int | None = None) -> Task:
    return make_task("breast_cancer", split_seed, train_limit, test_limit)


@task("methods_wine", description="scikit-learn wine (133/45): binary-network soft/hard accuracy", family="methods")
def methods_wine(split_seed: int = 0, train_limit: int | None = None, test_limit: int | None = None) -> Task:
    return make_task("wine", split_seed, train_limit, test_limit)
