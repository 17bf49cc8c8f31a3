"""HTAF's spiking and binary-weight networks: digits accuracy of ``snn`` (leaky integrate-and-fire,
spike counts as logits) and ``bnn`` (binary weights and activations, BatchNorm) trained through the
HTAF surrogate against the straight-through estimator (STE) and the steep sigmoid, ratio of the hard
(exactly binary) accuracy against STE's.

    OMP_NUM_THREADS=1 python bench/methods_htaf_snn_bnn.py [--archs snn bnn] [--epochs 5 30] [--seeds 2]
        [--depths 1] [--hidden 128] [--steps 8] [--decay 0.9] [--threshold 1.0] [--alpha 8]

Uses the real backends (``htaf:snn`` etc.) on the methods_digits split (1347 / 450); fits are not
cached here (``cache=False``) so the seconds are training time. Soft: each step replaced by its
surrogate's value (see ``tasks/methods/backends/htaf_snn.py``); hard: the binary network.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import asyncio  # noqa: E402
import time  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--archs", nargs="+", default=["snn", "bnn"], choices=["snn", "bnn"])
    ap.add_argument("--acts", nargs="+", default=["ste", "htaf", "sigmoid"], choices=["ste", "htaf", "sigmoid"])
    ap.add_argument("--epochs", type=int, nargs="+", default=[5, 30])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--depths", type=int, nargs="+", default=[1])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--steps", type=int, default=8, help="snn time steps")
    ap.add_argument("--decay", type=float, default=0.9, help="snn membrane leak")
    ap.add_argument("--threshold", type=float, default=1.0, help="snn firing threshold")
    ap.add_argument("--alpha", type=float, default=8.0, help="HTAF steepness a")
    args = ap.parse_args()

    import torch

    from harness.modelspec import build_model
    from harness.tasks.methods.classification import make_task

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    task = make_task("digits")
    train, test = list(task.train()), list(task.load())
    print(f"digits {len(train)}/{len(test)}, seeds={args.seeds}, hidden={args.hidden}, htaf a={args.alpha}; "
          f"snn steps={args.steps} decay={args.decay} threshold={args.threshold}")
    print("{:>4} {:>5} {:>6} {:>8} {:>8} {:>8} {:>8} {:>9} {:>15} {:>8}".format(
        "arch", "depth", "epochs", "act", "soft", "hard", "gap", "hard/ste", "hard per seed", "seconds"))
    for arch in args.archs:
        for depth in args.depths:
            for epochs in args.epochs:
                base = None
                for act in args.acts:
                    settings = {"depth": depth, "epochs": epochs, "seeds": args.seeds, "hidden": args.hidden,
                                "alpha": args.alpha, "progress": False, "cache": False}
                    if arch == "snn":
                        settings.update(steps=args.steps, decay=args.decay, threshold=args.threshold)
                    model = build_model(f"{act}:{arch}", settings)
                    t0 = time.perf_counter()
                    model.fit(train)
                    secs = time.perf_counter() - t0
                    outs = asyncio.run(model.generate([task.prompt(s) for s in test]))
                    per_seed = [sum(o.prediction["hard"][k] == s.target for o, s in zip(outs, test, strict=True))
                                / len(test) for k in range(args.seeds)]
                    n = len(test) * args.seeds
                    soft = sum(c == s.target for o, s in zip(outs, test, strict=True)
                               for c in o.prediction["soft"]) / n
                    hard = sum(per_seed) / args.seeds
                    base = hard if act == "ste" else base
                    ratio = f"{hard / base:.3f}" if base else "-"
                    seeds = "/".join(f"{h:.4f}" for h in per_seed)
                    print(f"{arch:>4} {depth:>5} {epochs:>6} {act:>8} {soft:>8.4f} {hard:>8.4f} {soft - hard:>8.4f} "
                          f"{ratio:>9} {seeds:>15} {secs:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
