"""Parity of the GSM8K scorer with lm-evaluation-harness.

Reference: EleutherAI/lm-evaluation-harness at commit 4e7e0d47f33bc71070c1d38394bafbb52b117163,
``lm_eval/tasks/gsm8k/gsm8k.yaml`` (filters ``strict-match`` and ``flexible-extract``, metric
``exact_match`` with its kwargs), ``lm_eval/filters/extraction.py`` (``RegexFilter.apply``),
``lm_eval/filters/selection.py`` (``TakeFirstFilter``) and ``lm_eval/api/metrics.py``
(``exact_match_hf_evaluate``). The ``ref_*`` functions below re-implement those, numpy arrays included,
from reading them; ours are in ``harness.tasks.gsm8k.lmeval`` and the task's ``score``.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from harness.task import ScoreContext
from harness.tasks.gsm8k import lmeval
from harness.tasks.gsm8k.task import parse_row, score
from harness.types import Output

# ---- literal re-implementation of the reference -------------------------------------------------
REF_STRICT = dict(regex_pattern=r"#### (\-?[0-9\.\,]+)", group_select=0)
REF_FLEXIBLE = dict(regex_pattern=r"(-?[$0-9.,]{2,})|(-?[0-9]+)", group_select=-1)
REF_EM_KWARGS = dict(ignore_case=True, ignore_punctuation=False, regexes_to_ignore=[",", "\\$", "(?s).*#### ", "\\.$"])


def ref_regex_filter(resps: list[list[str]], regex_pattern: str, group_select: int = 0,
                     fallback: str = "[invalid]") -> list[list[str]]:
    regex = re.compile(regex_pattern)

    def filter_set(inst: list[str]) -> list[str]:
        filtered = []
        for resp in inst:
            if not isinstance(resp, str):
                resp = ""
            match = regex.findall(resp)
            if match:
                match = match[group_select]
                if isinstance(match, tuple):
                    match = [m for m in match if m]
                    if match:
                        match = match[0]
                    else:
                        match = fallback
                match = match.strip()
            else:
                match = fallback
            filtered.append(match)
        return filtered

    return [filter_set(x) for x in resps]


def ref_take_first(resps: list[list[str]]) -> list[str]:
    return [r[0] for r in resps]


def ref_exact_match(predictions: list[str], references: list[str], regexes_to_ignore: list[str] | None = None,
                    ignore_case: bool = False, ignore_punctuation: bool = False) -> float:
    if regexes_to_ignore is not None:
        for s in regexes_to_ignore:
            predictions = np.array([re.sub(s, "", x) for x in predictions])
            references = np.array([re.sub(s, "", x) for x in references])
    else:
        predictions = np.asarray(predictions)
        references = np.asarray(references)
    if ignore_case:
        predictions = np.char.lower(predictions)
        references = np.char.lower(references)
    assert not ignore_punctuation  # the gsm8k yaml sets it false
    return float(np.mean(predictions == references))


def ref_score(reply: str, answer: str) -> dict[str, float]:
    out = {}
    for name, kw in (("exact_match_strict", REF_STRICT), ("exact_match_flexible", REF_FLEXIBLE)):
        filtered = ref_take_first(ref_regex_filter([[reply]], **kw))
        out[name] = ref_exact_match(predictions=filtered, references=[answer], **REF_EM_KWARGS)
    return out


# ---- random replies and references ---------------------------------------------------------------
def number(rng: random.Random) -> str:
    kind = rng.randrange(8)
    n = rng.choice([0, 1, 7, 18, 42, 100, 1234, 98765, rng.randrange(10**7)])
    text = {0: str(n), 1: f"{n:,}", 2: f"{n}.00", 3: f"{n}.5", 4: f"-{n}", 5: f"${n:,}", 6: f"{n}.", 7: f"{n}.."}[kind]
    return text


def variant(rng: random.Random, final: str) -> str:
    """The reference's number as a reply might write it: as is, with $ or commas, trailing dots, zeros."""
    return rng.choice([final, final, f"${final}", final + ".", final + "..", final + ".00", final.replace(",", ""),
                       final.upper(), "-" + final])


def reply(rng: random.Random, final: str) -> str:
    pieces = []
    for _ in range(rng.randrange(0, 7)):
        pieces.append(rng.choice([
            variant(rng, final), "#### " + variant(rng, final), "\n#### " + variant(rng, final), number(rng),
            "The answer is", "so", "=", "\n", "####", "#### ", "####  ", "#### $", "####\n",
            "...", ".", ",", "$", "-", "a.b", "1.2.3", "It costs", "apples", "#### " + number(rng),
            "\n#### " + number(rng) + "\n", "ANSWER", "", "18", "18.00", "42...", "1,2",
        ]))
    return rng.choice([" ", "", "\n"]).join(pieces)


def answer(rng: random.Random) -> tuple[str, str]:
    final = rng.choice([number(rng), "18", "1,000", "5", "-3", "0.5", "$12"])
    work = rng.choice(["", "She sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.\n", "2 * 9 = 18\n"])
    return f"{work}#### {final}", final


EDGE = [
    ("", "#### 18"), ("####42", "#### 42"), ("#### $42", "#### 42"), ("#### 1\n#### 2", "#### 2"),
    ("#### 1\n#### 2", "#### 1"), ("#### 42..", "#### 42"), ("#### 42..", "#### 42."),
    ("the answer is 42...", "#### 42"),
    ("#### 18.00", "#### 18"), ("18", "#### 18.00"), ("#### 1,234", "#### 1234"), ("$1,234.", "#### 1,234"),
    ("#### -5", "#### -5"), ("-", "#### -"), ("....", "#### 18"), ("no numbers", "#### 0"), ("#### ,", "#### ,"),
    ("AB 12", "#### ab 12"), ("#### 7 and 8", "#### 7"), ("x 18\n", "#### 18\n"),
]


def cases() -> list[tuple[str, str]]:
    rng = random.Random(8)
    out = list(EDGE)
    for _ in range(400):
        solution, final = answer(rng)
        out.append((reply(rng, final), solution))
    return out


@pytest.mark.parametrize("text, solution", cases())
def test_scores_equal_lm_eval(text: str, solution: str) -> None:
    row = parse_row({"question": "q", "answer": solution}, "here", 0)
    ours = score(row, Output(text=text), ScoreContext()).values
    ref = ref_score(text, solution)
    assert {k: ours[k] for k in ref} == ref, (text, solution)


def test_the_known_disagreements_now_follow_lm_eval() -> None:
    assert lmeval.strict_match("####42") == "[invalid]" and lmeval.strict_match("#### $42") == "[invalid]"
    assert lmeval.strict_match("#### 1\nthen\n#### 2") == "1"  # the first ``####`` line, not the last
    assert lmeval.em_normalise("42..") == "42." and not lmeval.exact_match("#### 42..", "#### 42")
    assert lmeval.flexible_extract("the answer is 42...") == "42..."
    assert not lmeval.exact_match("the answer is 42...", "#### 42")
    assert not lmeval.exact_match("18.00", "#### 18") and lmeval.exact_match("$1,234.", "x\n#### 1234")


def test_the_numeric_reading_stays_forgiving() -> None:
    row = parse_row({"question": "q", "answer": "#### 18"}, "here", 0)
    values = score(row, Output(text="so 18.00 dollars"), ScoreContext()).values
    assert values == {"exact_match_flexible": 0.0, "exact_match_strict": 0.0, "exact_match_numeric": 1.0}
