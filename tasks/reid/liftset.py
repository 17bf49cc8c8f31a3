"""The lifting model's own pretraining set: freshly drawn procedural figures, each rendered by ground
cameras exactly as the ReID set renders its people, labelled with the figure's parameters and camera.

The figures come from their own random stream (``default_rng([LIFT_STREAM, seed])``), never the
task's ``default_rng(seed)``, so the lifting model is not trained on any identity it is later asked
to lift (tests/test_reid_lifting.py checks the parameters are disjoint). ``figures`` figures are
rendered by ``views`` cameras each (the training renders); ``heldout`` further figures once each are
kept apart for the held-out accuracy and the consistency-filter calibration. Cached under
``$HARNESS_CACHE_DIR/reid/liftset-<hash>/`` (``labels.json`` + PNGs); the hash covers the config and
the rendering code.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.tasks.reid.blender_jobs import RenderSettings, cache_root, cached_folder, render

VERSION = "1"
LIFT_STREAM = 0x11F7  # first word of the pretraining set's seed sequence (the task seeds with one integer)


@dataclass(frozen=True)
class LiftSetConfig(RenderSettings):
    figures: int = 600
    views: int = 2
    heldout: int = 120
    seed: int = 0

    def validate(self) -> None:
        if self.figures < 8 or self.views < 1 or self.heldout < 4:
            raise ValueError(f"the lifting set needs figures >= 8, views >= 1 and heldout >= 4, got {self.figures}, "
                             f"{self.views} and {self.heldout}")

    def key(self) -> str:
        return self.content_key(VERSION)


def plan(cfg: LiftSetConfig, root: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(Blender jobs, labels): ``labels["images"]`` has path, figure index, split and camera."""
    import numpy as np

    from harness.tasks.reid.figures import GROUND_ELEVATION, camera, identity

    rng = np.random.default_rng([LIFT_STREAM, cfg.seed])
    jobs, figures, images = [], [], []
    for i in range(cfg.figures + cfg.heldout):
        params = identity(rng)
        split = "train" if i < cfg.figures else "heldout"
        views = []
        for v in range(cfg.views if split == "train" else 1):
            cam = camera(rng, GROUND_ELEVATION)
            out = root / "images" / f"{i:05d}_v{v}.png"
            views.append({"cam": cam, "out": str(out)})
            images.append({"path": f"images/{out.name}", "figure": i, "split": split, "cam": cam})
        jobs.append({"params": params, "views": views})
        figures.append(params)
    return jobs, {"name": "reid-liftset", "config": asdict(cfg), "figures": figures, "images": images}


def identities(cfg: LiftSetConfig) -> list[dict[str, Any]]:
    """The parameters of every figure of the set (no rendering)."""
    return plan(cfg, Path("/nonexistent"))[1]["figures"]


def build(cfg: LiftSetConfig) -> Path:
    cfg.validate()

    def fill(work: Path) -> None:
        (work / "images").mkdir()
        jobs, labels = plan(cfg, work)
        labels["render"] = render(jobs, (cfg.width, cfg.height), cfg.samples, cfg.workers, work)
        (work / "labels.json").write_text(json.dumps(labels))

    return cached_folder(cache_root() / f"liftset-{cfg.key()}", fill, "labels.json")


def load_labels(root: Path) -> dict[str, Any]:
    return json.loads((root / "labels.json").read_text())
