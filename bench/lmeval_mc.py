"""Multiple-choice samples/s: the harness's ``hf:`` scoring against lm-evaluation-harness's own ``hf`` run.

The same questions (the shipped MMLU-Redux subset, lm-eval's MMLU template: 4 one-token continuations
per question), the same model folder (the embedded SmolLM2-135M-Instruct), float32 on the CPU, the same
thread count. Both models are loaded before the clock starts; what is timed is answering the
questions:

- **lm-eval**: ``HFLM.loglikelihood`` on the task's instances (built by its TaskManager from
  ``tests/data/lmeval/parity_mmlu_redux.yaml``), at its default batch size 1 and at the harness's
  batch size;
- **harness**: the ``hf:`` backend's ``generate`` on the native ``mmlu_redux`` task's requests (one
  request of 4 pairs per question), at its default batch size.

Printed: questions/s of each, the ratio harness / lm-eval (target: >= 1.0) and the largest
loglikelihood difference between the two (they must agree, or the speed means nothing). Each pass
runs ``--reps`` times alternating; the best is kept (a shared machine's least disturbed pass).

    python bench/lmeval_mc.py                 # 285 questions, 2 threads
    python bench/lmeval_mc.py -n 60 --threads 1 --reps 1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=285, help="questions (of 285)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16, help="the harness's batch size (its CPU default)")
    args = parser.parse_args()
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.chdir(ROOT)  # the lm-eval YAML names its data relative to the repository
    import torch
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from harness.models.hf_embedded import ensure_converted
    from harness.modelspec import build_model
    from harness.registry import lookup

    torch.set_num_threads(args.threads)
    folder = str(ensure_converted("smollm2-135m-instruct"))
    task = TaskManager(include_path=str(ROOT / "tests" / "data" / "lmeval")).load(
        ["harness_parity_mmlu_redux"])["tasks"]["harness_parity_mmlu_redux"]
    task.set_config(key="num_fewshot", value=0)
    task.build_all_requests(limit=args.n, rank=0, world_size=1)
    instances = [Instance("loglikelihood", {}, i.args, k) for k, i in enumerate(task.instances)]

    native = lookup("task", "mmlu_redux").factory()
    requests = [native.prompt(s) for s in list(native.load())[: args.n]]
    ours = build_model("hf:smollm2-135m-instruct", {"threads": args.threads, "batch_size": args.batch_size},
                       {"text"})
    refs = {bs: HFLM(pretrained=folder, dtype="float32", device="cpu", batch_size=bs)
            for bs in sorted({1, args.batch_size})}

    best: dict[str, float] = {}
    values: dict[str, list[float]] = {}
    for _ in range(args.reps):
        for bs, lm in refs.items():
            torch.set_num_threads(args.threads)
            t0 = time.perf_counter()
            got = lm.loglikelihood(instances, disable_tqdm=True)
            key = f"lm-eval hf, batch {bs}"
            best[key] = min(best.get(key, float("inf")), time.perf_counter() - t0)
            values[key] = [float(v) for v, _ in got]
        t0 = time.perf_counter()
        outs = asyncio.run(ours.generate(requests))
        key = f"harness hf:, batch {args.batch_size}"
        best[key] = min(best.get(key, float("inf")), time.perf_counter() - t0)
        values[key] = [ll.logprob for o in outs for ll in (o.loglikelihoods or [])]

    harness_key = f"harness hf:, batch {args.batch_size}"
    print(f"{args.n} questions ({len(instances)} continuations), SmolLM2-135M float32, {args.threads} threads, "
          f"best of {args.reps}")
    for key, seconds in best.items():
        line = f"  {key:28s} {args.n / seconds:8.2f} questions/s  ({seconds:.2f} s)"
        if key != harness_key:
            diff = max(abs(a - b) for a, b in zip(values[key], values[harness_key], strict=True))
            line += f"   harness / this = {seconds / best[harness_key]:.2f}x   max |dlogprob| = {diff:.2e}"
        print(line)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
