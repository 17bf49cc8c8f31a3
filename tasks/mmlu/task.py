"""``mmlu_redux``: MMLU-Redux questions as multiple choice, each choice scored by its loglikelihood.

The prompt is lm-evaluation-harness's MMLU template (``lm_eval/tasks/mmlu/default``, 0.4.13): a
subject line ("The following are multiple choice questions (with answers) about <subject>."), a
blank line, the question, the four choices as ``A. ...`` to ``D. ...`` and ``Answer:``; the
continuations scored are ``" A"`` to ``" D"``. ``acc`` / ``acc_norm`` / ``acc_bytes`` /
``exact_match`` are computed as lm-eval computes them (:mod:`harness.multiple_choice`), with a
breakdown per subject. Zero-shot: the shipped subset has no development split to draw shots from.

Options: ``data_file`` (a JSONL of the shipped file's shape: ``subject``, ``question``, ``choices``
(4 strings), ``answer`` (0-3)).
"""

from __future__ import annotations

from pathlib import Path

from harness.data import DatasetError, file_hash, read_jsonl, require
from harness.multiple_choice import MC_METRICS, choice_request, mc_scores, predicted
from harness.registry import task
from harness.task import ScoreContext, Task
from harness.types import Message, Output, Request, Sample, Score

DATA = Path(__file__).parent / "data" / "mmlu_redux_ok_5_per_subject.jsonl"
LETTERS = ("A", "B", "C", "D")
PROMPT_VERSION = "lm-eval-0.4.13-mmlu-default"


def question_text(question: str, choices: list[str]) -> str:
    lines = [question.strip(), *(f"{letter}. {choice}" for letter, choice in zip(LETTERS, choices, strict=True))]
    return "\n".join(lines) + "\nAnswer:"


def description(subject: str) -> str:
    return f"The following are multiple choice questions (with answers) about {subject.replace('_', ' ')}.\n\n"


def _samples(file: Path) -> list[Sample]:
    out = []
    for lineno, row in read_jsonl(file):
        where = f"{file}:{lineno}"
        subject = require(row, "subject", where)
        question = require(row, "question", where)
        choices = require(row, "choices", where, list)
        answer = require(row, "answer", where, int)
        if len(choices) != 4 or not all(isinstance(c, str) for c in choices):
            raise DatasetError(f"{where}: 'choices' must be 4 strings")
        if isinstance(answer, bool) or not 0 <= answer < 4:
            raise DatasetError(f"{where}: 'answer' must be 0, 1, 2 or 3, got {answer!r}")
        context = description(subject) + question_text(question, choices)
        sid = f"{subject}-{row.get('row', lineno)}"
        out.append(Sample(sid, [Message.text("user", context)], LETTERS[answer],
                          {"subject": subject, "choices": list(LETTERS), "gold": answer, "context": context}))
    return out


@task("mmlu_redux", description="MMLU-Redux multiple choice by loglikelihood (lm-eval's MMLU prompt; acc, acc_norm)",
      family="mmlu")
def mmlu_redux(data_file: str | None = None) -> Task:
    file = Path(data_file) if data_file else DATA
    if not file.is_file():
        raise DatasetError(f"{file}: file not found")

    def prompt(sample: Sample) -> Request:
        return choice_request(sample.metadata["context"], sample.metadata["choices"])

    def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
        lls = output.loglikelihoods or []
        choices = sample.metadata["choices"]
        if len(lls) != len(choices):
            return Score.not_scored(f"{len(lls)} loglikelihoods for {len(choices)} choices")
        values = mc_scores(lls, choices, int(sample.metadata["gold"]))
        return Score(values, answer=choices[predicted(lls, choices)])

    return Task(
        version="1", load=lambda: _samples(file), prompt=prompt, score=score, request_kind="loglikelihood",
        primary_metric="acc", metrics=dict(MC_METRICS), breakdowns=("subject",),
        content_hash=file_hash(file, extra=PROMPT_VERSION),
    )
