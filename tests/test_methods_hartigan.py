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


def _tight_stable(X: np.ndarray, labels: np.ndarray, k: int) -> float:
    """Brute force over every point and every other cluster: the largest objective drop a single
    Hartigan move would give, measured exactly (objective before minus objective after the move)."""
    base = objective(X, labels, k)
    counts = np.bincount(labels, minlength=k)
    best = -np.inf
    for p in range(len(X)):
        if counts[labels[p]] <= 1:
            continue
        for j in range(k):
            if j != labels[p]:
                trial = labels.copy()
                trial[p] = j
                best = max(best, base - objective(X, trial, k))
    return best


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_end_state_is_a_hartigan_local_optimum_by_brute_force(seed):
    # n = 300: every single-point move is tried and its objective recomputed from the partition
    X, _ = make_blobs(300, 3, centers=6, cluster_std=2.0, random_state=seed)
    init, _ = kmeans_plusplus(X, 6, random_state=seed)
    res = batched_hartigan(X, init)
    assert res.converged
    best = _tight_stable(X, res.labels, 6)
    assert best <= 1e-9 * res.objective, f"a single move still lowers the objective by {best}"
    # and from a deliberately bad start (all seeds in one corner) the same holds
    bad = X[np.argsort(X[:, 0])[:6]]
    res = batched_hartigan(X, bad)
    assert res.converged and _tight_stable(X, res.labels, 6) <= 1e-9 * res.objective


def _replay(X, labels, k, moves):
    """Apply moves one at a time; return the objective drop of each (exact recomputation)."""
    labels = labels.copy()
    drops = []
    for p, j in moves:
        before = objective(X, labels, k)
        labels[p] = j
        drops.append(before - objective(X, labels, k))
    return np.asarray(drops)


def _candidates(X, labels, k):
    """Every point's best Hartigan move against the current means, improving ones only."""
    counts = np.bincount(labels, minlength=k).astype(float)
    C = np.stack([X[labels == c].mean(axis=0) for c in range(k)])
    D = ((X[:, None, :] - C[None]) ** 2).sum(-1)
    n_own = counts[labels]
    remove = np.where(n_own > 1, n_own / np.maximum(n_own - 1, 1) * D[np.arange(len(X)), labels], -np.inf)
    add = D * (counts / (counts + 1))[None]
    add[np.arange(len(X)), labels] = np.inf
    dst = add.argmin(axis=1)
    pts = np.flatnonzero(remove - add.min(axis=1) > 0)
    return pts, dst[pts], C, counts


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_parallel_safe_moves_improve_in_any_order_and_any_subset(seed):
    from harness.tasks.methods.backends.hartigan_core import parallel_safe

    X, _ = make_blobs(400, 4, centers=8, cluster_std=3.0, random_state=seed)
    rng = np.random.default_rng(seed)
    init, _ = kmeans_plusplus(X, 8, random_state=seed)
    labels = np.argmin(((X[:, None] - init[None]) ** 2).sum(-1), axis=1)  # nearest seed: many candidates
    pts, dst, C, counts = _candidates(X, labels, 8)
    safe = parallel_safe(X[pts], labels[pts], dst, C, counts, 0.0)
    assert 0 < safe.sum() < len(pts)  # the test separates moves, it neither passes nor rejects all
    moves = list(zip(pts[safe], dst[safe], strict=True))
    for trial in range(5):
        sub = [moves[i] for i in rng.permutation(len(moves))[: rng.integers(1, len(moves) + 1)]]
        assert np.all(_replay(X, labels, 8, sub) > 0), f"a parallel-safe move did not improve (order {trial})"


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_sequential_phase_accepts_exactly_the_moves_that_improve_in_turn(seed):
    from harness.tasks.methods.backends.hartigan_core import sequential_accept

    X, _ = make_blobs(400, 4, centers=8, cluster_std=3.0, random_state=seed)
    init, _ = kmeans_plusplus(X, 8, random_state=seed)
    labels = np.argmin(((X[:, None] - init[None]) ** 2).sum(-1), axis=1)
    pts, dst, C, counts = _candidates(X, labels, 8)
    ok = sequential_accept(X[pts], labels[pts], dst, C, counts, 0.0)
    assert ok.sum() > 0 and not ok.all()  # some candidates interfere: the phase must drop them
    drops = _replay(X, labels, 8, list(zip(pts[ok], dst[ok], strict=True)))
    assert np.all(drops > 0), "an accepted move did not lower the objective in the state it met"


