"""Running render_script.py under Blender's Python, and cached render folders that appear whole.

Every render of the family (the data set, the lifting model's pretraining set, the lifted meshes of
3D-VITAL) is a list of figure jobs run by one or more Blender subprocesses (``workers``), into a
temporary folder that is renamed into place when complete: a reader sees the whole folder or none.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.types import stable_hash

HERE = Path(__file__).parent
RENDER_SOURCES = ("render_script.py", "figures.py")  # what a render's bytes depend on besides the job


@dataclass(frozen=True)
class RenderSettings:
    """How a render folder's images are made; its configs (the data set, the lifting set) add what
    is drawn. ``workers`` changes how fast, not what: it is left out of the cache key."""

    width: int = 64
    height: int = 128
    samples: int = 8
    workers: int = 1

    def content_key(self, version: str) -> str:
        content = {k: v for k, v in asdict(self).items() if k != "workers"}
        return stable_hash({"v": version, "config": content, "sources": render_sources()})[:16]


class BlenderUnavailable(RuntimeError):
    pass


class BlenderFailed(RuntimeError):
    """A Blender subprocess exited with an error (its last line says why)."""


def cache_root() -> Path:
    """The family's folder of the harness cache (``$HARNESS_CACHE_DIR/reid``)."""
    from harness.fit_cache import cache_root as harness_cache_root

    return harness_cache_root() / "reid"


def bpy_python() -> str:
    """The Blender venv's interpreter (``harness.blender``), or BlenderUnavailable saying how to make one."""
    from harness.blender import BlenderMissing
    from harness.blender import bpy_python as core_bpy_python

    try:
        return core_bpy_python()
    except BlenderMissing as exc:
        raise BlenderUnavailable(str(exc)) from None


def render_sources() -> dict[str, str]:
    return {n: (HERE / n).read_text() for n in RENDER_SOURCES}


def _run_one(python: str, job: dict[str, Any], workdir: Path, index: int) -> dict[str, Any]:
    path = workdir / f"job{index}.json"
    path.write_text(json.dumps(job))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        proc = subprocess.run([python, str(HERE / "render_script.py"), str(path)], capture_output=True, text=True,
                              env=env, timeout=3600)
    finally:
        path.unlink(missing_ok=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise BlenderFailed(f"Blender render failed (exit {proc.returncode}): {tail[0][:300]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def render(figures: list[dict[str, Any]], size: tuple[int, int], samples: int, workers: int,
           workdir: Path) -> dict[str, Any]:
    """Render ``figures`` (render_script.py's job entries) with ``workers`` Blender processes."""
    python = bpy_python()
    n_jobs = max(1, min(workers, len(figures)))
    jobs = [{"size": list(size), "samples": samples, "figures": figures[i::n_jobs]} for i in range(n_jobs)]
    with ThreadPoolExecutor(n_jobs) as pool:
        stats = list(pool.map(lambda a: _run_one(python, a[1], workdir, a[0]), enumerate(jobs)))
    return {"renders": sum(s.get("renders", 0) for s in stats),
            "seconds": round(sum(s.get("seconds", 0.0) for s in stats), 2), "engine": "CYCLES (CPU)",
            "samples": samples}


def cached_folder(final: Path, fill: Callable[[Path], None], marker: str, force: bool = False) -> Path:
    """``final`` if it holds ``marker``; else ``fill(tmp)`` writes the folder (``marker`` last) and it is
    renamed into place (atomic: a concurrent reader never sees half of it)."""
    if (final / marker).exists() and not force:
        return final
    bpy_python()  # no Blender: one line now, before any folder is made
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{final.name[:20]}-tmp-", dir=final.parent))
    try:
        fill(work)
        if final.exists():
            shutil.rmtree(final)
        try:
            work.rename(final)
        except OSError:
            if not (final / marker).exists():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return final
