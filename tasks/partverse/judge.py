"""The PointLLM-style caption judge used for PartVerse-QA S2C and Objaverse captioning.

Prompt: PointLLM's object-captioning prompt as 3D-PLOT-LLM runs it (``scripts/run_gpt_captioning_eval.py``,
"copied verbatim from pointllm/eval/evaluator.py"), one user message. Judge settings follow the
paper's appendix (``eval_tools/gpt4o_judge_prompt.txt``): ``gpt-4o-2024-08-06``, temperature 0,
max_tokens 256. (The released batch script itself calls the judge with temperature 1 and 2048
tokens; we follow the paper's stated protocol.)

Parsing: as the reference (``OpenAIObjectCaptioningEvaluator.parse_gpt_response_evaluate``): the
first match of ``\\d*#.*`` (digits, possibly none, then ``#``), else the whole reply; stripped and split
on ``#``; the part before the first ``#`` must be an integer in 0..100. So a bare ``85`` is a score, and
a reply whose first ``#`` has no digits before it (``#1: 80#ok``) is unparseable. harness.judge re-asks
twice, then the sample's judge score is *unscored* (the reference's ``invalid_responses``, left out of
the mean), never 0.
"""

from __future__ import annotations

import re

from harness.judge import Verdict, judge
from harness.task import ScoreContext
from harness.types import GenerationConfig, Message

JUDGE_SPEC = "openai:gpt-4o-2024-08-06"
JUDGE_CONFIG = GenerationConfig(temperature=0.0, max_tokens=256)
PROMPT = """Evaluate a model-generated caption against a human-generated caption (ground truth) for a 3D model. \
Identify the aspects mentioned in the human caption and calculate the percentage of these aspects correctly \
mentioned or partially matched in the model caption. Score from 0 to 100, where each aspect contributes equally \
to the score. Consider similar concepts for partial score.
Provide your score (0-100) and a short justification (less than 15 words) in the format of 'score#reason'

Human-generated caption: {ground_truth}
Model-generated caption: {model_output}

Your response:"""
_SCORE = re.compile(r"(\d*#.*)")


def parse_reply(reply: str) -> dict[str, int | str] | None:
    """``'85#mentions colour'`` -> ``{"score": 85, "reason": "mentions colour"}`` (a plain dict: it is
    stored as the judgement row's verdict); None when unparseable or out of 0..100."""
    reply = reply or ""
    match = _SCORE.search(reply)
    parts = (match.group(1) if match else reply).strip().split("#")
    try:
        score = int(parts[0])  # int() as the reference: " 85", "+85" and "0_85" parse too
    except ValueError:
        return None
    if score not in range(101):
        return None
    return {"score": score, "reason": parts[1].strip() if len(parts) > 1 else ""}


def judge_messages(ground_truth: str, model_output: str) -> list[Message]:
    return [Message.text("user", PROMPT.format(ground_truth=ground_truth, model_output=model_output))]


async def judge_caption(ctx: ScoreContext, ground_truth: str, model_output: str) -> Verdict:
    return await judge(ctx, judge_messages(ground_truth, model_output), parse_reply, config=JUDGE_CONFIG)
