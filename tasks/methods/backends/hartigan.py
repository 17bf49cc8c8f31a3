"""Clustering backends: ``hartigan:batched`` / ``hartigan:sequential`` and scikit-learn baselines
``kmeans:lloyd`` / ``kmeans:elkan``, all fit-then-predict models.

``fit(train)`` clusters the train split's feature vectors (labels are ignored) from k-means++ seeds
drawn by scikit-learn's ``kmeans_plusplus`` with ``random_state=seed``, the same seeds for every
backend, so objective differences come from the algorithm alone. A test request whose sample id and
features match a train point gets that point's cluster (a Hartigan partition is not always the
nearest-centroid one); any other point gets its nearest centroid.

Settings (``-M``): ``k`` (default: the train samples' ``metadata["n_clusters"]``), ``seed`` (0),
``max_iter`` (1000 for Hartigan iterations, 300 for Lloyd/Elkan), ``seq_cap`` (no cap: how many
moves that are not parallel-safe the vectorised sequential phase considers per iteration; 0 applies
parallel-safe moves only), ``escapes`` (0: how many dissolve-and-split escapes from the local
optimum batched Hartigan tries, each kept only if it lowers the objective; see ``hartigan_escape``),
``progress`` (true), ``cache`` (true: reuse a cached fit).

Each output's ``details["fit"]`` records the fit: objective, iterations, seconds (of the original
fit, also when it came from the cache), parallel/sequential move counts, whether it converged and
whether it was cached; ``usage.seconds`` is the prediction time of the batch split over its requests.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness import fit_cache
from harness.backend_settings import NonNegativeInt, PositiveInt, Setting
from harness.model import Backend
from harness.modelspec import validate_settings
from harness.registry import model
from harness.tasks.methods.backends.common import (
    FITS,
    FeatureError,
    TrainProgress,
    features_of,
    method_spec,
    not_fitted,
    train_arrays,
    with_usage,
)
from harness.types import Output, Request, Sample

ALGORITHMS = {"hartigan": ("batched", "sequential"), "kmeans": ("lloyd", "elkan")}
# hartigan and kmeans take the same keys (escapes is refused at fit time on all but hartigan:batched)
SETTINGS = {
    "k": Setting(PositiveInt | None, None, "clusters (default: the train samples' metadata['n_clusters'])"),
    "seed": Setting(int, 0, "k-means++ seeding (the same seeds for every backend)"),
    "max_iter": Setting(PositiveInt | None, None, "iterations (default: 1000 for Hartigan, 300 for Lloyd/Elkan)"),
    "seq_cap": Setting(NonNegativeInt | None, None, "non-parallel-safe moves the sequential phase considers per "
                       "iteration (default: no cap; 0: parallel-safe moves only)"),
    "escapes": Setting(NonNegativeInt, 0, "hartigan:batched: dissolve-and-split escapes from the local optimum"),
    "progress": Setting(bool, True, "show a progress bar on a terminal"),
    "cache": Setting(bool, True, "reuse a cached fit"),
}


def kmeanspp_seeds(X: Any, k: int, seed: int) -> Any:
    from sklearn.cluster import kmeans_plusplus

    centers, _ = kmeans_plusplus(X, k, random_state=seed)
    return centers


def run_clustering(family: str, variant: str, X: Any, k: int, seed: int, *, max_iter: int | None = None,
                   seq_cap: int | None = None, escapes: int = 0, progress: TrainProgress | None = None,
                   track_objective: bool = True) -> dict[str, Any]:
    """Cluster X with one algorithm from shared k-means++ seeds; returns the fit record + state."""
    import numpy as np

    from harness.tasks.methods.backends.hartigan_core import batched_hartigan, objective, sequential_hartigan

    init = kmeanspp_seeds(X, k, seed)
    t0 = time.perf_counter()
    record: dict[str, Any] = {"method": f"{family}:{variant}", "k": k, "seed": seed}

    def tick(it: int, obj: float, par: int, seq: int) -> None:
        if progress is not None:
            progress.advance(f"objective {obj:.6g} · {par} parallel, {seq} sequential")

    if family == "hartigan":
        if variant == "batched":
            res = batched_hartigan(X, init, max_iter=max_iter or 1000, seq_cap=seq_cap, on_iteration=tick,
                                   track_objective=track_objective)
            if escapes:
                from harness.tasks.methods.backends.hartigan_escape import with_escapes

                res = with_escapes(X, res, escapes, max_iter=max_iter or 1000, seq_cap=seq_cap)
        else:
            res = sequential_hartigan(X, init, max_sweeps=max_iter or 100, on_iteration=tick)
        labels, centers = res.labels, res.centers
        record.update(iterations=res.iterations, parallel_moves=res.parallel_moves,
                      sequential_moves=res.sequential_moves, converged=res.converged, history=res.history)
    else:
        from sklearn.cluster import KMeans

        km = KMeans(k, init=init, n_init=1, algorithm=variant, max_iter=max_iter or 300, random_state=seed).fit(X)
        labels, centers = km.labels_.astype(np.int64), km.cluster_centers_
        record.update(iterations=int(km.n_iter_), converged=bool(km.n_iter_ < (max_iter or 300)))
    record["seconds"] = time.perf_counter() - t0
    record["objective"] = objective(X, labels, k)
    return {"record": record, "labels": np.asarray(labels, dtype=np.int64), "centers": np.asarray(centers)}


@dataclass
class ClusteringModel(Backend):
    family: str
    variant: str
    settings: dict[str, Any] = field(default_factory=dict)
    spec: str = ""
    batch_size: int = 4096
    cacheable: bool = False  # predictions are instant; the fit has its own cache
    state: dict[str, Any] | None = None
    fit_error: str | None = None
    by_id: dict[str, tuple[int, Any]] = field(default_factory=dict)

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        """Fit (or load the cached fit); bad data or settings become a per-sample error, not a crash."""
        try:
            return self._fit(train)
        except (FeatureError, ValueError) as exc:
            self.state, self.fit_error = None, f"fit failed: {exc}"
            return {"error": self.fit_error}

    def _fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        X, _ = train_arrays(train, labelled=False)
        k = self.settings.get("k") or next((s.metadata.get("n_clusters") for s in train
                                             if s.metadata.get("n_clusters")), None)
        if not k:
            raise ValueError(f"{self.spec}: give -M k=N (train samples carry no metadata['n_clusters'])")
        k, seed = int(k), self.settings.get("seed", 0)
        cap = self.settings.get("seq_cap")
        escapes = self.settings.get("escapes", 0)
        if escapes and (self.family, self.variant) != ("hartigan", "batched"):
            raise ValueError(f"{self.spec}: escapes=N (N >= 0) is a setting of hartigan:batched only")
        config = {"k": k, "seed": seed, "max_iter": self.settings.get("max_iter"),
                  "seq_cap": cap, "v": 2}  # v2: blocked safe test + vectorised phase
        if escapes:
            config["escapes"] = escapes  # only when set: fits cached without escapes keep their keys
        key = fit_cache.fit_key(backend=f"{self.family}:{self.variant}", settings=config,
                                task_hash=fit_cache.samples_hash(train), train=fit_cache.digest_arrays(X), seed=seed)

        def usable(state: dict[str, Any]) -> dict[str, Any]:
            return _usable_fit(state, X.shape, k)

        state = fit_cache.load(key, kind=self.family, folder=FITS, restore=usable) if self.settings.get(
            "cache", True) else None
        cached = state is not None
        if state is None:
            total = config["max_iter"] or (1000 if self.family == "hartigan" else None)
            bar = TrainProgress(f"fit {self.spec}", total if self.family == "hartigan" else None,
                                bool(self.settings.get("progress", True)))
            with bar.running():
                state = run_clustering(self.family, self.variant, X, k, seed, max_iter=config["max_iter"],
                                       seq_cap=config["seq_cap"], escapes=escapes, progress=bar)
            fit_cache.save(key, state, kind=self.family, folder=FITS)
        state["record"] = {**state["record"], "cached": cached}
        self.state = state
        self.by_id = {s.id: (int(lab), X[i]) for i, (s, lab) in enumerate(zip(train, state["labels"], strict=True))}
        return state["record"]

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        import numpy as np

        if self.state is None:
            return not_fitted(self.spec, self.fit_error, len(requests))
        t0 = time.perf_counter()
        centers = self.state["centers"]
        fit = {k: v for k, v in self.state["record"].items() if k != "history"}
        outs: list[Output] = []
        for r in requests:
            try:
                x = np.asarray(features_of(r.messages))
            except FeatureError as exc:
                outs.append(Output(error=str(exc)))
                continue
            if x.shape[0] != centers.shape[1]:
                outs.append(Output(error=f"feature vector has {x.shape[0]} values, the fit has {centers.shape[1]}"))
                continue
            known = self.by_id.get(r.sample_id)
            if known is not None and np.array_equal(known[1], x):
                label, how = known[0], "fitted"
            else:
                label, how = int(np.argmin(((centers - x) ** 2).sum(axis=1))), "nearest"
            outs.append(Output(text=str(label), prediction=label, details={"fit": fit, "assigned": how}))
        return with_usage(outs, t0)


def _usable_fit(state: dict[str, Any], shape: tuple[int, int], k: int) -> dict[str, Any]:
    """The cached ``state`` if it is a clustering of these ``shape`` points into ``k`` clusters; raises
    (KeyError, ValueError) otherwise, which is a cache miss."""
    import numpy as np

    labels, centers = state["labels"], state["centers"]
    if not isinstance(state["record"], dict):
        raise ValueError("the record is not a dict")
    if not (isinstance(labels, np.ndarray) and labels.shape == (shape[0],) and labels.dtype.kind in "iu"):
        raise ValueError(f"labels must be {shape[0]} integers")
    if not (isinstance(centers, np.ndarray) and centers.shape == (k, shape[1]) and centers.dtype.kind == "f"):
        raise ValueError(f"centers must be a {k}x{shape[1]} float array")
    return state


def _build(family: str, path: str | None, settings: dict[str, Any]) -> ClusteringModel:
    variant = path or ALGORITHMS[family][0]
    if variant not in ALGORITHMS[family]:
        raise ValueError(f"unknown {family} variant {variant!r}; choose one of {', '.join(ALGORITHMS[family])}")
    settings = validate_settings(family, settings, SETTINGS)  # a factory called directly is checked too
    spec = method_spec(family, variant, settings, ("k", "seed", "max_iter", "seq_cap", "escapes"))
    return ClusteringModel(family, variant, dict(settings), spec)


@model("hartigan", kind="method", settings=SETTINGS, strict=True,
       description="Hartigan k-means fitted on the train split: hartigan:batched | hartigan:sequential")
def hartigan(path: str | None, **settings: Any) -> ClusteringModel:
    return _build("hartigan", path, settings)


@model("kmeans", kind="method", settings=SETTINGS, strict=True,
       description="scikit-learn KMeans baseline fitted on the train split: kmeans:lloyd | kmeans:elkan")
def kmeans(path: str | None, **settings: Any) -> ClusteringModel:
    return _build("kmeans", path, settings)
