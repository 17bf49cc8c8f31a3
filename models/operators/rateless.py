"""Rateless (fountain) sampling: keep sampling until a stopping rule fires, with a cap.

Sample i (0-based) is drawn at temperature ``0.5 + (i mod 5) * 0.1`` (the reference's schedule).
After at least ``min_samples`` and at most ``max_samples`` samples, stop as soon as the confidence
reaches ``stop_at``. Two rules:

- ``rule=confidence`` (reference): every sample is judged; with the qualities q_1..q_n,
  ``confidence = 0.6 * mean(q) + 0.4 * (1 - range(top-m q))``, m = max(2, n // 2).
  Decoding: if the best quality leads the second by more than ``lead`` (0.20), return the best;
  otherwise synthesize from the near-best samples (within ``lead`` of the best).
- ``rule=agreement`` (no judge): confidence = share of the samples whose extracted answer is the
  most common one; decoding returns the first sample with that answer.

``details["confidence"]`` lists the confidence after each sample and ``details["stopped_by"]``
says whether the rule or the cap ended sampling.
"""

from __future__ import annotations

from typing import Literal

from harness.backend_settings import Setting
from harness.models.operators.base import Candidate, Episode, Operator, OperatorError, plurality
from harness.registry import model


def fountain_temperature(i: int) -> float:
    return round(0.5 + (i % 5) * 0.1, 2)


def confidence_from_quality(qs: list[float]) -> float:
    top = sorted(qs, reverse=True)[: max(2, len(qs) // 2)]
    spread = max(top) - min(top) if top else 0.0
    return 0.6 * (sum(qs) / len(qs)) + 0.4 * (1.0 - spread)


def agreement(answers: list[str | None]) -> float:
    winner, tally = plurality(answers)
    return tally.get(winner, 0.0) / len(answers) if winner is not None else 0.0


class Rateless(Operator):
    name = "rateless"
    parameters = {
        "min_samples": Setting(int, 2, "samples drawn before stopping is considered (1 to 1000)"),
        "max_samples": Setting(int, 10, "most samples (1 to 1000, >= min_samples)"),
        "stop_at": Setting(float, 0.85, "confidence (or agreement) that stops sampling (0 to 1)"),
        "lead": Setting(float, 0.20, "quality lead of the best sample that decodes it alone (0 to 1)"),
        "rule": Setting(Literal["confidence", "agreement"], "confidence", "stop on the judge's confidence or on "
                        "answer agreement"),
    }

    def validate(self) -> None:
        lo = self.check_int("min_samples", 1, 1000)
        hi = self.check_int("max_samples", 1, 1000)
        if hi < lo:
            raise OperatorError("rateless: max_samples must be >= min_samples")
        self.check_float("stop_at", 0.0, 1.0)
        self.check_float("lead", 0.0, 1.0)
        self.uses_judge = self.params["rule"] == "confidence"

    async def run(self, ep: Episode) -> str:
        lo, hi = int(self.params["min_samples"]), int(self.params["max_samples"])
        stop_at = float(self.params["stop_at"])
        by_judge = self.params["rule"] == "confidence"
        cands: list[Candidate] = []
        trajectory: list[float] = []
        stopped_by = "cap"
        while len(cands) < hi:
            # the first min_samples are drawn as one batch, then one at a time
            k = lo - len(cands) if len(cands) < lo else 1
            temps = [fountain_temperature(len(cands) + j) for j in range(k)]
            new = await ep.sample(k, temps)
            if by_judge:
                await ep.judge(new)
            for c in new:
                c.index = len(cands)
                cands.append(c)
                if len(cands) >= lo:
                    trajectory.append(self.confidence(cands))
            if len(cands) >= lo and trajectory[-1] >= stop_at:
                stopped_by = "rule"
                break
        ep.info.update(samples=len(cands), confidence=trajectory, stopped_by=stopped_by,
                       candidates=[{"answer": c.answer, "quality": c.quality} for c in cands])
        return await self.decode(ep, cands)

    def confidence(self, cands: list[Candidate]) -> float:
        if self.params["rule"] == "confidence":
            return confidence_from_quality([c.q() for c in cands])
        return agreement([c.answer for c in cands])

    async def decode(self, ep: Episode, cands: list[Candidate]) -> str:
        if self.params["rule"] == "agreement":
            winner, _ = plurality([c.answer for c in cands])
            chosen = next((c for c in cands if winner is not None and c.answer == winner), cands[0])
            ep.info["decoded"] = f"majority answer {winner!r}"
            return chosen.text
        ranked = sorted(cands, key=lambda c: c.q(), reverse=True)
        lead = float(self.params["lead"])
        if len(ranked) == 1 or ranked[0].q() - ranked[1].q() > lead:
            ep.info["decoded"] = "best leads"
            return ranked[0].text
        near = [c for c in ranked if ranked[0].q() - c.q() <= lead]
        ep.info["decoded"] = f"synthesis of {len(near)} near-best"
        return (await ep.synthesize(near, weighted=True, temperature=0.1)).text


model("rateless", operator=True, settings=Rateless.declared(), strict=True,
      description="Rateless sampling: sample until confidence >= 0.85 (min 2, max 10), rule=confidence|agreement")(
    lambda *m, **p: Rateless(*m, **p))
