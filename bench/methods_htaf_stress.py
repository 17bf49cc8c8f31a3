"""Deep Heaviside stress setting (issue 12): hard (binarised) digits accuracy of deeper Heaviside
stacks trained with HTAF vs the surrogate-gradient baselines, ratio against the straight-through
estimator (STE), the usual surrogate that is known to struggle as depth grows.

    python bench/methods_htaf_stress.py [--depths 2 8] [--epochs 30] [--seeds 2] [--hidden 128]

Uses the real backends (``htaf:heaviside`` etc.) on the methods_digits split (1347 / 450); fits are
not cached here (``cache=False``) so the seconds are training time.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import asyncio  # noqa: E402
import time  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--depths", type=int, nargs="+", default=[2, 8])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--acts", nargs="+", default=["ste", "htaf", "sigmoid", "relu"])
    ap.add_argument("--alpha", type=float, default=8.0, help="HTAF steepness a")
    ap.add_argument("--norm", action="store_true", help="BatchNorm before each binary unit")
    ap.add_argument("--alpha-end", type=float, default=None, help="anneal a linearly to this")
    args = ap.parse_args()

    import torch

    from harness.modelspec import build_model
    from harness.tasks.methods.classification import make_task

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    task = make_task("digits")
    train, test = list(task.train()), list(task.load())
    print(f"digits {len(train)}/{len(test)}, epochs={args.epochs}, seeds={args.seeds}, hidden={args.hidden}, "
          f"htaf a={args.alpha}" + (f"->{args.alpha_end}" if args.alpha_end else "") + f", norm={args.norm}")
    print("{:>5} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8}".format("depth", "act", "soft", "hard", "gap", "hard/ste",
                                                              "seconds"))
    for depth in args.depths:
        base = None
        for act in args.acts:
            model = build_model(f"{act}:heaviside", {"depth": depth, "epochs": args.epochs, "seeds": args.seeds,
                                                     "hidden": args.hidden, "progress": False, "cache": False,
                                                     "alpha": args.alpha, "alpha_end": args.alpha_end,
                                                     "norm": args.norm})
            t0 = time.perf_counter()
            model.fit(train)
            secs = time.perf_counter() - t0
            outs = asyncio.run(model.generate([task.prompt(s) for s in test]))
            n = len(test) * args.seeds
            soft = sum(c == s.target for o, s in zip(outs, test, strict=True) for c in o.prediction["soft"]) / n
            hard = sum(c == s.target for o, s in zip(outs, test, strict=True) for c in o.prediction["hard"]) / n
            base = hard if act == "ste" else base
            ratio = f"{hard / base:.3f}" if base else "-"
            print(f"{depth:>5} {act:>8} {soft:>8.4f} {hard:>8.4f} {soft - hard:>8.4f} {ratio:>9} {secs:>8.1f}")


if __name__ == "__main__":
    main()
