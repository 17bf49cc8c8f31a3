"""GSM8K task: loader, zero-shot chat prompt and three final-answer metrics.

- ``exact_match_strict`` / ``exact_match_flexible``: lm-evaluation-harness's ``strict-match`` and
  ``flexible-extract`` scores, reproduced exactly in :mod:`lmeval` (string comparison after its
  normalisation), so numbers here line up with lm-eval's for the same replies.
- ``exact_match_numeric``: a forgiving reading of ours, not lm-eval's: the last number in the reply
  that parses as one, ``,``/``$``/trailing dots dropped, numerically compared (``18.00`` == ``18``).
  ``extract_flexible``/``extract_strict``/``same_number`` implement it; the reliability and sycophancy
  tasks reuse them.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.data import DatasetError, file_hash, load_hub, read_jsonl, require
from harness.registry import task
from harness.task import ScoreContext, Task
from harness.tasks.gsm8k import lmeval
from harness.types import GenerationConfig, Message, Output, Request, Sample, Score, higher

DATA = Path(__file__).parent / "data" / "test.jsonl"
INSTRUCTION = (
    "Solve the following math problem step by step. "
    "End your reply with a final line of the form '#### <number>'.\n\n"
)
STRICT = re.compile(r"####\s*\$?(-?[0-9][0-9.,]*)")
NUMBER = re.compile(r"-?[$0-9.,]{2,}|-?[0-9]+")


# ---- the forgiving numeric reading (exact_match_numeric) ----------------------------------------
def normalise(text: str) -> str:
    return text.replace(",", "").replace("$", "").strip().rstrip(".")


def extract_strict(reply: str) -> str | None:
    found = STRICT.findall(reply)
    return normalise(found[-1]) if found else None


def extract_flexible(reply: str) -> str | None:
    for candidate in reversed(NUMBER.findall(reply)):
        value = normalise(candidate)
        if re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", value):
            return value
    return None


def same_number(a: str | None, b: str) -> bool:
    if a is None:
        return False
    if a == b:
        return True
    try:
        return abs(float(a) - float(b)) < 1e-9
    except ValueError:
        return False


def parse_row(row: dict, where: str, index: int) -> Sample:
    question = require(row, "question", where)
    answer = require(row, "answer", where)
    if "####" not in answer:
        raise DatasetError(f"{where}: field 'answer' has no '#### <number>' final answer")
    target = normalise(answer.split("####")[-1])
    return Sample(
        id=str(row.get("id", index)),
        messages=[Message.text("user", INSTRUCTION + question)],
        target=target,
        metadata={"solution": answer},
    )


def prompt(sample: Sample) -> Request:
    return Request(sample.messages, GenerationConfig(temperature=0.0, max_tokens=256))


METRICS = {
    "exact_match_flexible": higher("exact match (lm-eval flexible-extract)"),
    "exact_match_strict": higher("exact match (lm-eval strict-match)"),
    "exact_match_numeric": higher("exact match (last number, numeric)"),
}


def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    # lm-eval's reference is the full solution text; samples built elsewhere may only carry the number
    solution = (sample.metadata or {}).get("solution") or f"#### {sample.target}"
    strict = lmeval.strict_match(output.text)
    flexible = lmeval.flexible_extract(output.text)
    numeric = extract_flexible(output.text)
    return Score(
        values={
            "exact_match_flexible": float(lmeval.exact_match(flexible, solution)),
            "exact_match_strict": float(lmeval.exact_match(strict, solution)),
            "exact_match_numeric": float(same_number(numeric, sample.target)),
        },
        answer=flexible,
        explanation=f"strict={strict!r} flexible={flexible!r} numeric={numeric!r} target={sample.target!r}",
    )


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
