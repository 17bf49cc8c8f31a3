"""``ff:consistency``: train the feed-forward predictor of ``ff_model`` on the task's train views
(every scene's; one network), then answer each held-out view from its scene's two nearest train
views. A training step takes two context views and a third target view of one scene, predicts
Gaussians from the two, renders a random patch of the third and takes an Adam step on the L1 loss.

What a prediction reads: the held-out request's camera (from its messages) and the two context
views' images and cameras, loaded at fit time from the train samples' ``image`` files. The samples'
``target`` and ``metadata`` (true depth maps, surface points) and the held-out views' images are never
read, at fit or at predict time; ``tests/test_nvs_ff_anchors.py`` checks it with those files deleted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness import fit_cache
from harness.backend_settings import Setting
from harness.modelspec import validate_settings
from harness.tasks.nvs.backends_common import (
    FITS,
    ViewError,
    ViewSpec,
    artifacts_dir,
    between,
    error_outputs,
    load_images,
    train_views,
    view_of,
    views_fit_key,
    write_gaussians,
    write_render,
)
from harness.tasks.nvs.ff_model import HEADS, STRIDE, FFConfig
from harness.types import Output, Request, Sample, Usage

SETTINGS = {
    "tokens": Setting(bool, True, "3D consistency tokens: a set of 3D anchors co-refined with the image tokens"),
    "anchors": between(int, 1, 1024, 64, "anchor tokens K (farthest points of the lifted cloud; tokens=true)"),
    "rounds": between(int, 1, 8, 2, "anchor <-> image co-refinement rounds (tokens=true)"),
    "steps": between(int, 1, 1_000_000, 400, "training steps"),
    "width": between(int, 8, 512, 32, "channels of the predictor"),
    "seed": between(int, 0, 2**31 - 1, 0, "training seed"),
    "lr": between(float, 1e-6, 1.0, 2e-3, "Adam learning rate"),
    "device": Setting(str, "cpu", "torch device (cuda on a GPU machine)"),
    "cache": Setting(bool, True, "reuse a cached fit"),
}


def ff_config(settings: dict[str, Any]) -> FFConfig:
    name = "ff:consistency"
    settings = validate_settings(name, settings, SETTINGS)  # a factory called directly is checked too
    if not settings.get("tokens", True):  # the ablation has no anchor branch to size
        given = [k for k in ("anchors", "rounds") if k in settings]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise ValueError(f"{name}: {' and '.join(given)} {verb} to tokens=true only (tokens=false has no anchors)")
    if settings.get("width", 32) % HEADS:
        raise ValueError(f"{name}: width={settings['width']} must be a multiple of {HEADS} (the attention heads)")
    kw: dict[str, Any] = {k: v for k, v in settings.items() if k in SETTINGS and k != "cache"}
    return FFConfig(**kw)


@dataclass
class SceneViews:
    views: list[ViewSpec]
    images: Any  # (V, H, W, 3)
    cams: list[Any]  # TorchCamera
    centers: Any  # (V, 3)
    center: Any
    radius: float
    depth_range: tuple[float, float]


def _prepare(views: list[ViewSpec], device: str) -> SceneViews:
    import torch

    from harness.tasks.nvs.gs_model import scene_bounds
    from harness.tasks.nvs.gs_raster import torch_camera

    for v in views:
        if v.camera.width % STRIDE or v.camera.height % STRIDE:
            raise ViewError(f"ff:consistency needs image sides divisible by {STRIDE}, view {v.name} is "
                            f"{v.camera.width}x{v.camera.height}")
    if len(views) < 2:
        raise ViewError("ff:consistency needs at least 2 train views of a scene")
    center, radius = scene_bounds([v.camera for v in views])
    cams = [torch_camera(v.camera, device) for v in views]
    centers = torch.tensor([v.camera.center for v in views])
    c = torch.tensor(center)
    dist = (centers - c).norm(dim=1)
    near = max(0.05, float(dist.min()) - 1.2 * radius)
    far = float(dist.max()) + 1.2 * radius
    return SceneViews(views, load_images(views).to(device), cams, centers, c.to(device), radius, (near, far))


def nearest_two(scene: SceneViews, position: Any, exclude: int | None = None) -> list[int]:
    import torch

    d = (scene.centers - torch.as_tensor(position, dtype=torch.float32)).norm(dim=1)
    if exclude is not None and len(d) > 2:  # with two views only, a view is also its own target
        d[exclude] = float("inf")
    return [int(i) for i in torch.argsort(d)[:2]]


def train_network(cfg: FFConfig, scenes: list[SceneViews]) -> tuple[Any, dict[str, Any]]:
    import torch

    from harness.tasks.nvs.ff_model import build_network, predict_gaussians, render_gaussians

    torch.manual_seed(cfg.seed)
    net = build_network(cfg).to(cfg.device)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    losses: list[float] = []
    nonfinite = 0
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        sc = scenes[int(torch.randint(len(scenes), (1,), generator=gen))]
        k = int(torch.randint(len(sc.views), (1,), generator=gen))
        ctx = nearest_two(sc, sc.centers[k], exclude=k)  # the same choice as at test time
        g = predict_gaussians(net, [sc.images[i] for i in ctx], [sc.cams[i] for i in ctx], sc.depth_range,
                              sc.center, sc.radius)
        cam = sc.cams[k]
        pw, ph = min(cfg.patch, cam.width), min(cfg.patch, cam.height)
        x0 = int(torch.randint(cam.width - pw + 1, (1,), generator=gen))
        y0 = int(torch.randint(cam.height - ph + 1, (1,), generator=gen))
        out = render_gaussians(g, cam, rect=(x0, y0, x0 + pw, y0 + ph))
        loss = (out["rgb"] - sc.images[k][y0:y0 + ph, x0:x0 + pw].reshape(-1, 3)).abs().mean()
        opt.zero_grad(set_to_none=True)
        if not torch.isfinite(loss):
            nonfinite += 1
            continue
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if step == int(cfg.steps * 0.7):
            for group in opt.param_groups:
                group["lr"] *= 0.3
    first = sum(losses[:20]) / max(len(losses[:20]), 1)
    last = sum(losses[-20:]) / max(len(losses[-20:]), 1)
    return net, {"steps": cfg.steps, "seconds": round(time.perf_counter() - t0, 2), "loss_first": first,
                 "loss_last": last, "nonfinite_steps": nonfinite, "tokens": cfg.tokens,
                 **({"anchors": cfg.anchors, "rounds": cfg.rounds} if cfg.tokens else {})}


@dataclass
class FeedForwardBackend:
    cfg: FFConfig
    use_cache: bool = True
    spec: str = "ff:consistency"
    batch_size: int = 64
    concurrency: int = 1
    cacheable: bool = False
    modalities: frozenset[str] = frozenset({"text", "image"})
    net: Any = None
    scenes: dict[str, SceneViews] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)
    fit_error: str | None = None

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        try:
            return self._fit(train)
        except (ViewError, ValueError) as exc:
            self.fit_error = f"{self.spec} fit failed: {exc}"
            return {"error": self.fit_error}

    def _fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        import torch

        from harness.tasks.nvs.ff_model import build_network

        groups = train_views(train)
        self.scenes = {k: _prepare(v, self.cfg.device) for k, v in groups.items()}
        all_views = [v for k in sorted(groups) for v in groups[k]]
        key = views_fit_key("ff:consistency", self.cfg.to_dict(), train, all_views)

        def restore(state: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
            # a state that is not this network's weights raises (KeyError, TypeError, RuntimeError): a miss
            if not isinstance(state["record"], dict):
                raise ValueError("the record is not a dict")
            net = build_network(self.cfg).to(self.cfg.device)
            net.load_state_dict({k: torch.from_numpy(v).to(self.cfg.device) for k, v in state["weights"].items()})
            return net, state["record"]

        loaded = fit_cache.load(key, kind="ff", folder=FITS, restore=restore) if self.use_cache else None
        if loaded is None:
            net, record = train_network(self.cfg, [self.scenes[k] for k in sorted(self.scenes)])
            fit_cache.save(key, {"weights": {k: v.detach().cpu().numpy() for k, v in net.state_dict().items()},
                                 "record": record}, kind="ff", folder=FITS)
            cached = False
        else:
            (net, record), cached = loaded, True
        net.eval()
        self.net, self.record = net, {**record, "cached": cached}
        return {"method": self.spec, **self.record}

    def render_one(self, request: Request) -> Output:
        import torch

        from harness.tasks.nvs.ff_model import predict_gaussians, render_gaussians
        from harness.tasks.nvs.gs_raster import torch_camera

        t0 = time.perf_counter()
        try:
            view = view_of(request.messages, request.sample_id)
        except ViewError as exc:
            return Output(error=str(exc))
        sc = self.scenes.get(view.scene)
        if sc is None or self.net is None:
            return Output(error=self.fit_error or f"{self.spec} has no train views of scene {view.scene!r}")
        ctx = nearest_two(sc, view.camera.center)
        cam = torch_camera(view.camera, self.cfg.device)
        with torch.no_grad():
            g = predict_gaussians(self.net, [sc.images[i] for i in ctx], [sc.cams[i] for i in ctx], sc.depth_range,
                                  sc.center, sc.radius)
            out = render_gaussians(g, cam)
        folder = artifacts_dir(self.spec) / view.scene
        try:
            files = write_render(folder, view.name, out["rgb"].cpu(), out["depth"].cpu(), out["alpha"].cpu())
        except ValueError as exc:
            return Output(error=str(exc))
        gauss = write_gaussians(folder, view.name, g["means"].cpu(), g["opacities"].cpu())
        pred = {**files, "gaussians": gauss, "n_gaussians": int(g["means"].shape[0]),
                "context": [sc.views[i].name for i in ctx]}
        return Output(text=files["image"], prediction=pred, usage=Usage(calls=1, seconds=time.perf_counter() - t0),
                      details={"fit": self.record})

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        if self.net is None:
            return error_outputs(self.fit_error or f"{self.spec} has not been fitted (the task needs a train split)",
                                 len(requests))
        return [self.render_one(r) for r in requests]
