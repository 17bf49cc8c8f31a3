"""Binary-network backends trained on the task's train split: ``htaf:ARCH`` and the baselines
``relu:ARCH``, ``sigmoid:ARCH`` (steep sigmoid) and ``ste:ARCH`` (straight-through Heaviside), with
ARCH one of ``mlp`` | ``heaviside`` | ``icbm`` (see ``htaf_core``) | ``snn`` | ``bnn`` (spiking and
binary-weight networks, see ``htaf_snn``; ReLU is no surrogate of a step, so ``relu:snn|bnn`` is refused).

Settings (``-M``): ``hidden`` (128), ``depth`` (heaviside layers, 4), ``concepts`` (icbm, 32),
``alpha`` (HTAF steepness, 8), ``alpha_end`` (anneal alpha linearly to this), ``beta`` (steep-sigmoid
slope, 8), ``epochs`` (100), ``lr`` (3e-3), ``batch`` (64), ``seeds`` (3 networks, seeds 0..S-1),
``norm`` (false: BatchNorm before each binary unit of mlp/heaviside), ``steps`` (snn: 8 time steps),
``decay`` (snn: membrane leak, 0.9), ``threshold`` (snn: 1.0), ``progress`` (true), ``cache`` (true). A
setting of another architecture (``steps`` on mlp, ``norm`` on snn/bnn, which fix their own) is refused.

Every request is answered by all seeds' networks: ``prediction`` holds per-seed ``soft`` classes
(trained surrogate; snn/bnn: each step's surrogate value), ``hard`` classes (all binary units
thresholded at 0) and, for seed 0, the ``concepts`` (indices of the last binary layer's units that
fired) and ``active`` (their count);
``text`` is seed 0's hard class. ``details["fit"]`` records the training usage (seconds, epochs,
seeds, final train loss, non-finite steps, cached); ``usage.seconds`` is the batch's prediction time
split over its requests. The fitted weights are cached by ``harness.fit_cache`` (key: the backend, its
training config, the train samples' content and arrays; the seeds are the config's ``seeds``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from harness import fit_cache
from harness.backend_settings import PositiveInt, Setting
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

ACTS = ("htaf", "relu", "sigmoid", "ste")
ARCH_NAMES = ("mlp", "heaviside", "icbm", "snn", "bnn")
STEP_ARCHS = ("snn", "bnn")  # trained as steps with a surrogate gradient: relu has no step to stand in for
PositiveFloat = Annotated[float, Field(gt=0)]
# the training keys' defaults are htaf_core.TrainConfig's (not read from it: that module imports torch)
SETTINGS = {
    "hidden": Setting(PositiveInt, 128, "units per hidden layer"),
    "depth": Setting(PositiveInt, 4, "binary hidden layers of heaviside (the other architectures have 1)"),
    "concepts": Setting(PositiveInt, 32, "icbm: concept units"),
    "alpha": Setting(PositiveFloat, 8.0, "HTAF steepness"),
    "alpha_end": Setting(PositiveFloat | None, None, "anneal alpha linearly to this over the epochs (none: fixed)"),
    "beta": Setting(PositiveFloat, 8.0, "steep-sigmoid slope"),
    "epochs": Setting(PositiveInt, 100, "training epochs"),
    "lr": Setting(PositiveFloat, 3e-3, "learning rate"),
    "batch": Setting(PositiveInt, 64, "batch size"),
    "seeds": Setting(PositiveInt, 3, "networks trained, seeds 0..S-1"),
    "norm": Setting(bool, False, "BatchNorm before each binary unit of mlp/heaviside"),
    "steps": Setting(PositiveInt, 8, "snn: time steps the network is unrolled over"),
    "decay": Setting(Annotated[float, Field(ge=0, le=1)], 0.9, "snn: membrane leak per step (snnTorch's beta)"),
    "threshold": Setting(PositiveFloat, 1.0, "snn: firing threshold (reset subtracts it)"),
    "progress": Setting(bool, True, "show a training progress bar on a terminal"),
    "cache": Setting(bool, True, "reuse a cached fit"),
}
# what goes into TrainConfig (and so into the spec and the fit cache key)
_TRAIN = ("hidden", "depth", "concepts", "alpha", "alpha_end", "beta", "epochs", "lr", "batch", "seeds", "norm",
          "steps", "decay", "threshold")
# settings only one architecture reads; given to another they are refused rather than ignored
_SNN_ONLY = ("steps", "decay", "threshold")


def image_shape_of(sample: Sample) -> tuple[int, int] | None:
    for m in sample.messages:
        for p in m.content:
            shape = p.options.get("shape") if p.options else None
            if shape:
                return int(shape[0]), int(shape[1])
    return None


@dataclass
class BinaryNetModel(Backend):
    act: str
    arch: str
    settings: dict[str, Any] = field(default_factory=dict)
    spec: str = ""
    batch_size: int = 4096
    cacheable: bool = False  # the weights have their own cache; predictions are instant
    modalities: frozenset[str] = frozenset({"text", "image"})
    state: dict[str, Any] | None = None
    fit_error: str | None = None

    def config(self) -> Any:
        from harness.tasks.methods.backends.htaf_core import TrainConfig

        kw: dict[str, Any] = {"arch": self.arch, "act": self.act}
        if self.arch == "heaviside":
            kw["depth"] = SETTINGS["depth"].default
        kw.update({k: self.settings[k] for k in _TRAIN if self.settings.get(k) is not None})
        return TrainConfig(**kw)

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        """Fit (or load the cached fit); bad data or settings become a per-sample error, not a crash."""
        try:
            return self._fit(train)
        except (FeatureError, ValueError) as exc:
            self.state, self.fit_error = None, f"fit failed: {exc}"
            return {"error": self.fit_error}

    def _fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        import numpy as np

        from harness.tasks.methods.backends.htaf_core import key_settings

        X, y = train_arrays(train, labelled=True)
        if len(X) == 0:
            raise FeatureError("empty train split")
        shape = image_shape_of(train[0]) if self.arch == "icbm" else None
        n_out = int(max(int(y.max()) + 1, max((int(s.metadata.get("n_classes", 0)) for s in train), default=0)))
        cfg = self.config()
        # the networks' seeds are 0..cfg.seeds-1: the count is in the config, the first seed is 0
        key = fit_cache.fit_key(backend=f"{self.act}:{self.arch}", settings=key_settings(cfg),
                                task_hash=fit_cache.samples_hash(train), train=fit_cache.digest_arrays(X, y), seed=0,
                                extra={"v": 1, "n_out": n_out, "shape": shape})

        def usable(state: dict[str, Any]) -> dict[str, Any]:
            return _usable_fit(state, cfg, X.shape[1], n_out, shape)

        state = fit_cache.load(key, kind="binnet", folder=FITS, restore=usable) if self.settings.get(
            "cache", True) else None
        cached = state is not None
        if state is None:
            from harness.tasks.methods.backends.htaf_core import train_nets

            if self.arch == "icbm":  # one scale for the whole image keeps its spatial structure
                mean, std = np.full(X.shape[1], X.mean()), np.full(X.shape[1], X.std() or 1.0)
            else:
                mean, std = X.mean(axis=0), X.std(axis=0)
                std[std == 0] = 1.0
            bar = TrainProgress(f"train {self.spec}", cfg.seeds * cfg.epochs, bool(self.settings.get("progress", True)))
            with bar.running():
                states, record = train_nets(cfg, (X - mean) / std, y, n_out, shape, tick=bar.advance)
            state = {"weights": states, "mean": mean, "std": std, "n_out": n_out, "shape": shape,
                     "record": {"method": self.spec, **record}}
            fit_cache.save(key, state, kind="binnet", folder=FITS)
        state["record"] = {**state["record"], "cached": cached}
        self.state = {**state, "cfg": cfg}
        return state["record"]

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        import numpy as np

        from harness.tasks.methods.backends.htaf_core import predict

        if self.state is None:
            return not_fitted(self.spec, self.fit_error, len(requests))
        t0 = time.perf_counter()
        st = self.state
        dim = st["mean"].shape[0]
        rows, slots, outs = [], [], [Output() for _ in requests]
        for i, r in enumerate(requests):
            try:
                x = features_of(r.messages)
            except FeatureError as exc:
                outs[i] = Output(error=str(exc))
                continue
            if len(x) != dim:
                outs[i] = Output(error=f"feature vector has {len(x)} values, the network takes {dim}")
                continue
            rows.append(x)
            slots.append(i)
        if rows:
            X = (np.asarray(rows, dtype=np.float64) - st["mean"]) / st["std"]
            pred = predict(st["cfg"], st["weights"], X, st["n_out"], st["shape"])
            for row, i in enumerate(slots):
                fired = np.flatnonzero(pred.codes[0, row]).tolist()
                active = pred.codes[:, row].mean(axis=1).tolist()  # fraction of binary units on, per seed
                outs[i] = Output(
                    text=str(int(pred.hard[0, row])),
                    prediction={"soft": pred.soft[:, row].tolist(), "hard": pred.hard[:, row].tolist(),
                                "concepts": fired, "active": len(fired), "active_fraction": active},
                    details={"fit": st["record"]})
        return with_usage(outs, t0)


def _usable_fit(state: dict[str, Any], cfg: Any, dim: int, n_out: int, shape: tuple[int, int] | None
                ) -> dict[str, Any]:
    """The cached ``state`` if it is a fit of these networks (each seed's weights load into a network
    of this config); raises (KeyError, ValueError, RuntimeError, ...) otherwise, which is a cache miss."""
    import numpy as np
    import torch

    from harness.tasks.methods.backends.htaf_core import build_net

    weights, mean, std = state["weights"], state["mean"], state["std"]
    if not isinstance(state["record"], dict) or state["n_out"] != n_out:
        raise ValueError("record or class count")
    if not all(isinstance(a, np.ndarray) and a.shape == (dim,) for a in (mean, std)):
        raise ValueError(f"mean and std must be {dim} values")
    if not isinstance(weights, list) or len(weights) != cfg.seeds:
        raise ValueError(f"weights of {cfg.seeds} networks expected")
    for w in weights:
        build_net(cfg, dim, n_out, shape).load_state_dict({k: torch.as_tensor(v) for k, v in w.items()})
    return state


def _build(act: str, path: str | None, settings: dict[str, Any]) -> BinaryNetModel:
    arch = path or "mlp"
    if arch not in ARCH_NAMES:
        raise ValueError(f"unknown architecture {arch!r} for {act}; choose one of {', '.join(ARCH_NAMES)}")
    if act == "relu" and arch in STEP_ARCHS:
        raise ValueError(f"relu:{arch} is not offered: {arch} trains steps through a surrogate gradient and ReLU "
                         "is no surrogate of a step; use htaf:, sigmoid: or ste:")
    settings = validate_settings(act, settings, SETTINGS)  # a factory called directly is checked too
    for key in _SNN_ONLY:
        if settings.get(key) is not None and arch != "snn":
            raise ValueError(f"{act}:{arch}: setting {key!r} applies only to snn")
    if settings.get("norm") is not None and arch in STEP_ARCHS:
        raise ValueError(f"{act}:{arch}: setting 'norm' does not apply (bnn has BatchNorm after every layer, snn none)")
    spec = method_spec(act, arch, settings, _TRAIN)
    return BinaryNetModel(act, arch, dict(settings), spec)


@model("htaf", kind="method", settings=SETTINGS, strict=True,
       description="HTAF binary network trained on the train split: htaf:mlp | heaviside | icbm | snn | bnn")
def htaf_backend(path: str | None, **settings: Any) -> BinaryNetModel:
    return _build("htaf", path, settings)


@model("relu", kind="method", settings=SETTINGS, strict=True,
       description="ReLU baseline of the HTAF networks (units thresholded at test): relu:mlp|heaviside|icbm")
def relu_backend(path: str | None, **settings: Any) -> BinaryNetModel:
    return _build("relu", path, settings)


@model("sigmoid", kind="method", settings=SETTINGS, strict=True,
       description="Steep-sigmoid sig(beta x) baseline of the HTAF networks: sigmoid:mlp|heaviside|icbm|snn|bnn")
def sigmoid_backend(path: str | None, **settings: Any) -> BinaryNetModel:
    return _build("sigmoid", path, settings)


@model("ste", kind="method", settings=SETTINGS, strict=True,
       description="Straight-through Heaviside baseline of the HTAF networks: ste:mlp|heaviside|icbm|snn|bnn")
def ste_backend(path: str | None, **settings: Any) -> BinaryNetModel:
    return _build("ste", path, settings)
