"""The synthetic aerial-ground ReID set: procedural identities rendered with Blender, built once per
configuration and cached under ``$HARNESS_CACHE_DIR/reid/synth-<hash>/`` (``manifest.json`` + PNGs).

Identities ``0..ids/2-1`` are the training identities, the rest the test identities (disjoint, as in
every ReID benchmark). Each identity is seen by ``ground`` ground cameras and ``aerial`` aerial ones.
The set holds only these photographs of the people: 3D-VITAL lifts the training images itself at fit
time (``lifting.py``), never from this build. The manifest also keeps each identity's parameters and
each view's camera (the ground truth), which only the task side reads. Blender runs as a subprocess
of the bpy venv's Python (``HARNESS_BPY_PYTHON``, default ``$HARNESS_CACHE_DIR/venvs/bpy/bin/python``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.tasks.reid.blender_jobs import (
    BlenderUnavailable,
    RenderSettings,
    bpy_python,
    cache_root,
    cached_folder,
    render,
)

__all__ = ["BlenderUnavailable", "SynthConfig", "bpy_python", "build", "cache_root", "load_manifest", "plan"]
VERSION = "2"


@dataclass(frozen=True)
class SynthConfig(RenderSettings):
    ids: int = 40
    ground: int = 4
    aerial: int = 4
    seed: int = 0

    def validate(self) -> None:
        if self.ids < 4 or self.ids % 2:
            raise ValueError(f"ids must be an even number >= 4, got {self.ids}")
        for name in ("ground", "aerial"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")

    def key(self) -> str:
        return self.content_key(VERSION)


def plan(cfg: SynthConfig, root: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The Blender jobs (one entry per identity) and the manifest, both with paths under ``root``."""
    import numpy as np

    from harness.tasks.reid.figures import AERIAL_ELEVATION, GROUND_ELEVATION, camera, identity

    rng = np.random.default_rng(cfg.seed)
    figures, images = [], []
    for pid in range(cfg.ids):
        params = identity(rng)
        split = "train" if pid < cfg.ids // 2 else "test"
        views = []
        for v in range(cfg.ground + cfg.aerial):
            family = "ground" if v < cfg.ground else "aerial"
            cam = camera(rng, GROUND_ELEVATION if family == "ground" else AERIAL_ELEVATION)
            out = root / "images" / f"{pid:04d}_c{v}.png"
            views.append({"cam": cam, "out": str(out)})
            images.append({"path": f"images/{out.name}", "pid": pid, "camid": v, "view": family, "split": split,
                           "azimuth": cam[0], "elevation": cam[1]})
        figures.append({"pid": pid, "params": params, "views": views})
    manifest = {"name": "reid-synth", "config": asdict(cfg), "images": images,
                "identities": [f["params"] for f in figures]}
    return figures, manifest


def build(cfg: SynthConfig, force: bool = False) -> Path:
    """The dataset folder for ``cfg`` (rendered now unless already cached)."""
    cfg.validate()

    def fill(work: Path) -> None:
        (work / "images").mkdir()
        figures, manifest = plan(cfg, work)
        manifest["render"] = render(figures, (cfg.width, cfg.height), cfg.samples, cfg.workers, work)
        (work / "manifest.json").write_text(json.dumps(manifest, indent=1))

    return cached_folder(cache_root() / f"synth-{cfg.key()}", fill, "manifest.json", force=force)


def load_manifest(root: Path) -> dict[str, Any]:
    return json.loads((root / "manifest.json").read_text())
