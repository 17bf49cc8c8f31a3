"""``select_sft``: LoRA supervised fine-tuning of SmolLM2-135M-Instruct on GSM8K-style problems with
online data selection, scored by the GSM8K metric.

Split (sft_data.py): short GSM8K problems cut into test / held-out dev / train, with ``noise`` of
the train solutions given a wrong final answer. A ``datasel:*`` backend fine-tunes LoRA adapters on
the train split (``steps`` steps, ``select`` of ``pool`` problems a step; sft_trainer.py), then
answers the test problems with greedy decoding (``max_new_tokens``).

Per sample: the three exact-match values of the gsm8k task (the core's final-number scorer,
:func:`harness.numbers.score_final_number`, which that task scores with too) and the training
record, the same on every sample: ``budget_used``, ``noisy_selected_fraction`` (share of the
trained-on problems whose answer was corrupted; 0 without noise), ``selection_seconds_per_step``
and ``dev_nll`` (mean answer-token NLL of the held-out clean solutions after training).
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from harness.numbers import FINAL_NUMBER_METRICS, score_final_number
from harness.registry import task
from harness.task import ScoreContext, Task
from harness.types import GenerationConfig, Output, Request, Sample, Score, lower, neutral, stable_hash

RECORD_METRICS = {
    "budget_used": neutral("Samples trained on"),
    "noisy_selected_fraction": lower("Corrupted share selected"),
    "selection_seconds_per_step": neutral("Selection seconds / step"),
    "dev_nll": lower("Held-out answer NLL (nats/token)"),
}


def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    base = score_final_number(sample, output)
    pred = output.prediction if isinstance(output.prediction, dict) else {}
    extra = {k: float(pred[k]) for k in RECORD_METRICS if isinstance(pred.get(k), int | float)}
    return replace(base, values={**base.values, **extra})


@task("select_sft", description="LoRA fine-tuning of SmolLM2-135M on GSM8K-style problems with online data "
      "selection at a fixed budget: GSM8K exact match, held-out NLL", family="selection")
def select_sft(steps: int = 12, pool: int = 8, select: int = 2, lr: float = 1e-3, noise: float = 0.0,
               n_test: int = 32, n_dev: int = 16, n_train: int = 0, max_chars: int = 400, max_len: int = 192,
               max_new_tokens: int = 192, lora_r: int = 4, base: str = "smollm2-135m-instruct",
               device: str = "auto", split_seed: int = 0, noise_seed: int = 0) -> Task:
    from harness.tasks.selection.sft_data import SplitSpec, build_split
    from harness.tasks.selection.sft_trainer import plan_from

    spec = SplitSpec(max_chars=int(max_chars), n_test=int(n_test), n_dev=int(n_dev), n_train=int(n_train),
                     noise=float(noise), split_seed=int(split_seed), noise_seed=int(noise_seed))
    spec.check()
    plan: dict[str, Any] = {"steps": int(steps), "pool": int(pool), "select": int(select), "lr": float(lr),
                            "max_len": int(max_len), "lora_r": int(lora_r), "base": str(base),
                            "device": str(device)}
    plan_from(plan, "random", {})  # a bad -T value is refused now, not after the model has loaded
    if int(max_new_tokens) < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    # built now (reading the shipped file takes milliseconds): a split too small for the options is a
    # one-line error of the task, not a failure inside the run
    tr, dev, test = build_split(spec)

    def train() -> list[Sample]:
        return [replace(s, metadata={**s.metadata, "sft": plan}) for s in (*tr, *dev)]

    def prompt(sample: Sample) -> Request:
        return Request(sample.messages, GenerationConfig(temperature=0.0, max_tokens=int(max_new_tokens)))

    options = {**plan, **asdict(spec), "max_new_tokens": int(max_new_tokens)}
    return Task(version="1", load=lambda: list(test), train=train, prompt=prompt, score=score,
                primary_metric="exact_match_flexible", metrics={**FINAL_NUMBER_METRICS, **RECORD_METRICS},
                content_hash=stable_hash({"task": "select_sft", **options, "v": 1}), options=options)
