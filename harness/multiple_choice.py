"""Multiple choice by loglikelihood, scored as lm-evaluation-harness scores it.

A question with choices is one :class:`~harness.types.Request` of kind ``loglikelihood``: one
(context, delimiter + choice) pair per choice. Its answer is the choice with the highest
loglikelihood (``acc``), or with the highest loglikelihood per character of the choice (``acc_norm``,
lm-eval's length normalisation: characters of the choice text, without the delimiter), or per UTF-8
byte (``acc_bytes``); ``exact_match`` is whether greedy decoding reproduces the gold choice. Ties go
to the first choice (``numpy.argmax``). This is ``ConfigurableTask.process_results`` for
``multiple_choice`` in lm-eval 0.4.13 (``lm_eval/api/task.py``), re-implemented for one gold index;
``tests/test_multiple_choice.py`` checks it against lm-eval's own function on generated inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.types import Loglikelihood, MetricInfo, Request, higher

MC_METRICS: dict[str, MetricInfo] = {
    "acc": higher("accuracy"),
    "acc_norm": higher("accuracy (length-normalised)"),
    "acc_bytes": higher("accuracy (byte-normalised)"),
    "exact_match": higher("greedy exact match"),
}


def choice_request(context: str, choices: Sequence[str], delimiter: str = " ") -> Request:
    """The scoring request of one question: each choice as a continuation of ``context``."""
    if not choices:
        raise ValueError("a multiple-choice question needs at least one choice")
    return Request.loglikelihood([(context, f"{delimiter}{c}") for c in choices])


def mc_scores(lls: Sequence[Loglikelihood], choices: Sequence[str], gold: int) -> dict[str, float]:
    """``acc``, ``acc_norm``, ``acc_bytes`` and ``exact_match`` of one question (see the module
    docstring). ``gold`` outside the choices scores 0 everywhere, as in lm-eval."""
    if len(lls) != len(choices):
        raise ValueError(f"{len(lls)} loglikelihoods for {len(choices)} choices")
    values = np.array([ll.logprob for ll in lls], dtype=float)
    chars = np.array([float(len(c)) for c in choices])
    utf8 = np.array([float(len(c.encode("utf-8", "surrogatepass"))) for c in choices])
    if not 0 <= gold < len(choices):
        gold = -100
    return {
        "acc": 1.0 if int(np.argmax(values)) == gold else 0.0,
        "acc_norm": 1.0 if int(np.argmax(values / chars)) == gold else 0.0,
        "acc_bytes": 1.0 if int(np.argmax(values / utf8)) == gold else 0.0,
        "exact_match": float(int(lls[gold].greedy)) if gold != -100 else 0.0,
    }


def predicted(lls: Sequence[Loglikelihood], choices: Sequence[str], normalised: bool = False) -> int:
    """The index of the chosen answer (for display: a sample's answer)."""
    values = np.array([ll.logprob for ll in lls], dtype=float)
    if normalised:
        values = values / np.array([float(len(c)) for c in choices])
    return int(np.argmax(values))
