"""Task ``wordcount``: how many words does a sentence have? Scored by exact match on the count."""

from __future__ import annotations

from harness.registry import task
from harness.task import Task
from harness.types import Message, Output, Sample, Score, higher

SENTENCES = (
    "the cat sat",
    "a quick brown fox jumps",
    "one",
    "evaluation harnesses store every sample",
    "four words right here",
    "families plug in through entry points only",
)


def load() -> list[Sample]:
    return [Sample(id=f"s{i}", messages=[Message.text("user", f"How many words: {text}")], target=len(text.split()))
            for i, text in enumerate(SENTENCES)]


def score(sample: Sample, output: Output, ctx: object) -> Score:
    answer = output.text.strip()
    return Score(values={"exact_match": float(answer == str(sample.target))}, answer=answer)


@task("wordcount", description="Count the words of a sentence (exact match)", family="wordcount")
def wordcount() -> Task:
    return Task(version="1", load=load, score=score, primary_metric="exact_match",
                metrics={"exact_match": higher("exact match")}, content_hash="wordcount-v1")
