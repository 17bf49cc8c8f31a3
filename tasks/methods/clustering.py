"""Clustering tasks for k-means-type methods (Batched Hartigan and the scikit-learn baselines).

Data: scikit-learn's bundled iris (k=3), wine (k=3), digits (k=10), raw features, and synthetic
Gaussian blobs (``make_blobs``). The train split is the whole set (clustering is unsupervised; the
backends ignore the labels) and every point is a test item whose answer is its cluster id.

Metrics (whole-partition, in the aggregate): ``objective`` (k-means inertia of the returned
partition, each cluster at its mean, computed here from the features rather than trusted from the
backend), ``ari`` and ``nmi`` against the true classes (with a 95% bootstrap interval over points,
200 resamples), and the backend's fit usage ``seconds`` and ``iterations`` (from
``details["fit"]``). A reply that is no cluster number is unscored.
"""

from __future__ import annotations

import re

from harness.registry import task
from harness.task import SampleRecord, ScoreContext, Task
from harness.tasks.methods.data import Table, blobs, load_table, to_sample
from harness.types import GenerationConfig, Metric, Output, Request, Sample, Score, higher, lower, neutral, stable_hash

_INT = re.compile(r"-?\d+")
BOOTSTRAP = 200
K_OF = {"iris": 3, "wine": 3, "digits": 10}


def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    pred = output.prediction
    if not isinstance(pred, int):
        found = _INT.findall(output.text or "")
        if not found:
            return Score.not_scored("no cluster number in the reply")
        pred = int(found[-1])
    return Score(values={}, answer=str(pred), details={"cluster": int(pred), "label": int(sample.target)})


def partition_objective(X: object, labels: object) -> float:
    import numpy as np

    X, labels = np.asarray(X, dtype=np.float64), np.asarray(labels)
    total = 0.0
    for c in np.unique(labels):
        pts = X[labels == c]
        total += float(((pts - pts.mean(axis=0)) ** 2).sum())
    return total


def cluster_metrics(records: list[SampleRecord], seed: int = 0) -> list[Metric]:
    import numpy as np
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    from harness.stats import bootstrap_cis

    ok = [r for r in records if r.error is None and r.unscored is None and "cluster" in r.details]
    out = [Metric("errors", float(sum(r.error is not None for r in records)), n=len(records)),
           Metric("unscored", float(sum(r.error is None and r.unscored is not None for r in records)),
                  n=len(records))]
    if not ok:
        return out
    ok.sort(key=lambda r: (r.sample_id, r.epoch))
    pred = np.array([r.details["cluster"] for r in ok])
    true = np.array([r.details["label"] for r in ok])
    n = len(ok)
    # points are the sampling units: a resample is (label, cluster) pairs drawn together
    scores = {"ari": adjusted_rand_score, "nmi": normalized_mutual_info_score}
    est = bootstrap_cis(np.column_stack([true, pred]),
                        lambda pts: {name: float(fn(pts[:, 0], pts[:, 1])) for name, fn in scores.items()},
                        seed=seed, rounds=BOOTSTRAP)
    for name, e in est.items():
        out.append(Metric(name, e.value, e.ci_low, e.ci_high, n))
    X = [r.metadata.get("x") for r in ok]
    if all(x is not None for x in X):
        out.append(Metric("objective", partition_objective(X, pred), n=n))
    fit = next((r.details.get("fit") for r in ok if r.details.get("fit")), None)
    if fit:
        for key in ("seconds", "iterations"):
            if fit.get(key) is not None:
                out.append(Metric(key, float(fit[key]), n=1))
    out.append(Metric("clusters_used", float(len(np.unique(pred))), n=n))
    return out


def make_task(name: str, table_fn: object, k: int, content: dict, description: str) -> Task:
    cache: dict[str, list[Sample]] = {}

    def load() -> list[Sample]:
        if "s" not in cache:
            table: Table = table_fn()  # type: ignore[operator]
            instr = f"Assign this point to one of {k} clusters; reply with the cluster number."
            cache["s"] = [to_sample(table, i, f"{table.name}-", instr,
                                    {"n_clusters": k, "x": [float(v) for v in table.X[i]]})
                          for i in range(len(table.y))]
        return cache["s"]

    def prompt(sample: Sample) -> Request:
        return Request(sample.messages, GenerationConfig(temperature=0.0, max_tokens=8))

    import sklearn

    return Task(name=name, version="1", load=load, prompt=prompt, score=score, description=description,
                metrics={"objective": lower("k-means objective (inertia)"), "ari": higher("adjusted Rand index"),
                         "nmi": higher("normalised mutual information"), "seconds": lower("fit seconds"),
                         "iterations": neutral("iterations"), "clusters_used": neutral("clusters used")},
                family="methods", primary_metric="objective", aggregate=lambda recs: cluster_metrics(recs),
                train=load, content_hash=stable_hash({**content, "sklearn": sklearn.__version__, "v": 1}),
                options=content)


def _bundled(name: str) -> Task:
    return make_task(f"methods_cluster_{name}", lambda: load_table(name), K_OF[name], {"data": name},
                     f"k-means on scikit-learn {name} (k={K_OF[name]}): objective, ARI, NMI, seconds, iterations")


@task("methods_cluster_iris", description="k-means on iris (k=3): objective, ARI, NMI, seconds, iterations",
      family="methods")
def methods_cluster_iris() -> Task:
    return _bundled("iris")


@task("methods_cluster_wine", description="k-means on wine (k=3): objective, ARI, NMI, seconds, iterations",
      family="methods")
def methods_cluster_wine() -> Task:
    return _bundled("wine")


@task("methods_cluster_digits", description="k-means on digits (k=10): objective, ARI, NMI, seconds, iterations",
      family="methods")
def methods_cluster_digits() -> Task:
    return _bundled("digits")


@task("methods_cluster_blobs", description="k-means on synthetic Gaussian blobs (-T n= d= k= std= seed=)",
      family="methods")
def methods_cluster_blobs(n: int = 2000, d: int = 8, k: int = 8, std: float = 2.0, seed: int = 0) -> Task:
    return make_task("methods_cluster_blobs", lambda: blobs(n, d, k, std, seed), k,
                     {"data": "blobs", "n": n, "d": d, "k": k, "std": std, "seed": seed},
                     f"k-means on make_blobs({n}x{d}, {k} centres, std {std}, seed {seed})")
