"""Novel-view synthesis tasks: fit on a scene's train views, render its held-out views, score them.

``nvs_synthetic``: the Blender scenes of ``scenes.py`` (``-T scenes=textured,repetitive,thin``,
``-T size=64`` pixels, ``-T train_views=24``, ``-T test_views=6``, ``-T seed=0`` moves the cameras),
rendered on first use. ``nvs_folder``: a dataset of yours (``-T path=DIR -T layout=nerf|colmap|dl3dv``;
DL3DV also needs ``-T index=FILE``, the pixelSplat-style context/target JSON; an optional
``points.npy`` of true surface samples in a scene folder enables the floater fraction). One sample per held-out
view; the train split is every train view (the runner hands it to the backend's ``fit``). Metrics
are per view, averaged, with a breakdown per scene. Depth counts every pixel with a true depth, as
monodepth2 does (``-T depth_mask=rendered``: only the pixels the method rendered; see ``scorer.score_view``).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from harness.data import DatasetError
from harness.registry import task
from harness.task import Task
from harness.tasks.nvs.scenes import SCENES, Scene, View
from harness.types import Message, Part, Sample, stable_hash

VERSION = "1"
LAYOUTS = {"nerf": ("train", "test"), "colmap": ("train", "test"), "dl3dv": ("context", "target")}


def _sample(scene: Scene, view: View, train: bool) -> Sample:
    key = f"{scene.name}-{scene.content_hash}"
    nvs: dict[str, Any] = {"scene": key, "view": view.name, "camera": view.camera.to_dict()}
    if train:
        nvs["image"] = view.image
    text = f"Render view {view.name} of scene {scene.name} from its camera."
    return Sample(
        id=f"{scene.name}/{view.name}",
        messages=[Message("user", [Part("text", text=text, options={"nvs": nvs})])],
        target={"image": view.image, "depth": view.depth, "camera": view.camera.to_dict()},
        metadata={"scene": scene.name, "points": scene.points, "split": "train" if train else "test"},
    )


def _make(load_scenes: Any, content_hash: str, depth: bool, options: dict[str, Any]) -> Task:
    from harness.tasks.nvs.scorer import DEPTH_MASKS, metric_declarations, score_view

    depth_mask = str(options.get("depth_mask", "all"))
    if depth_mask not in DEPTH_MASKS:
        raise ValueError(f"unknown -T depth_mask {depth_mask!r}; choose one of {', '.join(DEPTH_MASKS)}")

    cache: list[Scene] = []

    def scenes() -> list[Scene]:
        if not cache:
            cache.extend(load_scenes())
        return cache

    return Task(
        version=VERSION,
        load=lambda: [_sample(s, v, False) for s in scenes() for v in s.test],
        train=lambda: [_sample(s, v, True) for s in scenes() for v in s.train],
        score=partial(score_view, depth_mask=depth_mask),
        primary_metric="psnr",
        metrics=metric_declarations(depth),
        breakdowns=("scene",),
        content_hash=content_hash,
        options=options,
    )  # fmt: skip


@task("nvs_synthetic", description="Novel views of Blender scenes (textured, repetitive texture, thin structures): "
      "PSNR/SSIM/LPIPS, depth, Chamfer, floaters", family="nvs")
def nvs_synthetic(scenes: str = ",".join(SCENES), size: int = 64, train_views: int = 24, test_views: int = 6,
                  seed: int = 0, samples: int = 32, depth_mask: str = "all") -> Task:
    from harness.tasks.nvs.scenes import SceneError, ensure_scene, scene_job, scene_key

    names = [s.strip() for s in str(scenes).split(",") if s.strip()]
    if not names:
        raise ValueError("-T scenes is empty; give scene names separated by commas")
    if len(set(names)) != len(names):
        raise ValueError(f"-T scenes names a scene twice: {scenes}")
    if not 1 <= samples <= 4096:
        raise ValueError(f"-T samples (Cycles samples per pixel) must be between 1 and 4096, got {samples}")
    try:
        jobs = [scene_job(n, size, train_views, test_views, samples, 20000, seed) for n in names]
    except SceneError as exc:
        raise ValueError(str(exc)) from None

    def load() -> list[Scene]:
        return [ensure_scene(n, size=size, n_train=train_views, n_test=test_views, samples=samples, seed=seed)
                for n in names]

    return _make(load, stable_hash([scene_key(j) for j in jobs])[:16], True,
                 {"scenes": ",".join(names), "size": size, "train_views": train_views, "test_views": test_views,
                  "seed": seed, "samples": samples, "depth_mask": depth_mask})


@task("nvs_folder", description="Novel views of your own scenes (NeRF-synthetic, Mip-NeRF 360 / COLMAP or DL3DV "
      "layout): PSNR/SSIM/LPIPS (+ depth where given)", family="nvs")
def nvs_folder(path: str = "", layout: str = "nerf", index: str = "", llffhold: int = 8,
               depth_mask: str = "all") -> Task:
    from harness.tasks.nvs import layouts
    from harness.tasks.nvs.scenes import from_layout

    if not path:
        raise DatasetError("nvs_folder needs -T path=DIR (a scene folder, or for dl3dv a folder of scenes)")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown -T layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    if layout == "dl3dv" and not index:
        raise ValueError("-T layout=dl3dv needs -T index=FILE (the context/target index JSON)")
    root = Path(path)
    if not root.is_dir():
        raise ValueError(f"-T path {path} is not a folder")
    train_split, test_split = LAYOUTS[layout]
    hold = int(llffhold)

    def views() -> list[Any]:
        if layout == "nerf":
            return [layouts.load_nerf_synthetic(root, ("train", "test"))]
        if layout == "colmap":
            return [layouts.load_colmap(root, llffhold=hold)]
        if (root / "transforms.json").is_file() or (root / "nerfstudio").is_dir():
            return [layouts.load_dl3dv(root, index)]
        return layouts.load_dl3dv_all(root, index)

    def load() -> list[Scene]:
        out = []
        for sv in views():
            depth = any(p is not None and str(p).endswith(".npy") for p in sv.depth_paths)
            surface = Path(sv.root) / "points.npy"  # optional true surface samples (N, 3): floater fraction
            scene = from_layout(sv, train_split, test_split, points=str(surface) if surface.is_file() else None)
            if not depth:  # only .npy depth maps are read
                scene.train = [View(v.name, v.image, v.camera, None) for v in scene.train]
                scene.test = [View(v.name, v.image, v.camera, None) for v in scene.test]
            out.append(scene)
        return out

    files = sorted(str(p.relative_to(root)) + f":{p.stat().st_size}" for p in root.rglob("*.json") if p.is_file())
    digest = stable_hash({"layout": layout, "files": files, "index": index, "llffhold": hold})[:16]
    return _make(load, digest, True, {"path": str(root), "layout": layout, "index": index, "llffhold": hold,
                                      "depth_mask": depth_mask})
