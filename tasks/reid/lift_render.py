"""Rendering lifted meshes: the body model built from a lifting model's predicted parameters, seen
from its predicted source camera (the re-projection CVCF compares with the source image) and from new
elevated cameras with the visibility map of the predicted source camera (what VAAS supervises).

Everything rendered here comes from predictions: the geometry, the colours (so the parts the source
image did not show are the model's own hallucination) and the camera. The folder is cached by
content (``$HARNESS_CACHE_DIR/reid/lifts-<hash>/``: the predictions, the cameras, the image size and
samples and the rendering code), or written into a folder the caller owns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.tasks.reid.blender_jobs import cache_root, cached_folder, render, render_sources
from harness.types import stable_hash

VERSION = "1"
INDEX = "index.json"


def _jobs(lifts: list[dict[str, Any]], root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    jobs, index = [], []
    for lift in lifts:
        name = lift["name"]
        novel = [{"cam": cam, "out": str(root / f"{name}_n{j}.png"), "vis_out": str(root / f"{name}_n{j}_vis.png")}
                 for j, cam in enumerate(lift.get("novel", []))]
        job: dict[str, Any] = {"params": lift["params"],
                               "views": [{"cam": lift["source_cam"], "out": str(root / f"{name}_src.png")}]}
        if novel:
            job.update({"novel": novel, "source_cam": lift["source_cam"]})
        jobs.append(job)
        index.append({"name": name, "reprojection": f"{name}_src.png",
                      "novel": [{"path": Path(n["out"]).name, "visibility": Path(n["vis_out"]).name,
                                 "elevation": n["cam"][1]} for n in novel]})
    return jobs, index


def render_lifts(lifts: list[dict[str, Any]], size: tuple[int, int] = (64, 128), samples: int = 8,
                 workers: int = 1, folder: Path | None = None) -> list[dict[str, Any]]:
    """Per lift (``name``, predicted ``params``, ``source_cam``, ``novel`` cameras): the paths of its
    re-projection and of each novel view and visibility map. ``name`` must be a plain file stem."""
    for lift in lifts:
        if not str(lift["name"]).replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"lift name {lift['name']!r} is not a plain file stem")

    def fill(work: Path) -> None:
        jobs, index = _jobs(lifts, work)
        stats = render(jobs, size, samples, workers, work)
        (work / INDEX).write_text(json.dumps({"lifts": index, "render": stats}))

    if folder is None:
        key = stable_hash({"v": VERSION, "lifts": lifts, "size": list(size), "samples": samples,
                           "sources": render_sources()})[:16]
        root = cached_folder(cache_root() / f"lifts-{key}", fill, INDEX)
    else:
        folder.mkdir(parents=True, exist_ok=True)
        fill(folder)
        root = folder
    index = json.loads((root / INDEX).read_text())["lifts"]
    return [{"name": e["name"], "reprojection": str(root / e["reprojection"]),
             "novel": [{"path": str(root / n["path"]), "visibility": str(root / n["visibility"]),
                        "elevation": n["elevation"]} for n in e["novel"]]} for e in index]
