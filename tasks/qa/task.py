"""``qa``: bring-your-own JSONL of ``{"id"?, "input", "target", ...}`` rows, exact-match scored.

Options: ``path`` (required), ``input_field`` / ``target_field`` (defaults ``input`` / ``target``),
``system`` (an optional system prompt), ``normalise`` (strip and lower-case both sides; default true),
``breakdowns`` (comma-separated row fields that get their own metric rows). Other row fields are kept
as sample metadata.
"""

from __future__ import annotations

from pathlib import Path

from harness.data import DatasetError, file_hash, read_jsonl, require
from harness.registry import task
from harness.task import ScoreContext, Task
from harness.types import GenerationConfig, Message, Output, Request, Sample, Score, higher


def _norm(text: str, on: bool) -> str:
    return " ".join(text.split()).lower() if on else text


@task("qa", description="Your own JSONL of input/target rows, exact match (-T path=FILE)", family="qa")
def qa(path: str | None = None, input_field: str = "input", target_field: str = "target",
       system: str | None = None, normalise: bool = True, breakdowns: str = "", max_tokens: int = 64) -> Task:
    if not path:
        raise DatasetError("task 'qa' needs -T path=FILE.jsonl")
    file = Path(path)
    if not file.exists():
        raise DatasetError(f"{file}: file not found")

    def load() -> list[Sample]:
        out = []
        for i, (lineno, row) in enumerate(read_jsonl(file)):
            where = f"{file}:{lineno}"
            text = require(row, input_field, where)
            target = require(row, target_field, where, (str, int, float))
            messages = [Message.text("system", system)] if system else []
            messages.append(Message.text("user", text))
            meta = {k: v for k, v in row.items() if k not in (input_field, target_field, "id")}
            out.append(Sample(str(row.get("id", i)), messages, str(target), meta))
        return out

    def prompt(sample: Sample) -> Request:
        return Request(sample.messages, GenerationConfig(max_tokens=max_tokens))

    def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
        got = _norm(output.text, normalise)
        return Score({"exact_match": float(got == _norm(sample.target, normalise))}, answer=got)

    return Task(
        name="qa", version="1", load=load, prompt=prompt, score=score, family="qa",
        description=f"exact match on {file.name}", primary_metric="exact_match",
        metrics={"exact_match": higher("exact match")},
        breakdowns=tuple(b for b in breakdowns.split(",") if b),
        content_hash=file_hash(file, extra=f"{input_field}|{target_field}|{system}|{normalise}"),
    )
