"""acc / acc_norm / acc_bytes / exact_match of the core equal lm-eval 0.4.13's ``process_results``.

Generated questions (random loglikelihoods, choices of different character and byte lengths, ties,
non-ASCII text, gold out of range) scored by both: the core's :func:`harness.multiple_choice.mc_scores`
and lm-eval's ``ConfigurableTask.process_results`` of a multiple-choice task built by its TaskManager.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.multiple_choice import choice_request, mc_scores, predicted
from harness.types import Loglikelihood
from tests.requirements import require

require("lm_eval", "the lmeval extra (installed by tests/setup.d/00-python.sh)")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def lm_task(monkeypatch_module=None):
    import os

    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    from lm_eval.tasks import TaskManager

    cwd = os.getcwd()
    os.chdir(ROOT)  # the YAML names its data relative to the repository
    try:
        loaded = TaskManager(include_path=str(ROOT / "tests" / "data" / "lmeval")).load(["harness_parity_mc"])
    finally:
        os.chdir(cwd)
    return loaded["tasks"]["harness_parity_mc"]


WORDS = ["a", "bb", "ccc", "Zürich", "🐄", "naïve café", "x" * 30, "dd", " e", "ff"]


def _questions(n: int) -> list[tuple[list[str], int, list[tuple[float, bool]]]]:
    rng = random.Random(5)
    out = []
    for i in range(n):
        k = rng.randint(2, 5)
        choices = rng.sample(WORDS, k)
        gold = rng.randrange(k) if i % 17 else k + 1  # now and then a gold index outside the choices
        lls = [(round(rng.uniform(-30, -0.1), 1 if i % 5 == 0 else 6), rng.random() < 0.3) for _ in range(k)]
        if i % 7 == 0:  # exact ties: the first choice wins in both
            lls[-1] = lls[0]
        out.append((choices, gold, lls))
    return out


def test_mc_scores_equal_lm_eval_process_results(lm_task):
    for choices, gold, lls in _questions(400):
        doc = {"question": "q", "choices": choices, "label": gold}
        expected = lm_task.process_results(doc, lls)
        got = mc_scores([Loglikelihood(lp, g, 1) for lp, g in lls], choices, gold)
        for metric in ("acc", "acc_norm", "acc_bytes"):
            assert got[metric] == expected[metric], (choices, gold, lls, metric)


def test_acc_and_acc_norm_disagree_when_lengths_differ():
    lls = [Loglikelihood(-2.0, False, 1), Loglikelihood(-6.0, False, 3)]
    got = mc_scores(lls, ["ab", "a much longer choice"], gold=1)
    assert got["acc"] == 0.0 and got["acc_norm"] == 1.0
    assert predicted(lls, ["ab", "a much longer choice"]) == 0
    assert predicted(lls, ["ab", "a much longer choice"], normalised=True) == 1


def test_exact_match_is_the_gold_choice_greedy():
    lls = [Loglikelihood(-1.0, False, 1), Loglikelihood(-3.0, True, 1)]
    assert mc_scores(lls, ["a", "b"], gold=1)["exact_match"] == 1.0
    assert mc_scores(lls, ["a", "b"], gold=0)["exact_match"] == 0.0


def test_choice_request_pairs_each_choice_with_the_delimiter():
    req = choice_request("Q: x\nAnswer:", ["A", "B"])
    assert req.kind == "loglikelihood" and req.pairs == [("Q: x\nAnswer:", " A"), ("Q: x\nAnswer:", " B")]
    with pytest.raises(ValueError):
        choice_request("Q", [])
    with pytest.raises(ValueError, match="3 choices"):
        mc_scores([Loglikelihood(-1.0, False, 1)], ["a", "b", "c"], 0)
