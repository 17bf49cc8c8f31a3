"""Novel-view synthesis backends, fitted on a scene's train views and asked for its held-out views.

``gs:sh``: Gaussian splatting with per-Gaussian spherical-harmonic colour (degree <= 1).
``gs:neural_color``: the same Gaussians coloured by a Lipschitz-bounded neural field of position and
view direction (see ``gs_model``). ``ff:consistency``: a tiny feed-forward Gaussian predictor from
the two nearest train views, with (``-M tokens=true``, default) or without a separate set of 3D
anchor tokens (farthest points of the context pixels lifted with the network's own depth) co-refined
with the image tokens by cross-attention (see ``ff_model``).

gs settings (``-M``): ``steps`` (400), ``gaussians`` (2000), ``patch`` (32 px per step), ``lr``
(1.0, a multiplier), ``sh_degree`` (1; sh only), ``lipschitz`` (20; neural_color only), ``hidden``
(64), ``seed`` (0), ``device`` (cpu; ``cuda`` on a GPU machine), ``cache`` (true).
ff settings: ``tokens`` (true), ``anchors`` (64), ``rounds`` (2), ``steps`` (400), ``width`` (32),
``seed``, ``device``, ``cache``.

Each held-out view's ``prediction`` is ``{"image": PNG, "depth": .npy, "gaussians": .npy,
"n_gaussians": N}``; files go under ``$HARNESS_ARTIFACTS/nvs/`` (default ``./artifacts``). A render
with NaN or inf becomes that view's error row; a fit that fails becomes every view's error.
Fits are cached under ``$HARNESS_CACHE_DIR/nvs/fits`` (``harness.fit_cache``) by a hash of the settings,
the train views and the bytes of their images.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness import fit_cache
from harness.backend_settings import Setting
from harness.modelspec import validate_settings
from harness.registry import model
from harness.tasks.nvs.backends_common import (
    FITS,
    ViewError,
    artifacts_dir,
    between,
    error_outputs,
    load_images,
    scene_samples,
    train_views,
    view_of,
    views_fit_key,
    write_gaussians,
    write_render,
)
from harness.tasks.nvs.ff_backend import SETTINGS as FF_SETTINGS
from harness.types import Output, Request, Sample, Usage

GS_PATHS = {"sh": "sh", "neural_color": "neural"}
GS_SETTINGS = {
    "steps": between(int, 1, 1_000_000, 400, "training steps"),
    "gaussians": between(int, 1, 2_000_000, 2000, "Gaussians fitted"),
    "patch": between(int, 4, 4096, 32, "side of the random patch rendered per step, px"),
    "lr": between(float, 1e-6, 100.0, 1.0, "multiplier of every per-parameter learning rate"),
    "sh_degree": between(int, 0, 1, 1, "gs:sh: spherical-harmonic degree of the colour"),
    "lipschitz": between(float, 1e-3, 1e4, 20.0, "gs:neural_color: Lipschitz bound of the colour field"),
    "hidden": between(int, 4, 1024, 64, "gs:neural_color: hidden units of the colour field"),
    "seed": between(int, 0, 2**31 - 1, 0, "fit seed"),
    "device": Setting(str, "cpu", "torch device (cuda on a GPU machine)"),
    "cache": Setting(bool, True, "reuse a cached fit"),
}
FF_PATHS = ("consistency",)


def gs_config(path: str, settings: dict[str, Any]) -> Any:
    from harness.tasks.nvs.gs_model import GSConfig

    name = f"gs:{path}"
    if path == "sh" and "lipschitz" in settings:
        raise ValueError("gs:sh: lipschitz applies to gs:neural_color only")
    if path == "neural_color" and "sh_degree" in settings:
        raise ValueError("gs:neural_color: sh_degree applies to gs:sh only")
    settings = validate_settings(name, settings, GS_SETTINGS)  # a factory called directly is checked too
    kw: dict[str, Any] = {"color": GS_PATHS[path]}
    kw.update({k: v for k, v in settings.items() if k in GS_SETTINGS and k != "cache"})
    return GSConfig(**kw)


@dataclass
class GaussianBackend:
    path: str
    cfg: Any
    use_cache: bool = True
    spec: str = ""
    batch_size: int = 64
    concurrency: int = 1
    cacheable: bool = False  # fits have their own cache; the renders are files
    modalities: frozenset[str] = frozenset({"text", "image"})
    scenes: dict[str, Any] = field(default_factory=dict)  # scene key -> GaussianScene
    records: dict[str, Any] = field(default_factory=dict)
    gaussians: dict[str, str] = field(default_factory=dict)
    fit_error: str | None = None

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        try:
            return self._fit(train)
        except (ViewError, ValueError) as exc:
            self.fit_error = f"{self.spec} fit failed: {exc}"
            return {"error": self.fit_error}

    def _fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        import torch

        from harness.tasks.nvs.gs_model import fit_scene

        torch.set_num_threads(max(1, torch.get_num_threads()))
        out_dir = artifacts_dir(self.spec)
        for scene, views in train_views(train).items():
            key = views_fit_key(f"gs:{self.path}", self.cfg.to_dict(), scene_samples(train, scene), views)
            loaded = fit_cache.load(key, kind="gs", folder=FITS, restore=self._restore) if self.use_cache else None
            if loaded is None:
                images = load_images(views).to(self.cfg.device)
                fitted, record = fit_scene(self.cfg, [v.camera for v in views], images)
                fit_cache.save(key, {"gaussians": fitted.state(), "record": record}, kind="gs", folder=FITS)
                cached = False
            else:
                (fitted, record), cached = loaded, True
            self.scenes[scene] = fitted
            self.records[scene] = {**record, "cached": cached}
            with torch.no_grad():
                self.gaussians[scene] = write_gaussians(out_dir, f"{scene}-{key}", fitted.params["means"],
                                                        fitted.opacities())
        return {"method": self.spec, "scenes": self.records}

    def _restore(self, state: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """(GaussianScene, fit record) from a cached fit; raises (KeyError, TypeError, ...) for a state that
        is not a fit with this config, which is a cache miss (nothing is built from another file's sizes)."""
        import numpy as np

        from harness.tasks.nvs.gs_model import GaussianScene

        record, params = state["record"], state["gaussians"]
        if not isinstance(record, dict) or not isinstance(params.get("means"), np.ndarray):
            raise ValueError("not a Gaussian scene fit")
        if params["cfg"] != self.cfg.to_dict():
            raise ValueError("fitted with another config")
        return GaussianScene.from_state(params), record

    def render_one(self, request: Request) -> Output:
        import torch

        t0 = time.perf_counter()
        try:
            view = view_of(request.messages, request.sample_id)
        except ViewError as exc:
            return Output(error=str(exc))
        fitted = self.scenes.get(view.scene)
        if fitted is None:
            return Output(error=self.fit_error or f"{self.spec} has no fit of scene {view.scene!r} (no train views)")
        with torch.no_grad():
            out = fitted.render(view.camera)
        try:
            files = write_render(artifacts_dir(self.spec) / view.scene, view.name, out["rgb"].cpu(),
                                 out["depth"].cpu(), out["alpha"].cpu())
        except ValueError as exc:
            return Output(error=str(exc))
        n = int(fitted.params["means"].shape[0])
        pred = {**files, "gaussians": self.gaussians[view.scene], "n_gaussians": n}
        return Output(text=files["image"], prediction=pred, usage=Usage(calls=1, seconds=time.perf_counter() - t0),
                      details={"fit": self.records.get(view.scene, {})})

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        if not self.scenes:
            return error_outputs(self.fit_error or f"{self.spec} has not been fitted (the task needs a train split)",
                                 len(requests))
        return [self.render_one(r) for r in requests]


def _spec(base: str, settings: dict[str, Any], keys: Collection[str]) -> str:
    shown = {k: v for k, v in sorted(settings.items()) if k in keys and k not in ("cache", "device")}
    return base + ("?" + "&".join(f"{k}={v}" for k, v in shown.items()) if shown else "")


@model("gs", kind="method",
       description="Gaussian splatting fitted per scene: gs:sh (SH colour) | gs:neural_color (Lipschitz "
                   "colour field)", settings=GS_SETTINGS, strict=True)
def gs_backend(path: str | None, **settings: Any) -> GaussianBackend:
    path = path or "sh"
    if path not in GS_PATHS:
        raise ValueError(f"unknown gs path {path!r}; choose one of {', '.join(GS_PATHS)}")
    cfg = gs_config(path, settings)
    settings = validate_settings(f"gs:{path}", settings, GS_SETTINGS)
    return GaussianBackend(path, cfg, settings.get("cache", True), spec=_spec(f"gs:{path}", settings, GS_SETTINGS))


@model("ff", kind="method",
       description="Feed-forward Gaussians from two context views: ff:consistency (-M tokens=true|false)",
       settings=FF_SETTINGS, strict=True)
def ff_backend(path: str | None, **settings: Any) -> Any:
    from harness.tasks.nvs.ff_backend import FeedForwardBackend, ff_config

    path = path or "consistency"
    if path not in FF_PATHS:
        raise ValueError(f"unknown ff path {path!r}; choose one of {', '.join(FF_PATHS)}")
    cfg = ff_config(settings)
    settings = validate_settings("ff:consistency", settings, FF_SETTINGS)
    spec = _spec("ff:consistency", {"tokens": str(cfg.tokens).lower(), **settings}, FF_SETTINGS)
    return FeedForwardBackend(cfg, settings.get("cache", True), spec=spec)
