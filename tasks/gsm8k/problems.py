"""The GSM8K problems this family ships, as the public data API other families build on.

The gsm8k task poses these problems; other families pose the same ones their own way (the
reliability hard split, the sycophancy probe, the selection fine-tuning split) and import exactly
this module for it, nothing else of the family: the shipped file (:data:`DATA`), its rows
(:func:`problem_rows`), the chat instruction that asks for a ``#### <number>`` final line
(:data:`INSTRUCTION`) and one row as a :class:`~harness.types.Sample` (:func:`parse_row`). How a
number is read off a reply is the core's (:mod:`harness.numbers`), not this family's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.data import DatasetError, read_jsonl, require
from harness.numbers import final_answer
from harness.types import Message, Sample

DATA = Path(__file__).parent / "data" / "test.jsonl"
INSTRUCTION = (
    "Solve the following math problem step by step. "
    "End your reply with a final line of the form '#### <number>'.\n\n"
)


def problem_rows(path: Path = DATA) -> list[dict[str, Any]]:
    """The rows of a GSM8K-format JSONL file (default: the shipped test split), in file order."""
    return [row for _, row in read_jsonl(path)]


def parse_row(row: dict[str, Any], where: str, index: int) -> Sample:
    """One GSM8K row (``question``, ``answer`` ending in ``#### <number>``) as a sample: the instruction
    and the question as the user turn, the final answer as the target, the whole solution kept in
    ``metadata["solution"]`` (lm-eval's reference). ``where`` names the row in a one-line error."""
    question = require(row, "question", where)
    answer = require(row, "answer", where)
    if "####" not in answer:
        raise DatasetError(f"{where}: field 'answer' has no '#### <number>' final answer")
    return Sample(
        id=str(row.get("id", index)),
        messages=[Message.text("user", INSTRUCTION + question)],
        target=final_answer(answer),
        metadata={"solution": answer},
    )
