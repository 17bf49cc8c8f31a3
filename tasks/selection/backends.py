"""Online-selection backends trained on the task's (noisy) train split: ``datasel:gfv`` (greedy Gated
Fisher Volume), ``datasel:random``, ``datasel:loss``, ``datasel:gradnorm``, ``datasel:entropy`` and
``datasel:full`` (train on every candidate: the budget is the whole pool), and the holdout baselines
``datasel:rholoss`` (RHO-LOSS) and ``datasel:greats`` (GREATS), see baselines.py (digits only).

Settings (``-M``): ``pool`` (64 candidates a step), ``select`` (16 kept a step: the per-step budget;
larger than the pool is a one-line error), ``steps`` (150), ``hidden`` (32), ``lr`` (1e-2), ``lam``
(1), ``beta`` (4), ``proj`` (256, random projection of u; 0 none), ``fisher_decay`` (0.95),
``momentum_gate`` (false), ``ref`` (``holdout``: gfv's descent reference is the holdout loss
gradient; ``pool``: the pool's mean gradient), ``holdout`` (200 train samples set aside for gfv,
rholoss and greats), ``il_steps`` (300, rholoss), ``seed`` (0). The backend is fitted on the train
split only; the evaluation split's labels are never read. Replies: ``prediction`` = class, and the training record
(``budget_used``, ``noisy_selected_fraction``, ``selection_seconds_per_step``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Annotated, Any

from pydantic import Field

from harness.backend_settings import NonNegativeInt, PositiveInt, Probability, Setting
from harness.model import Backend
from harness.modelspec import validate_settings
from harness.registry import model
from harness.tasks.selection.trainer import SelectConfig
from harness.types import Output, Request, Sample, Usage, options_part

_DEFAULT = SelectConfig()
SETTINGS = {
    "pool": Setting(PositiveInt, _DEFAULT.pool, "candidates a step"),
    "select": Setting(PositiveInt, _DEFAULT.select, "kept a step: the per-step budget (at most pool)"),
    "steps": Setting(PositiveInt, _DEFAULT.steps, "selection steps"),
    "hidden": Setting(PositiveInt, _DEFAULT.hidden, "hidden units of the classifier"),
    "lr": Setting(Annotated[float, Field(gt=0)], _DEFAULT.lr, "learning rate"),
    "lam": Setting(float, _DEFAULT.lam, "gfv: weight of the volume term"),
    "beta": Setting(float, _DEFAULT.beta, "gfv: gate sharpness"),
    "proj": Setting(NonNegativeInt, _DEFAULT.proj, "random projection dimension of u (0: none)"),
    "fisher_decay": Setting(Probability, _DEFAULT.fisher_decay, "decay of the running Fisher estimate"),
    "momentum_gate": Setting(bool, _DEFAULT.momentum_gate, "gate against the running mean of trained-on gradients"),
    # a string, checked with the config (check_config words it "ref must be one of holdout, pool")
    "ref": Setting(str, _DEFAULT.ref, "gfv's descent reference: holdout (the holdout loss gradient) or pool "
                   "(the pool's mean gradient)"),
    "holdout": Setting(NonNegativeInt, _DEFAULT.holdout, "train samples set aside for gfv (ref=holdout), rholoss "
                       "and greats"),
    "il_steps": Setting(PositiveInt, _DEFAULT.il_steps, "rholoss: Adam steps of the irreducible-loss model"),
    "seed": Setting(int, _DEFAULT.seed, "training seed"),
}


def _features(messages: Any) -> list[float]:
    return [float(v) for v in options_part(messages, "features", "no feature vector in the request")["features"]]


@dataclass
class SelectionModel(Backend):
    method: str
    settings: dict[str, Any] = field(default_factory=dict)
    spec: str = ""
    batch_size: int = 4096
    cacheable: bool = False  # predictions depend on the fitted weights
    net: Any = None
    record: dict[str, Any] = field(default_factory=dict)
    fit_error: str | None = None
    sft: Any = None  # on select_sft's split: the LoRA fine-tuning path (sft_backend.py)

    def config(self) -> SelectConfig:
        kw = {f.name: self.settings[f.name] for f in fields(SelectConfig)
              if f.name in self.settings and f.name != "method"}
        return SelectConfig(method=self.method, **kw)

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        import torch

        from harness.tasks.selection.sft_backend import SFTFit, is_sft_split
        from harness.tasks.selection.trainer import train_select

        if is_sft_split(train):
            self.sft = SFTFit(self.method, dict(self.settings))
            return self.sft.fit(train)
        try:
            X = torch.tensor([_features(s.messages) for s in train], dtype=torch.float32)
            y = torch.tensor([int(s.target) for s in train])
            noisy = torch.tensor([bool(s.metadata.get("noisy", False)) for s in train])
            torch.set_num_threads(1)
            t0 = time.perf_counter()
            self.net, rec = train_select(self.config(), X, y, noisy, int(y.max()) + 1)
            self.record = {**rec, "seconds": time.perf_counter() - t0}
        except ValueError as exc:
            self.net, self.fit_error = None, f"fit failed: {exc}"
            return {"error": self.fit_error}
        return self.record

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        import torch

        if self.sft is not None:
            return list(await self.sft.generate(requests))
        if self.net is None:
            reason = self.fit_error or f"{self.spec} has not been fitted (the task needs a train split)"
            return [Output(error=reason) for _ in requests]
        t0 = time.perf_counter()
        outs: list[Output] = []
        for r in requests:
            try:
                x = torch.tensor([_features(r.messages)], dtype=torch.float32)
            except ValueError as exc:
                outs.append(Output(error=str(exc)))
                continue
            with torch.no_grad():
                c = int(self.net(x).argmax(1))
            keep = ("budget_used", "noisy_selected_fraction", "selection_seconds_per_step", "selection_digest")
            outs.append(Output(text=str(c), prediction={"class": c, **{k: self.record[k] for k in keep}},
                               details={"fit": self.record}))
        per = (time.perf_counter() - t0) / max(len(outs), 1)
        for o in outs:
            o.usage = Usage(calls=1, seconds=per)
        return outs


@model("datasel", kind="method", settings=SETTINGS, strict=True,
       description="Online data selection under a fixed budget, trained on the train split: "
       "datasel:gfv|random|loss|gradnorm|entropy|full|rholoss|greats")
def datasel_backend(path: str | None, **settings: Any) -> SelectionModel:
    from harness.tasks.selection.trainer import ALL_SELECTORS, check_config

    if path not in ALL_SELECTORS:
        raise ValueError(f"unknown selector {path!r}; choose one of {', '.join(ALL_SELECTORS)}")
    settings = validate_settings(f"datasel:{path}", settings, SETTINGS)  # a factory called directly is checked too
    check_config(SelectionModel(path, dict(settings)).config())
    shown = "&".join(f"{k}={v}" for k, v in sorted(settings.items()))
    return SelectionModel(path, dict(settings), f"datasel:{path}" + (f"?{shown}" if shown else ""))
