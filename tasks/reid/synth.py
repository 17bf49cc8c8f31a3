"""The synthetic aerial-ground ReID set: procedural identities rendered with Blender, built once per
configuration and cached under ``$HARNESS_CACHE_DIR/reid/synth-<hash>/`` (``manifest.json`` + PNGs).

Identities ``0..ids/2-1`` are the training identities, the rest the test identities (disjoint, as in
every ReID benchmark). Each identity is seen by ``ground`` ground cameras and ``aerial`` aerial ones.
For each training image, ``lifts`` reconstructed meshes are rendered for 3D-VITAL (see
render_script.py): a fraction ``fail_rate`` of them are failed reconstructions (severe geometric
corruption), which the consistency filter should remove. Blender runs as a subprocess of the bpy
venv's Python (``HARNESS_BPY_PYTHON``, default ``$HARNESS_CACHE_DIR/venvs/bpy/bin/python``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.types import stable_hash

HERE = Path(__file__).parent
VERSION = "1"


class BlenderUnavailable(RuntimeError):
    pass


def cache_root() -> Path:
    return Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache" / "harness")) / "reid"


def bpy_python() -> str:
    """The Blender venv's interpreter (``harness.blender``), or BlenderUnavailable saying how to make one."""
    from harness.blender import BlenderMissing
    from harness.blender import bpy_python as core_bpy_python

    try:
        return core_bpy_python()
    except BlenderMissing as exc:
        raise BlenderUnavailable(str(exc)) from None


@dataclass(frozen=True)
class SynthConfig:
    ids: int = 40
    ground: int = 4
    aerial: int = 4
    seed: int = 0
    lifts: int = 1
    novel: int = 2
    fail_rate: float = 0.3
    jitter: float = 0.01
    width: int = 64
    height: int = 128
    samples: int = 8
    workers: int = 1

    def validate(self) -> None:
        if self.ids < 4 or self.ids % 2:
            raise ValueError(f"ids must be an even number >= 4, got {self.ids}")
        for name in ("ground", "aerial"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not 0.0 <= self.fail_rate <= 1.0:
            raise ValueError(f"fail_rate must be in [0, 1], got {self.fail_rate}")
        if self.lifts < 0 or self.novel < 1:
            raise ValueError("lifts must be >= 0 and novel >= 1")

    def key(self) -> str:
        sources = {n: (HERE / n).read_text() for n in ("render_script.py", "figures.py")}
        content = {k: v for k, v in asdict(self).items() if k != "workers"}
        return stable_hash({"v": VERSION, "config": content, "sources": sources})[:16]


def plan(cfg: SynthConfig, root: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The Blender jobs (one entry per identity) and the manifest, both with paths under ``root``."""
    import numpy as np

    from harness.tasks.reid.figures import AERIAL_ELEVATION, GROUND_ELEVATION, NOVEL_ELEVATION, camera, identity

    rng = np.random.default_rng(cfg.seed)
    figures, images, lifts = [], [], []
    for pid in range(cfg.ids):
        params = identity(rng)
        split = "train" if pid < cfg.ids // 2 else "test"
        views, fig_lifts = [], []
        for v in range(cfg.ground + cfg.aerial):
            family = "ground" if v < cfg.ground else "aerial"
            cam = camera(rng, GROUND_ELEVATION if family == "ground" else AERIAL_ELEVATION)
            out = root / "images" / f"{pid:04d}_c{v}.png"
            views.append({"cam": cam, "out": str(out)})
            images.append({"path": f"images/{out.name}", "pid": pid, "camid": v, "view": family, "split": split,
                           "azimuth": cam[0], "elevation": cam[1]})
            if family == "ground" and split == "train":
                for k in range(cfg.lifts):
                    failed = bool(rng.random() < cfg.fail_rate)
                    stem = f"{pid:04d}_c{v}_l{k}"
                    novel: list[dict[str, Any]] = [
                        {"cam": camera(rng, NOVEL_ELEVATION), "out": str(root / "lifts" / f"{stem}_n{j}.png"),
                         "vis_out": str(root / "lifts" / f"{stem}_n{j}_vis.png")} for j in range(cfg.novel)]
                    lift = {"seed": int(rng.integers(2**31)), "jitter": cfg.jitter,
                            "severity": round(float(rng.uniform(0.3, 1.0)), 4) if failed else 0.0,
                            "source_cam": cam, "source_out": str(root / "lifts" / f"{stem}_src.png"), "novel": novel}
                    fig_lifts.append(lift)
                    lifts.append({"source": f"images/{out.name}", "pid": pid, "camid": v, "corrupted": failed,
                                  "severity": lift["severity"], "reprojection": f"lifts/{stem}_src.png",
                                  "novel": [{"path": f"lifts/{Path(n['out']).name}",
                                             "visibility": f"lifts/{Path(n['vis_out']).name}",
                                             "elevation": n["cam"][1]} for n in novel]})
        figures.append({"pid": pid, "params": params, "views": views, "lifts": fig_lifts})
    manifest = {"name": "reid-synth", "config": asdict(cfg), "images": images, "lifts": lifts,
                "identities": [f["params"] for f in figures]}
    return figures, manifest


def _run_blender(python: str, job: dict[str, Any], workdir: Path, index: int) -> dict[str, Any]:
    path = workdir / f"job{index}.json"
    path.write_text(json.dumps(job))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([python, str(HERE / "render_script.py"), str(path)], capture_output=True, text=True,
                          env=env, timeout=3600)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"Blender render failed (exit {proc.returncode}): {tail[0][:300]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def build(cfg: SynthConfig, force: bool = False) -> Path:
    """The dataset folder for ``cfg`` (rendered now unless already cached)."""
    cfg.validate()
    final = cache_root() / f"synth-{cfg.key()}"
    if (final / "manifest.json").exists() and not force:
        return final
    python = bpy_python()
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="synth-tmp-", dir=final.parent))
    try:
        (work / "images").mkdir()
        (work / "lifts").mkdir()
        figures, manifest = plan(cfg, work)
        n_jobs = max(1, min(cfg.workers, len(figures)))
        jobs = [{"size": [cfg.width, cfg.height], "samples": cfg.samples, "figures": figures[i::n_jobs]}
                for i in range(n_jobs)]
        with ThreadPoolExecutor(n_jobs) as pool:
            stats = list(pool.map(lambda a: _run_blender(python, a[1], work, a[0]), enumerate(jobs)))
        for job in work.glob("job*.json"):
            job.unlink()
        manifest["render"] = {"renders": sum(s.get("renders", 0) for s in stats),
                              "seconds": round(sum(s.get("seconds", 0.0) for s in stats), 2),
                              "engine": "CYCLES (CPU)", "samples": cfg.samples}
        (work / "manifest.json").write_text(json.dumps(manifest, indent=1))
        if final.exists():
            shutil.rmtree(final)
        try:
            work.rename(final)  # atomic: a reader sees the whole set or none of it
        except OSError:
            if not (final / "manifest.json").exists():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return final


def load_manifest(root: Path) -> dict[str, Any]:
    return json.loads((root / "manifest.json").read_text())