def test_batched_matches_sequential_where_the_optimum_is_unique_enough():
    # on these well-separated data both methods reach the same Hartigan optimum from the same
    # seeds; elsewhere they can stop at different local optima (either may be lower)
    for seed in range(6):
        X, _ = make_blobs(300, 8, centers=10, cluster_std=4.0, random_state=seed)
        init, _ = kmeans_plusplus(X, 10, random_state=seed)
        bat, seq = batched_hartigan(X, init), sequential_hartigan(X, init)
        assert bat.objective <= seq.objective * (1 + 1e-9), f"seed {seed}: {bat.objective} > {seq.objective}"
        assert bat.objective == pytest.approx(seq.objective, rel=1e-9)
        assert bat.parallel_moves + bat.sequential_moves > 0


def test_moves_are_counted_and_both_phases_do_work():
    X, _ = make_blobs(6000, 8, centers=40, cluster_std=6.0, random_state=5)
    init = X[np.random.default_rng(0).choice(len(X), 40, replace=False)]
    res = batched_hartigan(X, init)
    assert res.converged and res.parallel_moves > 0 and res.sequential_moves > 0
    assert res.history[-1] < res.history[0]


def test_start_from_a_given_partition_and_reject_bad_ones():
    """A random partition as the start (Telgarsky and Vattani's comparison): both methods begin from
    exactly that partition's objective, end at a Hartigan optimum below it; bad partitions are refused."""
    X, _ = make_blobs(1500, 6, centers=8, cluster_std=2.0, random_state=4)
    k = 8
    labels = np.random.default_rng(0).integers(k, size=len(X))
    start = objective(X, labels, k)
    for method in (batched_hartigan, sequential_hartigan):
        res = method(X, np.zeros((k, 6)), labels=labels.copy())
        assert res.history[0] == pytest.approx(start, rel=1e-12)
        assert res.objective < 0.5 * start and _hartigan_stable(X, res.labels, k)
    one_empty = labels.copy()
    one_empty[one_empty == 3] = 2
    for bad, msg in [(labels[:-1], "shape"), (labels + 1, r"\[0, 8\)"), (one_empty, "cluster 3")]:
        with pytest.raises(ValueError, match=msg):
            batched_hartigan(X, np.zeros((k, 6)), labels=bad)


def _shared_and_straddling() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Four far-apart blobs and a Hartigan optimum no single move can leave: blob A shared by two
    clusters, blobs C and D merged into one. Returns (X, that partition, the blob partition)."""
    rng = np.random.default_rng(5)
    centres = np.array([[0.0, 0.0], [60.0, 0.0], [0.0, 60.0], [60.0, 60.0]])
    X = np.concatenate([c + rng.normal(size=(200, 2)) for c in centres])
    blobs = np.repeat(np.arange(4), 200)
    bad = blobs.copy()
    bad[:200] = (X[:200, 0] > 0).astype(int)  # blob A split in two clusters, 0 and 1
    bad[200:400] = 2
    bad[400:] = 3  # blobs C and D in one cluster
    return X, bad, blobs


def test_an_escape_leaves_a_local_optimum_no_single_move_can():
    from harness.tasks.methods.backends.hartigan_escape import with_escapes

    X, bad, blobs = _shared_and_straddling()
    stuck = batched_hartigan(X, np.zeros((4, 2)), labels=bad)
    assert _hartigan_stable(X, stuck.labels, 4)
    assert stuck.objective > 50 * objective(X, blobs, 4)  # a far worse optimum than the blobs
    freed = with_escapes(X, stuck, 3)
    assert freed.objective == pytest.approx(objective(X, blobs, 4), rel=1e-9)
    assert _hartigan_stable(X, freed.labels, 4)
    assert freed.history[-1] == pytest.approx(freed.objective) and len(freed.history) > len(stuck.history)
    assert freed.iterations >= stuck.iterations and freed.seconds >= stuck.seconds
    # from the blob partition no escape helps: the partition comes back unchanged
    best = batched_hartigan(X, np.zeros((4, 2)), labels=blobs)
    again = with_escapes(X, best, 3)
    assert np.array_equal(again.labels, best.labels) and again.objective == best.objective
    # two clusters leave nothing to dissolve and split
    two = batched_hartigan(X, X[[0, 700]])
    assert np.array_equal(with_escapes(X, two, 2).labels, two.labels)


def test_escapes_through_the_backend(tmp_path, monkeypatch):
    from harness.modelspec import build_model
    from harness.tasks.methods.clustering import methods_cluster_wine

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    train = list(methods_cluster_wine().train())
    plain = build_model("hartigan:batched", {"progress": False}).fit(train)
    escaped_model = build_model("hartigan:batched", {"progress": False, "escapes": 2})
    escaped = escaped_model.fit(train)
    assert escaped_model.spec == "hartigan:batched?escapes=2" and not escaped["cached"]
    assert escaped["objective"] <= plain["objective"]
    bad = build_model("kmeans:lloyd", {"progress": False, "escapes": 1})
    assert "hartigan:batched only" in bad.fit(train)["error"]
