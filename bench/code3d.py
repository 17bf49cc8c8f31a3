"""Seconds per 3DCodeBench sample: warm Blender worker pool versus a fresh Blender process per sample.

Both run the same scripts (the shipped reference objects, cycled) through the same executor and
metrics: sandboxed exec + GLB export + four Cycles views + surface sampling/parts (in the worker) +
Chamfer/F-score/image similarity (host), in one run, alternating the two modes per round. Baseline:
``fresh`` (``BlenderPool(fresh=True)``: a new sandboxed Blender process per sample, which pays the
``import bpy`` start-up every time). Reported: median seconds per sample for each, and the ratio
fresh / warm (how many times faster the warm pool is).

    python bench/code3d.py [--samples 10] [--size 128] [--spp 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=10, help="samples per mode")
    parser.add_argument("--size", type=int, default=128, help="render size (px)")
    parser.add_argument("--spp", type=int, default=8, help="Cycles samples per pixel")
    args = parser.parse_args()

    from harness.tasks.code3d.executor import BlenderPool, RenderOptions
    from harness.tasks.code3d.geometry import shape_scores
    from harness.tasks.code3d.images import view_similarity

    scripts = sorted((ROOT / "tasks" / "code3d" / "references").glob("*.py"))
    sources = [p.read_text() for p in scripts]
    render = RenderOptions(size=args.size, samples=args.spp)
    out = Path(tempfile.mkdtemp(prefix="bench-code3d-"))
    with BlenderPool(render=render) as warm, BlenderPool(render=render, fresh=True) as fresh:
        t0 = time.perf_counter()
        warm.warm_up()
        warm_start = time.perf_counter() - t0
        ref = warm.execute_sync(sources[0], out / "ref")
        ref_points, ref_thumbs = np.load(ref.points), np.load(ref.thumbs)
        phases: dict[str, list[float]] = {}

        def one(pool: BlenderPool, i: int, tag: str) -> float:
            t = time.perf_counter()
            result = pool.execute_sync(sources[i % len(sources)], out / f"{tag}{i}")
            assert result.ok, result.error
            if tag == "w":
                for name, secs in result.times.items():
                    phases.setdefault(name, []).append(secs)
                phases.setdefault("other (fork, copy, host metrics)", []).append(
                    time.perf_counter() - t - sum(result.times.values())
                )
            shape_scores(np.load(result.points), ref_points)
            view_similarity(np.load(result.thumbs), ref_thumbs)
            return time.perf_counter() - t

        times: dict[str, list[float]] = {"warm": [], "fresh": []}
        for i in range(args.samples):
            times["warm"].append(one(warm, i, "w"))
            times["fresh"].append(one(fresh, i, "f"))
    w, f = statistics.median(times["warm"]), statistics.median(times["fresh"])
    print(f"code3d bench: {args.samples} samples per mode, {args.size} px, {args.spp} spp, 1 worker, "
          f"scripts cycled over {len(sources)} reference objects")  # fmt: skip
    print(f"  warm pool start-up (import bpy, once): {warm_start:.2f} s")
    print(
        f"  warm pool:           {w:.2f} s/sample (median; min {min(times['warm']):.2f}, max {max(times['warm']):.2f})"
    )
    print("    phases (median s): " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in phases.items()))
    print(f"  fresh process (baseline): {f:.2f} s/sample (median; min {min(times['fresh']):.2f}, "
          f"max {max(times['fresh']):.2f})")  # fmt: skip
    print(f"  ratio fresh/warm: {f / w:.2f}x (warm pool is that many times faster per sample)")


if __name__ == "__main__":
    main()
