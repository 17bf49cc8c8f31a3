"""The LLM-as-judge role, as scorers call it: pinned judge, cached verdicts, retries, 'unscored'.

A scorer calls :func:`judge` with the judge prompt and a parser and gets a
:class:`~harness.client.Verdict`. The work happens in the judge's
:class:`~harness.client.ModelClient` (``ctx.judge``): the reply is cached under the judge's spec
(rescoring or rerunning never pays twice), and a reply that does not parse is re-asked with another
seed. Every attempt's raw reply is a :class:`~harness.types.JudgementRecord`; :func:`attach` puts
them on the score (``Score.judgements``) and the runner stores them as rows of ``judgements``. A
verdict that still does not parse is returned with ``value=None``: the scorer must then return
``Score.not_scored(...)``, never 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from harness.client import Verdict
from harness.errors import UserError
from harness.task import ScoreContext
from harness.types import GenerationConfig, Message, Score

T = TypeVar("T")

__all__ = ["JudgeUnavailable", "Verdict", "attach", "judge"]


class JudgeUnavailable(UserError, RuntimeError):
    """The task needs a judge and none was configured (pass --judge SPEC)."""


async def judge(ctx: ScoreContext, messages: list[Message], parse: Callable[[str], T | None], *,
                retries: int = 2, config: GenerationConfig | None = None) -> Verdict:
    """Ask the run's judge; re-ask (with a different seed) while the reply does not parse."""
    if ctx.judge is None:
        raise JudgeUnavailable("this task grades with an LLM judge: pass --judge SPEC")
    return await ctx.judge.judge(messages, parse, retries=retries, config=config)


def attach(score: Score, *verdicts: Verdict) -> Score:
    """Move verdict records into the score so the runner stores them as judgement rows."""
    for v in verdicts:
        score.judgements.extend(v.records)
    return score
