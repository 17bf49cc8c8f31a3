"""Hybrid retransmission (HARQ).

- ``chase`` (Chase combining): resend the request (fresh sample) until the judge's quality
  reaches ``threshold``; if no attempt passes within ``max_rounds``, synthesize a response from all
  attempts (quality-weighted synthesis).
- ``ir`` (incremental redundancy): generate once; then each round a critic lists issues (JSON),
  the generator applies them to the current best, the judge scores the correction; a correction that
  scores below the best is discarded (regression protection). Stops when quality reaches the
  threshold, the critic finds nothing, or after ``max_rounds``.

Reference-code defaults: max_rounds 5, threshold 0.85; retransmissions sample at temperature 0.7.
"""

from __future__ import annotations

from typing import Any

from harness.backend_settings import Setting
from harness.models.operators import prompts
from harness.models.operators.base import Candidate, Episode, Operator
from harness.registry import model


class Chase(Operator):
    name = "chase"
    uses_judge = True
    parameters = {"max_rounds": Setting(int, 5, "most rounds, the first included (1 to 50)"),
                  "threshold": Setting(float, 0.85, "judged quality that ends the rounds (0 to 1)"),
                  "temperature": Setting(float, 0.7, "sampling temperature of the retransmissions")}

    def validate(self) -> None:
        self.check_int("max_rounds", 1, 50)
        self.check_float("threshold", 0.0, 1.0)

    async def run(self, ep: Episode) -> str:
        attempts: list[Candidate] = []
        for r in range(int(self.params["max_rounds"])):
            # the first transmission is a plain call (the request's own temperature)
            temp = self.request_temperature(ep) if r == 0 else float(self.params["temperature"])
            cand = (await ep.sample(1, temp, note=f"round {r}"))[0]
            await ep.judge([cand], note=f"round {r}")
            attempts.append(cand)
            if cand.q() >= float(self.params["threshold"]):
                ep.info.update(rounds=r + 1, passed=True, qualities=[c.quality for c in attempts])
                return cand.text
        ep.info.update(rounds=len(attempts), passed=False, qualities=[c.quality for c in attempts])
        merged = await ep.synthesize(attempts, weighted=True, temperature=0.1)
        return merged.text

    @staticmethod
    def request_temperature(ep: Episode) -> float:
        return float(ep.request.config.temperature)


class IncrementalRedundancy(Operator):
    name = "ir"
    uses_judge = True
    parameters = {"max_rounds": Setting(int, 5, "most rounds, the first included (1 to 50)"),
                  "threshold": Setting(float, 0.85, "judged quality that ends the rounds (0 to 1)")}

    def validate(self) -> None:
        self.check_int("max_rounds", 1, 50)
        self.check_float("threshold", 0.0, 1.0)

    async def run(self, ep: Episode) -> str:
        best = (await ep.sample(1, float(ep.request.config.temperature), note="round 0"))[0]
        await ep.judge([best], note="round 0")
        history: list[dict[str, Any]] = [{"round": 0, "quality": best.quality, "accepted": True}]
        threshold = float(self.params["threshold"])
        for r in range(1, int(self.params["max_rounds"])):
            if best.q() >= threshold:
                break
            raw = await ep.ask("critic", prompts.CRITIC.format(lens="correctness", question=ep.question,
                                                               response=best.text), note=f"round {r}")
            issues = prompts.issues_or_raw(raw)
            if not issues:  # the critic found nothing to fix
                history.append({"round": r, "issues": 0})
                break
            fixed = await ep.rewrite(prompts.CORRECT.format(question=ep.question, response=best.text,
                                                            issues=prompts.format_issues(issues)),
                                     temperature=float(ep.request.config.temperature), note=f"round {r}")
            await ep.judge([fixed], note=f"round {r}")
            accepted = fixed.q() >= best.q()
            history.append({"round": r, "issues": len(issues), "quality": fixed.quality, "accepted": accepted})
            if accepted:
                best = fixed
        ep.info.update(rounds=history, final_quality=best.quality)
        return best.text


model("chase", operator=True, settings=Chase.declared(), strict=True,
      description="HARQ Chase combining: resend until judge q >= 0.85 (max_rounds=5), else synthesize")(
    lambda *m, **p: Chase(*m, **p))
model("ir", operator=True, settings=IncrementalRedundancy.declared(), strict=True,
      description="HARQ incremental redundancy: critic issues -> corrections, keep the best (max_rounds=5)")(
    lambda *m, **p: IncrementalRedundancy(*m, **p))
