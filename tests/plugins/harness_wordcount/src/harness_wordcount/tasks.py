"""Task ``wordcount``: how many words has a sentence? Scored by exact match on the count."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from harness import Message, Output, Sample, Score, ScoreContext, Task
from harness.registry import task
from harness.types import higher

SENTENCES = ("the cat sat", "a quick brown fox jumps", "one", "evaluation harnesses store every sample",
             "four words right here", "families plug in through entry points only")


def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    answer = output.text.strip()
    return Score(values={"exact_match": float(answer == str(sample.target))}, answer=answer)


@task("wordcount", description="Count the words of a sentence (exact match)", family="wordcount")
def wordcount(min_words: Annotated[int, Field(ge=1)] = 1) -> Task:
    """``min_words``: ask only the sentences of at least this many words."""
    samples = [Sample(id=f"s{i}", messages=[Message.text("user", f"How many words: {s}")], target=len(s.split()))
               for i, s in enumerate(SENTENCES) if len(s.split()) >= min_words]
    return Task(version="1", load=lambda: samples, score=score, primary_metric="exact_match",
                metrics={"exact_match": higher("exact match")}, content_hash=f"wordcount-v1-min{min_words}")
