"""Difficulty-adaptive routing (``adaptive``), after adaptive coding and modulation.

A pilot call answers the task and the judge scores it: that quality is the difficulty probe (the
channel-state estimate). Then, like an ACM table:

- q >= ``easy`` (0.85): easy, the pilot answer is returned (cost: one call + one judge call);
- ``hard`` <= q < ``easy``: medium, ``n`` more samples from the first model, keep the best judged;
- q < ``hard`` (0.5): hard, ``n`` samples from the *last* model given (pass a stronger model as
  the second argument: ``adaptive(small, big)``), keep the best judged of everything.

The thresholds and the table are our choice (the notes give the pilot-probe design but not its
table); ``details["route"]`` records the class.
"""

from __future__ import annotations

from harness.backend_settings import Setting
from harness.models.operators.base import Episode, Operator, OperatorError
from harness.registry import model


class Adaptive(Operator):
    name = "adaptive"
    uses_judge = True
    parameters = {
        "easy": Setting(float, 0.85, "pilot quality at or above which the pilot answers (0 to 1)"),
        "hard": Setting(float, 0.5, "pilot quality below which the hard route is taken (0 to 1, <= easy)"),
        "n": Setting(int, 3, "samples of the medium and hard routes (1 to 64)"),
        "temperature": Setting(float, 0.7, "sampling temperature of those samples"),
    }

    def validate(self) -> None:
        easy = self.check_float("easy", 0.0, 1.0)
        hard = self.check_float("hard", 0.0, 1.0)
        self.check_int("n", 1, 64)
        if hard > easy:
            raise OperatorError("adaptive: hard threshold must not exceed easy")

    async def run(self, ep: Episode) -> str:
        pilot = (await ep.sample(1, float(ep.request.config.temperature), note="pilot", channel=0))[0]
        await ep.judge([pilot], note="pilot")
        n, temp = int(self.params["n"]), float(self.params["temperature"])
        if pilot.q() >= float(self.params["easy"]):
            ep.info.update(route="easy", pilot_quality=pilot.quality)
            return pilot.text
        pool = [pilot]
        if pilot.q() >= float(self.params["hard"]):
            route, channel, count = "medium", 0, n
        elif len(self.channels) > 1:
            route, channel, count = "hard", len(self.channels) - 1, n
        else:  # one model only: the hard class draws twice as many samples from it
            route, channel, count = "hard", 0, 2 * n
        more = await ep.sample(count, temp, note=route, channel=channel)
        await ep.judge(more, note=route)
        pool += more
        best = max(pool, key=lambda c: c.q())
        ep.info.update(route=route, pilot_quality=pilot.quality, qualities=[c.quality for c in pool])
        return best.text


model("adaptive", operator=True, settings=Adaptive.declared(), strict=True,
      description="Difficulty-adaptive routing: judged pilot -> easy/medium/hard technique (adaptive(small, big))")(
    lambda *m, **p: Adaptive(*m, **p))
