"""Diversity combining: N samples of the channel(s), then selection / uniform / weighted combining.

- ``select``  selection combining (SC): judge every sample, return the argmax.
- ``egc``     equal-gain (uniform) combining: a synthesis call weighs all samples equally
              (``combine=answer``: plain vote over extracted answers, no synthesis call).
- ``mrc``     maximal-ratio (quality-weighted) combining: a synthesis call sees quality-ranked
              samples (``combine=answer``: vote weighted by judge quality, no synthesis call).
- ``vote`` / ``self_consistency``  majority vote over extracted answers (no judge).
- ``wbon``    discrete weighted best-of-N: cluster samples by extracted answer, cluster weight =
              sum of softmax(q / T) over members, return the best-q member of the heaviest cluster.

Reference-code defaults: N=5 samples at temperature 0.7; synthesis at 0.1 (MRC) / 0.2 (EGC); MRC
skips synthesis when every other sample scored below half the best; MRC and EGC fall back to the
best single sample when the judged synthesis scores below it (combining never worse than SC);
softmax temperature 0.5. Differences from the reference: wbon clusters by the task's answer
extractor instead of one extra "voter" LLM call (exact for answer-extractable tasks, and free).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from harness.backend_settings import Setting
from harness.models.operators.base import Candidate, Episode, Operator, plurality
from harness.registry import model


def _summary(cands: list[Candidate]) -> list[dict[str, Any]]:
    return [{"answer": c.answer, "quality": c.quality} for c in cands]


class _Sampling(Operator):
    parameters = {"n": Setting(int, 5, "samples drawn (1 to 64)"),
                  "temperature": Setting(float, 0.7, "sampling temperature of the samples (0 to 2)")}

    def validate(self) -> None:
        self.check_int("n", 1, 64)
        self.check_float("temperature", 0.0, 2.0)

    async def draw(self, ep: Episode) -> list[Candidate]:
        cands = await ep.sample(int(self.params["n"]), float(self.params["temperature"]))
        ep.info["candidates"] = _summary(cands)
        return cands


class Select(_Sampling):
    name = "select"
    uses_judge = True

    async def run(self, ep: Episode) -> str:
        cands = await self.draw(ep)
        await ep.judge(cands)
        best = max(cands, key=lambda c: c.q(-1.0))
        ep.info.update(candidates=_summary(cands), chosen=best.index)
        return best.text


class Vote(_Sampling):
    name = "vote"

    async def run(self, ep: Episode) -> str:
        cands = await self.draw(ep)
        winner, tally = plurality([c.answer for c in cands])
        chosen = next((c for c in cands if winner is not None and c.answer == winner), cands[0])
        ep.info.update(votes=tally, chosen=chosen.index, answer=winner,
                       agreement=(tally.get(winner, 0.0) / len(cands)) if winner is not None else 0.0)
        return chosen.text


class SelfConsistency(Vote):
    name = "self_consistency"


class _Combining(_Sampling):
    uses_judge = True
    weighted = True
    synthesis_temperature = 0.1

    parameters = {**_Sampling.parameters,
                  "combine": Setting(Literal["synthesis", "answer"], "synthesis",
                                     "synthesis (a call writes one answer from the samples) or answer (a vote over "
                                     "their extracted answers, no synthesis call)")}

    async def run(self, ep: Episode) -> str:
        cands = await self.draw(ep)
        if self.params["combine"] == "answer":
            return self._answer_level(ep, cands)
        await ep.judge(cands)
        ranked = sorted(cands, key=lambda c: c.q(), reverse=True)
        best = ranked[0]
        ep.info.update(candidates=_summary(cands))
        if self.weighted and all(c.q() < 0.5 * best.q() for c in ranked[1:]):
            ep.info["combined"] = "best dominates: selection"
            return best.text
        merged = await ep.synthesize(cands, self.weighted, self.synthesis_temperature)
        await ep.judge([merged], note="synthesis")
        if merged.q() < best.q():
            ep.info["combined"] = f"synthesis q={merged.quality} < best q={best.quality}: selection"
            return best.text
        ep.info["combined"] = f"synthesis q={merged.quality}"
        return merged.text

    def _answer_level(self, ep: Episode, cands: list[Candidate]) -> str:
        raise NotImplementedError


class EGC(_Combining):
    name = "egc"
    weighted = False
    synthesis_temperature = 0.2

    def _answer_level(self, ep: Episode, cands: list[Candidate]) -> str:
        winner, tally = plurality([c.answer for c in cands])
        chosen = next((c for c in cands if winner is not None and c.answer == winner), cands[0])
        ep.info.update(votes=tally, chosen=chosen.index, answer=winner)
        return chosen.text

    async def run(self, ep: Episode) -> str:
        if self.params["combine"] == "answer":  # uniform weights need no judge
            cands = await self.draw(ep)
            return self._answer_level(ep, cands)
        return await super().run(ep)


class MRC(_Combining):
    name = "mrc"

    async def run(self, ep: Episode) -> str:
        if self.params["combine"] == "answer":
            cands = await self.draw(ep)
            await ep.judge(cands)
            weights = [c.q() for c in cands]
            winner, tally = plurality([c.answer for c in cands], weights)
            members = [c for c in cands if winner is not None and c.answer == winner]
            chosen = max(members, key=lambda c: c.q()) if members else max(cands, key=lambda c: c.q())
            ep.info.update(candidates=_summary(cands), weighted_votes=tally, chosen=chosen.index, answer=winner)
            return chosen.text
        return await super().run(ep)


class WeightedBoN(_Sampling):
    name = "wbon"
    uses_judge = True
    parameters = {**_Sampling.parameters,
                  "softmax_t": Setting(float, 0.5, "softmax temperature of the quality weights (0.001 to 100)")}

    def validate(self) -> None:
        super().validate()
        self.check_float("softmax_t", 1e-3, 100.0)

    async def run(self, ep: Episode) -> str:
        cands = await self.draw(ep)
        await ep.judge(cands)
        t = float(self.params["softmax_t"])
        qs = [c.q() for c in cands]
        top = max(qs)
        exps = [math.exp((q - top) / t) for q in qs]
        z = sum(exps)
        weights = [e / z for e in exps]
        # samples without an extractable answer form singleton clusters keyed by their index
        keys = [c.answer if c.answer is not None else f"#unparsed{c.index}" for c in cands]
        winner, tally = plurality(keys, weights)
        members = [c for c, k in zip(cands, keys, strict=True) if k == winner]
        chosen = max(members, key=lambda c: c.q())
        ep.info.update(candidates=_summary(cands), cluster_weights=tally, chosen=chosen.index, answer=chosen.answer)
        return chosen.text


def _factory(cls: type[Operator]):  # type: ignore[no-untyped-def]
    def make(*models: Any, **params: Any) -> Operator:
        return cls(*models, **params)

    make.__doc__ = cls.__doc__
    return make


model("select", operator=True, settings=Select.declared(), strict=True,
      description="Selection combining: N samples, judge each, keep the best (n=5)")(_factory(Select))
model("vote", operator=True, settings=Vote.declared(), strict=True,
      description="Majority vote over extracted answers of N samples (n=5, extract=auto)")(_factory(Vote))
model("self_consistency", operator=True, settings=SelfConsistency.declared(), strict=True,
      description="Self-consistency: same as vote (n=5, temperature=0.7)")(_factory(SelfConsistency))
model("egc", operator=True, settings=EGC.declared(), strict=True,
      description="Equal-gain (uniform) combining of N samples by synthesis (n=5)")(_factory(EGC))
model("mrc", operator=True, settings=MRC.declared(), strict=True,
      description="Maximal-ratio (quality-weighted) combining of N samples (n=5)")(_factory(MRC))
model("wbon", operator=True, settings=WeightedBoN.declared(), strict=True,
      description="Weighted best-of-N: answer clusters, softmax(q/0.5) weights (n=5)")(_factory(WeightedBoN))
