"""GSM8K task: loader, zero-shot chat prompt and three final-answer metrics.

- ``exact_match_strict`` / ``exact_match_flexible``: lm-evaluation-harness's ``strict-match`` and
  ``flexible-extract`` scores, reproduced exactly in :mod:`harness.numbers` (string comparison after
  its normalisation), so numbers here line up with lm-eval's for the same replies.
- ``exact_match_numeric``: a forgiving reading of ours, not lm-eval's: the last number in the reply
  that parses as one, ``,``/``$``/trailing dots dropped, numerically compared (``18.00`` == ``18``).

The rules and the scorer are the core's (:mod:`harness.numbers`: every family that reads a number
uses them from there); the problems, the instruction and the row parser are this family's public
data API (:mod:`.problems`). Both are re-exported here under their old names.
"""

from __future__ import annotations

from pathlib import Path

from harness.data import file_hash, load_hub, read_jsonl
from harness.numbers import (
    FINAL_NUMBER_METRICS,
    extract_flexible,
    extract_strict,
    normalise,
    same_number,
    score_final_number,
)
from harness.registry import task
from harness.task import ScoreContext, Task
from harness.tasks.gsm8k.problems import DATA, INSTRUCTION, parse_row
from harness.types import GenerationConfig, Output, Request, Sample, Score

__all__ = ["DATA", "INSTRUCTION", "METRICS", "extract_flexible", "extract_strict", "gsm8k", "normalise", "parse_row",
           "prompt", "same_number", "score"]


def prompt(sample: Sample) -> Request:
    return Request(sample.messages, GenerationConfig(temperature=0.0, max_tokens=256))


METRICS = FINAL_NUMBER_METRICS


def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    return score_final_number(sample, output)


@task("gsm8k", description="GSM8K test (1,319 grade-school maths problems), final-answer exact match",
      family="gsm8k")
def gsm8k(data_file: str | None = None, hub: str | None = None) -> Task:
    """``data_file``: a GSM8K-format JSONL (default: the shipped test split); ``hub``: a hub id
    for ``datasets.load_dataset`` (e.g. ``openai/gsm8k``; config ``main``, split ``test``)."""
    path = Path(data_file) if data_file else DATA

    def load() -> list[Sample]:
        if hub:
            return [parse_row(r, f"{hub}[{i}]", i) for i, r in enumerate(load_hub(hub, "main", "test"))]
        # sample id = 0-based row index in the file, the id lm-eval and the paper tables use
        return [parse_row(row, f"{path}:{lineno}", i) for i, (lineno, row) in enumerate(read_jsonl(path))]

    content = f"hub:{hub}" if hub else file_hash(path, extra=INSTRUCTION)
    return Task(
        name="gsm8k", version="2", load=load, prompt=prompt, score=score,
        description="GSM8K test, zero-shot chat, final-answer exact match",
        family="gsm8k", primary_metric="exact_match_flexible", metrics=METRICS, content_hash=content,
    )
