"""Iterative generator-critic decoding (``turbo``), after turbo decoders.

Round 0 generates and judges an answer. Each later round the critic reviews the current best
through a rotating lens (correctness -> completeness -> reasoning -> clarity: the "interleaver"
that decorrelates successive critiques), issues below the severity floor are dropped, and only the
top ``ceil(alpha * issues)`` by severity (at most ``max_corrections``) are applied: the damping.
A correction scoring below the best is a regression: it is discarded, alpha is halved (floor 0.1),
and two consecutive regressions end the loop; an accepted correction relaxes alpha back by x1.2
(capped at its start value). The loop also ends when the best reaches ``threshold``, or when the
critic finds nothing and the best is within 90% of the threshold. The best answer is returned.

Reference-code defaults: max_rounds 6 (iterations including round 0), threshold 0.90, alpha 0.5,
max_corrections 2, severity floor "major". ``details["qualities"]`` holds the judged quality of
every round's candidate (accepted or not), the input of the contractivity estimate
(:func:`harness.models.operators.theory.contractivity_from_quality`).
"""

from __future__ import annotations

import math
from typing import Any

from harness.backend_settings import Setting
from harness.models.operators import prompts
from harness.models.operators.base import Episode, Operator, OperatorError
from harness.registry import model


class Turbo(Operator):
    name = "turbo"
    uses_judge = True
    parameters = {
        "max_rounds": Setting(int, 6, "most rounds, round 0 included (1 to 50)"),
        "threshold": Setting(float, 0.90, "judged quality that ends the loop (0 to 1)"),
        "alpha": Setting(float, 0.5, "damping: share of the critic's issues applied (0.01 to 1)"),
        "max_corrections": Setting(int, 2, "most issues applied per round (1 to 100)"),
        "severity_floor": Setting(str, "major", f"issues below this are dropped: {', '.join(prompts.SEVERITY_ORDER)}"),
        "max_regressions": Setting(int, 2, "consecutive regressions that end the loop (1 to 100)"),
    }

    def validate(self) -> None:
        self.check_int("max_rounds", 1, 50)
        self.check_float("threshold", 0.0, 1.0)
        self.check_float("alpha", 0.01, 1.0)
        self.check_int("max_corrections", 1, 100)
        self.check_int("max_regressions", 1, 100)
        if self.params["severity_floor"] not in prompts.SEVERITY_ORDER:
            raise OperatorError(f"turbo: severity_floor must be one of {', '.join(prompts.SEVERITY_ORDER)}")

    def damp(self, issues: list[dict[str, Any]], alpha: float) -> list[dict[str, Any]]:
        floor = prompts.SEVERITY_ORDER[str(self.params["severity_floor"])]
        # an issue without a severity is kept (weak critics omit it) and ranked after "minor"
        kept = [i for i in issues if prompts.SEVERITY_ORDER.get(str(i.get("severity", "")).lower(), floor) <= floor]
        kept.sort(key=lambda i: prompts.SEVERITY_ORDER.get(str(i.get("severity", "")).lower(), 3))
        k = min(int(self.params["max_corrections"]), max(1, math.ceil(alpha * len(kept))))
        return kept[:k]

    async def run(self, ep: Episode) -> str:
        temp = float(ep.request.config.temperature)
        best = (await ep.sample(1, temp, note="round 0"))[0]
        await ep.judge([best], note="round 0")
        threshold, alpha0 = float(self.params["threshold"]), float(self.params["alpha"])
        alpha, regressions = alpha0, 0
        qualities: list[float | None] = [best.quality]
        best_per_round: list[float] = [best.q()]
        stop = "max_rounds"
        for r in range(1, int(self.params["max_rounds"])):
            if best.q() >= threshold:
                stop = "threshold"
                break
            lens = prompts.LENSES[(r - 1) % len(prompts.LENSES)]
            raw = await ep.ask("critic", prompts.CRITIC.format(lens=lens, question=ep.question, response=best.text),
                               note=f"round {r} lens={lens}")
            issues = prompts.issues_or_raw(raw)
            chosen = self.damp(issues, alpha)
            if not chosen:
                if best.q() >= 0.9 * threshold:
                    stop = "converged"
                    break
                # nothing usable but quality is low: ask for an independent re-check instead
                chosen = [{"problem": f"re-check the {lens} of the answer", "severity": "major"}]
            fixed = await ep.rewrite(prompts.CORRECT.format(question=ep.question, response=best.text,
                                                            issues=prompts.format_issues(chosen)),
                                     temperature=temp, note=f"round {r} alpha={alpha:.2f}")
            await ep.judge([fixed], note=f"round {r}")
            qualities.append(fixed.quality)
            if fixed.q() >= best.q():
                best, regressions = fixed, 0
                alpha = min(alpha0, alpha * 1.2)
            else:
                regressions += 1
                alpha = max(0.1, alpha * 0.5)
                if regressions >= int(self.params["max_regressions"]):
                    best_per_round.append(best.q())
                    stop = "regressions"
                    break
            best_per_round.append(best.q())
        ep.info.update(qualities=qualities, best_per_round=best_per_round, stop=stop, final_quality=best.quality)
        return best.text


model("turbo", operator=True, settings=Turbo.declared(), strict=True,
      description="Generator-critic decoding: damped corrections (alpha=0.5), stop after 2 regressions, keep best")(
    lambda *m, **p: Turbo(*m, **p))
