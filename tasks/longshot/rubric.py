"""The rubric judge: one judge call per criterion, strict JSON verdict ``{"criteria_met": bool}``.

Protocol of the reference evaluation (eval/utils.py::_evaluate_single_criterion, mbzuai-oryx/LongShOT):
the judge (Qwen/Qwen3-14B served by vLLM) sees the ground-truth answer, the model's answer and one
criterion description in a single user message ending in ``/no_think``; temperature 0.1, top_p 1,
max_tokens 4096, a JSON-schema response format; up to 3 attempts. Our differences, both choices:
- a verdict that still fails after the attempts makes the turn *unscored* (the harness rule) by
  default; the released code counts it as "not met" (``judge_failure="unmet"`` reproduces that);
- the parser also accepts a reply wrapped in a ```json fence or preceded by a <think> block, which
  a schema-guided server never emits but an unguided judge does; anything else must be a JSON
  object whose ``criteria_met`` is a real boolean (the released code takes any truthy value).
Candidate replies have <think> blocks removed before judging, as the reference does.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

from harness.judge import Verdict, judge
from harness.task import ScoreContext
from harness.types import GenerationConfig, Message

JUDGE_SPEC = "vllm:Qwen/Qwen3-14B"
JUDGE_CONFIG = GenerationConfig(
    temperature=0.1, top_p=1.0, max_tokens=4096,
    extra={"response_format": {"type": "json_schema", "json_schema": {
        "name": "criteria_evaluation",
        "schema": {"type": "object", "properties": {"criteria_met": {"type": "boolean"}},
                   "required": ["criteria_met"]},
    }}},
)
ATTEMPTS = 3  # the reference's max_retries: 3 calls in all
MAX_PARALLEL = 8  # the reference judges up to 8 criteria of a sample at once

# The reference judge prompt, word for word (it defines what is measured).
PROMPT = """You are an expert evaluator specializing in video content analysis and multimodal understanding.

Your task is to evaluate the Model Response against the **single evaluation criterion** provided, using the Ground Truth Response as a reference.

Ground Truth Response:
{ground_truth}

Model Response:
{response}

Evaluation Criterion:
{criterion}

Instructions:
- Evaluate ONLY the provided criterion in this assessment.
- Compare the Model Response to the Ground Truth Response and determine if the criterion is satisfied.
- If the Model Response satisfies the criterion, set "criteria_met" to true; otherwise, set it to false.
- Focus on video content understanding, temporal relationships, and multimodal analysis. /no_think"""  # noqa: E501

_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def strip_think(text: str) -> str:
    """Drop <think>...</think> blocks and anything before an orphan </think> (as the reference)."""
    if not text:
        return text
    text = _THINK.sub("", text)
    while "</think>" in text:
        open_at, close_at = text.find("<think>"), text.find("</think>")
        if open_at == -1 or open_at > close_at:
            text = text[close_at + len("</think>") :].lstrip()
        else:
            break
    return _THINK.sub("", text).strip()


def parse_verdict(raw: str) -> bool | None:
    """``{"criteria_met": true|false}`` -> bool; anything else -> None (the judge is asked again)."""
    text = strip_think(raw or "").strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("criteria_met"), bool):
        return None
    return obj["criteria_met"]


def judge_messages(ground_truth: str, response: str, criterion: str) -> list[Message]:
    return [Message.text("user", PROMPT.format(ground_truth=ground_truth, response=response, criterion=criterion))]


@dataclass(slots=True)
class Mark:
    name: str
    description: str
    weight: float
    is_penalty: bool
    met: bool | None
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "weight": self.weight, "is_penalty": self.is_penalty, "met": self.met,
                "attempts": self.verdict.attempts, "error": self.verdict.error}


async def judge_criteria(ctx: ScoreContext, criteria: list[dict[str, Any]], ground_truth: str,
                         response: str) -> list[Mark]:
    """Judge every criterion of one turn (in parallel, at most ``MAX_PARALLEL`` at once)."""
    gate = asyncio.Semaphore(MAX_PARALLEL)

    async def one(c: dict[str, Any]) -> Mark:
        async with gate:
            v = await judge(ctx, judge_messages(ground_truth, response, c["description"]), parse_verdict,
                            retries=ATTEMPTS - 1, config=JUDGE_CONFIG)
        return Mark(str(c.get("name", "")), c["description"], float(c["weight"]), bool(c.get("is_penalty")),
                    v.value, v)

    return list(await asyncio.gather(*(one(c) for c in criteria)))


@dataclass(slots=True)
class TurnScore:
    earned: float  # sum of weights of met non-penalty criteria (released "obtained")
    possible: float  # sum of positive weights (released "max_score")
    penalty_met: float  # sum of |weight| of met penalty criteria (never subtracted by the release)

    @property
    def score(self) -> float | None:
        return self.earned / self.possible if self.possible > 0 else None

    @property
    def score_penalized(self) -> float | None:
        # our variant: met penalties subtracted, floored at 0 per turn (a choice: the paper gives
        # no formula for it; the floor keeps one hallucination from outweighing other turns)
        return max(0.0, self.earned - self.penalty_met) / self.possible if self.possible > 0 else None


def tally(marks: list[Mark], *, unmet_on_failure: bool) -> TurnScore:
    """Released arithmetic: a criterion counts toward ``earned`` when met and not a penalty; every
    positive weight counts toward ``possible``. ``met is None`` (judge failed) counts as not met."""
    earned = possible = penalty = 0.0
    for m in marks:
        met = bool(m.met) if (m.met is not None or unmet_on_failure) else False
        if met and not m.is_penalty:
            earned += m.weight
        if m.weight > 0:
            possible += m.weight
        if met and m.is_penalty:
            penalty += abs(m.weight)
    return TurnScore(earned, possible, penalty)
