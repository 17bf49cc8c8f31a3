"""``dsgg-ft:BASE`` -- a causal LM fine-tuned (LoRA) on the task's train split, with or without
Importance-Aware Fine-tuning (``-M iaf=true|false``), answering test prompts by greedy generation.

``BASE`` is an embedded model name (default ``smollm2-135m-instruct``) or a local transformers folder.
The fit sees only the train samples the runner hands to :meth:`FineTuned.fit` (their prompts and
annotations, through :func:`ft_data.train_examples`); test prompts reach :meth:`FineTuned.generate` as
requests, which carry no answer. Replies go through the task's usual parser and scoring.

IAF weights each reply token by the importance of the relation it belongs to (a reconstruction: the
paper's text is not public; see :mod:`ft_data`); ``iaf=false`` is plain fine-tuning (uniform weights).
Fits are cached (``harness.fit_cache``, kind ``dsgg-ft``): a rerun with the same base, settings and
train split loads the LoRA weights instead of training. The model is a text LM: it reads the prompt's
text (video parts are dropped), and it trains on the ``predcls`` prompt (objects named, relations
grounded to the annotated boxes), so use ``-T setting=predcls`` (the default).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Annotated, Any

from pydantic import Field

from harness import fit_cache
from harness.backend_settings import PositiveInt, Setting
from harness.model import Backend
from harness.modelspec import validate_settings
from harness.registry import model
from harness.tasks.dsgg.ft_data import REPLY_VERSION, Example, check_split, train_examples
from harness.tasks.dsgg.ft_train import FitPlan, attach_lora, first_adapted, prefix_states, train
from harness.types import Message, Output, Part, Request, Sample

DEFAULT_BASE = "smollm2-135m-instruct"
FT_SETTINGS = {
    "iaf": Setting(bool, True, "importance-aware fine-tuning (false: plain fine-tuning, uniform token weights)"),
    "steps": Setting(PositiveInt, 48, "optimiser steps"),
    "batch": Setting(PositiveInt, 2, "train videos per step"),
    "lr": Setting(Annotated[float, Field(gt=0, le=1)], 5e-3, "AdamW learning rate", "a number in (0, 1]"),
    "rank": Setting(PositiveInt, 8, "LoRA rank (alpha = 2 x rank)"),
    "layers": Setting(PositiveInt, 6, "LoRA on the top this many decoder layers (the rest stay frozen)"),
    "train_limit": Setting(PositiveInt | None, None, "fit on the first N train videos only (default: all)"),
    "device": Setting(str, "cpu", "cpu, cuda or cuda:N"),
    "batch_size": Setting(PositiveInt, 16, "test prompts per generate call"),
    "close_truncated": Setting(bool, False, "a reply cut at the token cap keeps its complete relations and "
                                            "is closed into valid JSON (counted in details); off: a parse error"),
    # the generation seed every backend takes; here it also seeds the fit (greedy decoding ignores it)
    "seed": Setting(int, 0, "the fit's seed (LoRA initialisation, batch order)"),
}
# reply budget at test time: the longest training reply times this, plus a margin (a model that never
# closes its JSON stops there instead of running to the task's 2048 tokens)
REPLY_SLACK, REPLY_MARGIN = 1.5, 32


def _text_only(request: Request) -> Request:
    msgs = [Message(m.role, [Part("text", m.text_content)]) for m in request.messages]
    return replace(request, messages=msgs)


@dataclass
class FineTuned(Backend):
    plan: FitPlan
    train_limit: int | None = None
    spec: str = ""
    batch_size: int = 16
    cacheable: bool = False  # replies depend on the fit, not on the request alone
    modalities: frozenset[str] = field(default_factory=lambda: frozenset({"text", "video"}))
    close_truncated: bool = False
    hf: Any = None
    reply_cap: int = 0
    record: dict[str, Any] = field(default_factory=dict)

    def fit(self, train_split: Sequence[Sample]) -> dict[str, Any]:
        """LoRA fit on the train split (or the cached one); leaves a merged model for decoding."""
        import torch
        from peft import get_peft_model_state_dict, set_peft_model_state_dict

        from harness.models.hf import load

        t0 = time.perf_counter()
        train_split = list(train_split)[: self.train_limit] if self.train_limit else list(train_split)
        check_split(train_split)  # a wrong split is one line before the model loads
        hf = load(self.plan.base, dtype="float32", device=self.plan.device, batch_size=self.batch_size)
        examples, summary = train_examples(hf.tokenizer, train_split, self.plan.iaf)
        task_hash = fit_cache.samples_hash(train_split)
        key = fit_cache.fit_key(backend="dsgg-ft", settings=self.plan.fitted_settings(), task_hash=task_hash,
                                train=_digest(examples), seed=self.plan.seed, extra={"reply": REPLY_VERSION})
        peft_model = attach_lora(hf.hf_model, self.plan)
        cached = fit_cache.load(key, kind="dsgg-ft",
                                restore=lambda s: _restore(peft_model, s, set_peft_model_state_dict))
        if cached is not None:
            record = {**cached, "from_cache": True}
        else:
            states = self._prefix(peft_model.get_base_model(), examples, task_hash)
            torch.manual_seed(self.plan.seed)
            record = {**summary, **train(peft_model, self.plan, examples, states), "from_cache": False}
            lora = {k: v.detach().cpu().clone() for k, v in get_peft_model_state_dict(peft_model).items()}
            fit_cache.save(key, {"lora": lora, "record": record}, kind="dsgg-ft", format="torch")
        # decoding with the LoRA update folded into the base weights: no adapter overhead per token
        hf.hf_model = peft_model.merge_and_unload().eval()
        hf.cacheable = False
        self.hf = hf
        self.reply_cap = int(REPLY_SLACK * record["reply_tokens_max"]) + REPLY_MARGIN
        self.record = {**record, "plan": asdict(self.plan), "fit_seconds": time.perf_counter() - t0,
                       "reply_cap": self.reply_cap}
        return self.record

    def _prefix(self, causal_lm: Any, examples: list[Example], task_hash: str) -> list[Any]:
        """The frozen layers' outputs for every example, from the cache when this base, layer split and
        train replies were seen before (they do not depend on iaf, seed, steps or lr)."""
        start = first_adapted(causal_lm, self.plan)
        key = fit_cache.fit_key(backend="dsgg-ft-prefix", settings={"base": self.plan.base, "start": start},
                                task_hash=task_hash, train=_digest(examples, weights=False), seed=0,
                                extra={"reply": REPLY_VERSION})
        cached = fit_cache.load(key, kind="dsgg-ft-prefix", restore=lambda s: _states(s, examples))
        if cached is not None:
            return [s.to(causal_lm.device) for s in cached]
        states = prefix_states(causal_lm, start, examples)
        fit_cache.save(key, {"states": [s.cpu() for s in states]}, kind="dsgg-ft-prefix", format="torch")
        return states

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        if self.hf is None:
            return [Output(error=f"{self.spec} has not been fitted (the task needs a train split)") for _ in requests]
        capped = [replace(r, config=replace(r.config, max_tokens=min(int(r.config.max_tokens), self.reply_cap)))
                  for r in map(_text_only, requests)]
        outs = await self.hf.generate(capped)
        fit = {k: self.record[k] for k in ("train_nll_before", "train_nll_after", "from_cache", "reply_cap")
               if k in self.record}
        for o in outs:
            details = {**(o.details or {}), "fit": fit}
            if self.close_truncated and o.text and details.get("finish_reason") == "length":
                closed = close_truncated(o.text)
                if closed is not None:
                    o.text, details["closed_truncated"] = closed, True
            o.details = details
        return outs


def close_truncated(text: str) -> str | None:
    """A reply cut inside its ``{"relations":[...`` list, closed after its last complete relation
    (``]}`` appended), or None when no relation is complete. Works on the reply alone."""
    import json

    start = text.rfind('{"relations":[')
    if start < 0:
        return None
    decoder, pos, end = json.JSONDecoder(), start + len('{"relations":['), None
    while True:
        while pos < len(text) and text[pos] in " ,\n":
            pos += 1
        try:
            value, nxt = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
        if not isinstance(value, dict):
            break
        pos = end = nxt
    return None if end is None else text[:end] + "]}"


def _digest(examples: Sequence[Example], weights: bool = True) -> str:
    """The train set as fitted: token ids, prompt lengths and (``weights``) the token weights of every
    example. The frozen-layer states depend on the tokens alone, so their key leaves the weights out."""
    from harness.types import stable_hash

    return stable_hash([[list(e.ids), e.n_prompt, [round(w, 6) for w in e.weights] if weights else None]
                        for e in examples])


def _restore(peft_model: Any, state: dict[str, Any], setter: Any) -> dict[str, Any]:
    result = setter(peft_model, state["lora"])
    if getattr(result, "unexpected_keys", None):
        raise ValueError(f"unexpected LoRA keys {result.unexpected_keys[:3]}")
    return dict(state["record"])


def _states(state: dict[str, Any], examples: Sequence[Example]) -> list[Any]:
    states = list(state["states"])
    if len(states) != len(examples) or any(s.shape[0] != len(e.ids) for s, e in zip(states, examples, strict=True)):
        raise ValueError("prefix states do not match the examples")
    return states


def spec_of(base: str, plan: FitPlan, **more: Any) -> str:
    """The spec string: the base and every setting that differs from its default (run names keep them apart)."""
    values = {**asdict(plan), **more}
    keyed = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in values.items()
             if k in FT_SETTINGS and k != "device" and v != FT_SETTINGS[k].default]
    return f"dsgg-ft:{base}" + (f"?{'&'.join(keyed)}" if keyed else "")


@model("dsgg-ft", kind="method", settings=FT_SETTINGS, strict=True,
       description="DSGG: LoRA fine-tune of a causal LM on the train split, importance-aware (iaf=true) or plain")
def dsgg_ft(path: str | None = None, **settings: Any) -> FineTuned:
    settings = validate_settings("dsgg-ft", settings, FT_SETTINGS)  # a factory called directly is checked too
    base = path or DEFAULT_BASE
    get = lambda k: settings.get(k, FT_SETTINGS[k].default)  # noqa: E731
    device = str(get("device"))
    if device != "cpu" and not device.startswith("cuda"):
        raise ValueError(f"dsgg-ft: device must be cpu, cuda or cuda:N, got {device!r}")
    plan = FitPlan(base=base, iaf=bool(get("iaf")), steps=get("steps"), batch=get("batch"), lr=float(get("lr")),
                   rank=get("rank"), layers=get("layers"), seed=int(get("seed") or 0), device=device)
    limit, close = get("train_limit"), bool(get("close_truncated"))
    return FineTuned(plan=plan, train_limit=limit, spec=spec_of(base, plan, train_limit=limit, close_truncated=close),
                     batch_size=get("batch_size"), close_truncated=close)
