"""The ``datasel:*`` backends on ``select_sft``: fit = LoRA fine-tuning with online selection, then
the test problems are answered by greedy decoding through the project's transformers backend.

The task's train split says it is an SFT split: every train sample carries the training plan in
``metadata["sft"]`` (the task's ``-T`` options) and its role in ``metadata["split"]`` (``train``,
or ``dev``: held out, its clean solutions measure the fine-tuned loss). The backend's explicit
``-M`` settings override the selection keys of the plan (sft_trainer.OVERRIDABLE).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.types import Output, Request, Sample

# the record fields every reply carries (the scorer turns them into per-sample values)
RECORD_KEYS = ("budget_used", "noisy_selected_fraction", "selection_seconds_per_step", "dev_nll")


def is_sft_split(train: Sequence[Sample]) -> bool:
    return bool(train) and isinstance((train[0].metadata or {}).get("sft"), dict)


def conversation(sample: Sample) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.text_content} for m in sample.messages]


def examples(samples: Sequence[Sample], split: str) -> list[Any]:
    from harness.tasks.selection.sft_trainer import SFTExample

    return [SFTExample(conversation(s), str(s.metadata["train_solution"]), bool(s.metadata.get("noisy", False)))
            for s in samples if s.metadata.get("split", "train") == split]


@dataclass
class SFTFit:
    method: str
    settings: dict[str, Any] = field(default_factory=dict)
    hf: Any = None
    record: dict[str, Any] = field(default_factory=dict)
    fit_error: str | None = None

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        from harness.models.hf import ModelLoadError
        from harness.tasks.selection.sft_trainer import plan_from, train_sft

        try:
            plan = plan_from(dict(train[0].metadata["sft"]), self.method, self.settings)
            result = train_sft(plan, examples(train, "train"), examples(train, "dev"))
        except (ValueError, ModelLoadError) as exc:
            self.hf, self.fit_error = None, f"fit failed: {exc}"
            return {"error": self.fit_error}
        # merged for decoding: the LoRA update folded into the base weights, no adapter overhead
        result.hf.hf_model = result.hf.hf_model.merge_and_unload().eval()
        result.hf.cacheable = False
        self.hf, self.record = result.hf, result.record
        return self.record

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        if self.hf is None:
            reason = self.fit_error or f"datasel:{self.method} has not been fitted (the task needs a train split)"
            return [Output(error=reason) for _ in requests]
        t0 = time.perf_counter()
        outs = await self.hf.generate(requests)
        keep = {k: self.record[k] for k in RECORD_KEYS if k in self.record}
        # every row carries the record; the per-step pools and picks stay out of it (they grow with steps)
        summary = {k: v for k, v in self.record.items() if k not in ("pools", "picks")}
        for o in outs:
            if o.error is None:
                o.prediction = dict(keep)
                o.details = {**(o.details or {}), "fit": summary}
        self.record["generate_seconds"] = time.perf_counter() - t0
        return outs
