"""Structured redundant verification (``fec``), after forward error correction.

A systematic call answers the task as asked; the code rate fixes how many parity calls follow
(reference mapping: 0.75 -> reasoning; 0.5 -> + verification; 0.33 -> + alternative method;
0.25 -> + per-claim confidence); a final syndrome-decoding call compares the systematic answer with
the parity checks and writes the corrected answer. A rate between the listed ones snaps to the
nearest (as the reference does). Parity calls are redundant *generation*, so they count in the
generator bucket; the decoding call is synthesis overhead. Reference default rate: 0.5.
"""

from __future__ import annotations

from harness.backend_settings import Setting
from harness.models.operators import prompts
from harness.models.operators.base import Episode, Operator
from harness.registry import model


class FEC(Operator):
    name = "fec"
    parameters = {"rate": Setting(float, 0.5, "code rate: the nearest of the parity sets is used (0.01 to 1)")}

    def validate(self) -> None:
        self.check_float("rate", 0.01, 1.0)
        rate = float(self.params["rate"])
        self.effective_rate = min(prompts.PARITY_BY_RATE, key=lambda r: abs(r - rate))
        self.sections = prompts.PARITY_BY_RATE[self.effective_rate]

    async def run(self, ep: Episode) -> str:
        temp = float(ep.request.config.temperature)
        systematic = (await ep.sample(1, temp, note="systematic"))[0]
        parity_texts = []
        for section in self.sections:
            instruction = prompts.PARITY[section].format(response=systematic.text)
            cand = await ep.rewrite(prompts.PARITY_CALL.format(question=ep.question, instruction=instruction),
                                    temperature=temp, note=f"parity:{section}")
            parity_texts.append(f"### {section}\n{cand.text}")
        decoded = await ep.ask("synthesis", prompts.DECODE.format(question=ep.question, response=systematic.text,
                                                                  parity="\n\n".join(parity_texts)),
                               temperature=0.0, note="syndrome decoding")
        ep.info.update(effective_rate=self.effective_rate, parity=list(self.sections),
                       systematic_answer=systematic.answer, decoded_answer=self.extract(decoded))
        return decoded


model("fec", operator=True, settings=FEC.declared(), strict=True,
      description="Structured redundant verification: parity calls at a code rate (0.5), then a decoding call")(
    lambda *m, **p: FEC(*m, **p))
