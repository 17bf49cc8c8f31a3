"""The nvs family's measured table: gs:neural_color vs gs:sh on nvs_synthetic over seeds, and
ff:consistency with vs without 3D consistency tokens (K anchors co-refined with the image tokens;
tokens=false is the same network without that branch) on the repetitive-texture scene.

Every number comes from a real run through the harness runner (fit on the train views, render the
held-out views, score them), into a throw-away SQLite database. Per row: the mean over seeds and the
spread (min..max); then the ratio of the seed method to its baseline.

    python bench/nvs_methods.py                 # 64 px, 3 seeds, 400 steps (~25 min on 2 loaded cores)
    python bench/nvs_methods.py --quick         # 32 px, 1 seed, 60 steps, one scene (~2 min)
    python bench/nvs_methods.py --device cuda   # on a GPU machine (more steps and Gaussians fit there)
    python bench/nvs_methods.py --skip-gs       # the ff rows only (~6 min; --ff-steps 1200: ~12 min)
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

GS_METRICS = ("psnr", "ssim", "lpips_vgg", "depth_abs_rel", "depth_delta1", "chamfer", "floater_fraction",
              "n_gaussians")
FF_METRICS = ("psnr", "ssim", "lpips_vgg", "psnr_pixelsplat", "lpips_pixelsplat", "depth_abs_rel", "depth_abs_rel_med",
              "depth_delta1", "chamfer")


def run(task_options: dict[str, Any], spec: str, settings: dict[str, Any], db: str) -> tuple[dict[str, float], float]:
    from harness.runner import EvalConfig, Runner
    from harness.store.db import open_db

    t0 = time.perf_counter()
    cfg = EvalConfig(task="nvs_synthetic", model=spec, model_settings=settings, task_options=task_options,
                     progress=False)
    summary = Runner(cfg, session_factory=open_db(db)).run()
    if summary.n_errors or summary.n_unscored:
        print(f"  warning: {spec} {settings}: {summary.n_errors} errors, {summary.n_unscored} unscored")
    top = {m.name: m.value for m in summary.metrics if not m.breakdown_key}
    return top, time.perf_counter() - t0


def table(title: str, rows: dict[str, list[dict[str, float]]], metrics: tuple[str, ...], base: str, seed: str) -> None:
    print(f"\n{title}")
    print(f"{'metric':<20}" + "".join(f"{name:>30}" for name in rows) + f"{'ratio':>10}")
    for m in metrics:
        cells, means = [], {}
        for name, runs in rows.items():
            vals = [r[m] for r in runs if m in r]
            if not vals:
                cells.append(f"{'-':>30}")
                continue
            means[name] = statistics.fmean(vals)
            spread = f" ({min(vals):.3f}..{max(vals):.3f})" if len(vals) > 1 else ""
            cells.append(f"{means[name]:>14.4f}{spread:>16}")
        ratio = means[seed] / means[base] if base in means and seed in means and means[base] else float("nan")
        print(f"{m:<20}" + "".join(cells) + f"{ratio:>10.3f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first..first+seeds-1 (split a run over processes)")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--ff-steps", type=int, default=400)
    ap.add_argument("--anchors", type=int, default=64, help="ff:consistency anchor tokens K (tokens=true)")
    ap.add_argument("--rounds", type=int, default=2, help="ff:consistency co-refinement rounds (tokens=true)")
    ap.add_argument("--gaussians", type=int, default=2000)
    ap.add_argument("--scenes", default="textured,repetitive,thin")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--depth-mask", default="all", choices=("all", "rendered"),
                    help="depth pixels counted: all with a true depth (monodepth2, default) or only rendered ones")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-ff", action="store_true")
    ap.add_argument("--skip-gs", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.size, args.seeds, args.steps, args.ff_steps, args.gaussians = 32, 1, 60, 60, 300
        args.scenes = "textured"
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tmp = tempfile.mkdtemp(prefix="nvs-bench-")
    os.environ.setdefault("HARNESS_ARTIFACTS", os.path.join(tmp, "artifacts"))
    db = f"sqlite:///{tmp}/bench.db"
    one, five, _ = os.getloadavg()
    print(f"nvs_synthetic scenes={args.scenes} size={args.size}px, seeds {seeds.start}..{seeds.stop - 1}, "
          f"gs steps={args.steps} "
          f"gaussians={args.gaussians}, ff steps={args.ff_steps} anchors={args.anchors} rounds={args.rounds}, "
          f"depth mask {args.depth_mask}; load average {one:.1f}/{five:.1f} "
          f"({os.cpu_count()} cores)")
    opts = {"scenes": args.scenes, "size": args.size, "depth_mask": args.depth_mask}
    gs: dict[str, list[dict[str, float]]] = {"gs:sh": [], "gs:neural_color": []}
    for seed in seeds if not args.skip_gs else ():
        for spec in gs:
            settings = {"seed": seed, "steps": args.steps, "gaussians": args.gaussians, "device": args.device,
                        "cache": False}
            top, secs = run(opts, spec, settings, db)
            gs[spec].append(top)
            nan = float("nan")
            print(f"  {spec:<18} seed {seed}: psnr {top.get('psnr', nan):.2f}  "
                  f"abs_rel {top.get('depth_abs_rel', nan):.3f}  "
                  f"floaters {top.get('floater_fraction', nan):.3f}  ({secs:.0f} s)", flush=True)
    if not args.skip_gs:
        table("gs:neural_color vs gs:sh (mean over seeds, min..max; ratio = neural_color / sh)", gs, GS_METRICS,
              "gs:sh", "gs:neural_color")
    if args.skip_ff:
        return
    ff: dict[str, list[dict[str, float]]] = {"tokens=false": [], "tokens=true": []}
    ff_opts = {"scenes": "repetitive" if not args.quick else args.scenes, "size": args.size,
               "depth_mask": args.depth_mask}
    for seed in seeds:
        for name in ff:
            tokens = name.endswith("true")
            settings = {"seed": seed, "steps": args.ff_steps, "tokens": tokens, "device": args.device, "cache": False,
                        **({"anchors": args.anchors, "rounds": args.rounds} if tokens else {})}
            top, secs = run(ff_opts, "ff:consistency", settings, db)
            ff[name].append(top)
            print(f"  ff:consistency {name:<13} seed {seed}: psnr {top.get('psnr', float('nan')):.2f}  abs_rel "
                  f"{top.get('depth_abs_rel', float('nan')):.3f}  ({secs:.0f} s)", flush=True)
    table(f"ff:consistency on {ff_opts['scenes']}: with vs without consistency tokens (ratio = with / without)", ff,
          FF_METRICS, "tokens=false", "tokens=true")


if __name__ == "__main__":
    main()
