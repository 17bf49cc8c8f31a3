"""Batched Hartigan k-means: objective never increases (every iteration), Hartigan-stable end state,
and the clustering backends/tasks through the runner with a cached fit."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy/torch start their thread pools

import asyncio  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from sklearn.cluster import KMeans, kmeans_plusplus  # noqa: E402
from sklearn.datasets import load_digits, load_iris, make_blobs  # noqa: E402

from harness.runner import EvalConfig, Runner  # noqa: E402
from harness.store.db import open_db  # noqa: E402
from harness.tasks.methods.backends.hartigan_core import batched_hartigan, objective, sequential_hartigan  # noqa: E402
from harness.types import Message, Request  # noqa: E402


def _datasets():
    X1, _ = make_blobs(3000, 8, centers=12, cluster_std=3.0, random_state=1)  # heavily overlapping
    X2 = np.random.default_rng(2).uniform(size=(2000, 5))  # no structure at all: many borderline moves
    return [("blobs", X1, 12), ("uniform", X2, 20), ("digits", load_digits().data.astype(float), 10),
            ("iris", load_iris().data, 3)]


def _hartigan_stable(X: np.ndarray, labels: np.ndarray, k: int) -> bool:
    """Brute force: no single point has a Hartigan move that lowers the objective by more than noise."""
    counts = np.bincount(labels, minlength=k).astype(float)
    C = np.stack([X[labels == c].mean(axis=0) for c in range(k)])
    D = ((X[:, None, :] - C[None]) ** 2).sum(-1)
    own = D[np.arange(len(X)), labels]
    n_own = counts[labels]
    remove = np.where(n_own > 1, n_own / np.maximum(n_own - 1, 1) * own, -np.inf)
    add = D * (counts / (counts + 1))[None]
    add[np.arange(len(X)), labels] = np.inf
    gain = remove - add.min(axis=1)
    return bool(np.all(gain <= 1e-9 * max(objective(X, labels, k), 1.0)))


@pytest.mark.parametrize("name,X,k", _datasets(), ids=[d[0] for d in _datasets()])
@pytest.mark.parametrize("seq_cap", [4096, 16, 0])
def test_batched_objective_never_increases_on_any_iteration(name, X, k, seq_cap):
    init, _ = kmeans_plusplus(X, k, random_state=0)
    seen: list[float] = []

    def check(it: int, obj: float, par: int, seq: int) -> None:
        # recomputed independently here, not trusted from the history
        seen.append(obj)
        if seq_cap == 0:
            assert seq == 0  # only triangle-safe parallel moves were applied this iteration

    res = batched_hartigan(X, init, seq_cap=seq_cap, on_iteration=check)
    h = np.asarray(res.history)
    assert len(h) == res.iterations + 1 and len(seen) == res.iterations
    tol = 1e-12 * h[0]
    assert np.all(np.diff(h) <= tol), f"objective rose on {name}: {np.diff(h).max()}"
    assert abs(h[-1] - objective(X, res.labels, k)) <= tol
    assert np.bincount(res.labels, minlength=k).min() >= 1  # Hartigan never empties a cluster
    if seq_cap > 0:
        assert res.converged and _hartigan_stable(X, res.labels, k)


def test_parallel_safe_moves_alone_lower_the_objective():
    X, _ = make_blobs(4000, 6, centers=8, cluster_std=2.5, random_state=3)
    init, _ = kmeans_plusplus(X, 8, random_state=1)
    res = batched_hartigan(X, init, seq_cap=0)
    assert res.parallel_moves > 50 and res.sequential_moves == 0
    assert res.history[-1] < res.history[0]


def test_sequential_reference_reaches_a_hartigan_optimum_too():
    X, _ = make_blobs(600, 4, centers=6, cluster_std=2.5, random_state=4)
    init, _ = kmeans_plusplus(X, 6, random_state=0)
    seq = sequential_hartigan(X, init)
    bat = batched_hartigan(X, init)
    assert np.all(np.diff(seq.history) <= 1e-12 * seq.history[0])
    assert _hartigan_stable(X, seq.labels, 6) and _hartigan_stable(X, bat.labels, 6)


def test_hartigan_from_lloyds_optimum_never_does_worse_and_often_better():
    gains = []
    for seed in range(3):
        X, _ = make_blobs(3000, 8, centers=16, cluster_std=3.0, random_state=seed)
        init, _ = kmeans_plusplus(X, 16, random_state=seed)
        km = KMeans(16, init=init, n_init=1, algorithm="lloyd").fit(X)
        lloyd = objective(X, km.labels_, 16)
        res = batched_hartigan(X, km.cluster_centers_)
        assert res.objective <= lloyd * (1 + 1e-12)
        gains.append(lloyd - res.objective)
    assert max(gains) > 0  # Lloyd fixed points are not Hartigan-stable in general


def test_iris_run_through_the_runner_and_fit_cache(sqlite_url, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    sessions = open_db(sqlite_url)
    summary = Runner(EvalConfig(task="methods_cluster_iris", model="hartigan:batched", progress=False),
                     session_factory=sessions).run()
    m = {x.name: x for x in summary.metrics if not x.breakdown_key}
    assert summary.n_new == 150 and summary.n_errors == 0
    assert m["objective"].value == pytest.approx(78.851, abs=1e-2)  # the known k=3 optimum of iris
    assert 0.6 < m["ari"].value < 0.8 and m["ari"].ci_low < m["ari"].value < m["ari"].ci_high
    assert m["iterations"].value >= 1 and m["seconds"].value > 0
    assert list((tmp_path / "cache" / "fits").glob("hartigan-*.pkl"))

    from harness.modelspec import build_model
    from harness.tasks.methods.clustering import methods_cluster_iris

    task = methods_cluster_iris()
    model = build_model("hartigan:batched", {"progress": False})
    record = model.fit(list(task.train()))
    assert record["cached"] is True and record["objective"] == pytest.approx(78.851, abs=1e-2)


def test_baseline_backends_and_bad_input():
    from harness.modelspec import build_model
    from harness.tasks.methods.clustering import methods_cluster_wine

    task = methods_cluster_wine()
    train = list(task.train())
    objs = {}
    for spec in ("kmeans:lloyd", "kmeans:elkan", "hartigan:batched"):
        model = build_model(spec, {"progress": False, "cache": False})
        objs[spec] = model.fit(train)["objective"]
        outs = asyncio.run(model.generate([task.prompt(s) for s in train[:5]]
                                          + [Request([Message.text("user", "no numbers here")])]))
        assert all(isinstance(o.prediction, int) for o in outs[:5])
        assert outs[5].error and "feature" in outs[5].error
    assert objs["kmeans:lloyd"] == pytest.approx(objs["kmeans:elkan"], rel=1e-6)
    assert objs["hartigan:batched"] <= objs["kmeans:lloyd"] * (1 + 1e-9)
    with pytest.raises(ValueError, match="choose one of"):
        build_model("hartigan:nope")


def test_fit_failure_is_recorded_per_sample_not_fatal(sqlite_url, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    sessions = open_db(sqlite_url)
    # k larger than the data: the fit fails, every sample records the one-line reason, the run ends
    # (not fatal) and, since nothing was measured, its status says failed
    summary = Runner(EvalConfig(task="methods_cluster_iris", model="hartigan:batched",
                                model_settings={"k": 500, "progress": False}, progress=False),
                     session_factory=sessions).run()
    assert summary.status == "failed" and summary.n_errors == 150
