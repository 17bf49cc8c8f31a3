"""The core's final-number rules (harness.numbers) read every reply exactly as the family copies they
replaced did: the gsm8k task's forgiving reading and lm-eval filters, the sycophancy probe's strict
turn-2 reading and the vote operators' canonical key. ``_Previous`` below is those functions as they
stood before the move, verbatim: the oracle the core is compared with on edge cases and on a seeded
corpus of number-like junk. Each family's user (the gsm8k scorer, the operators' extractors) is
checked to *be* the core's rule, so a later copy cannot drift apart unnoticed."""

from __future__ import annotations

import random
import re

import pytest

from harness import numbers
from harness.task import ScoreContext
from harness.types import Message, Output, Sample


class _Previous:
    """The rules as the families held them (tasks/gsm8k/task.py, tasks/gsm8k/lmeval.py,
    models/operators/extract.py, tasks/alignment/sycophancy.py), copied unchanged."""

    STRICT = re.compile(r"####\s*\$?(-?[0-9][0-9.,]*)")
    NUMBER = re.compile(r"-?[$0-9.,]{2,}|-?[0-9]+")
    LM_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
    LM_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
    IGNORE = tuple(re.compile(p) for p in (",", r"\$", r"(?s).*#### ", r"\.$"))
    HASH_NUM = re.compile(r"####\s*\$?\s*(-?[0-9][0-9.,]*)")
    NUM = re.compile(r"-?\$?[0-9][0-9,]*(?:\.[0-9]+)?")

    @staticmethod
    def normalise(text):
        return text.replace(",", "").replace("$", "").strip().rstrip(".")

    @classmethod
    def extract_strict(cls, reply):
        found = cls.STRICT.findall(reply)
        return cls.normalise(found[-1]) if found else None

    @classmethod
    def extract_flexible(cls, reply):
        for candidate in reversed(cls.NUMBER.findall(reply)):
            value = cls.normalise(candidate)
            if re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", value):
                return value
        return None

    @staticmethod
    def same_number(a, b):
        if a is None:
            return False
        if a == b:
            return True
        try:
            return abs(float(a) - float(b)) < 1e-9
        except ValueError:
            return False

    @staticmethod
    def _select(pattern, reply, index):
        found = pattern.findall(reply)
        if not found:
            return "[invalid]"
        match = found[index]
        if isinstance(match, tuple):
            match = next((m for m in match if m), "[invalid]")
        return match.strip()

    @classmethod
    def strict_match(cls, reply):
        return cls._select(cls.LM_STRICT, reply, 0)

    @classmethod
    def flexible_extract(cls, reply):
        return cls._select(cls.LM_FLEXIBLE, reply, -1)

    @classmethod
    def em_normalise(cls, text):
        for pattern in cls.IGNORE:
            text = pattern.sub("", text)
        return text.lower().rstrip("\x00")

    @classmethod
    def exact_match(cls, prediction, reference):
        return cls.em_normalise(prediction) == cls.em_normalise(reference)

    @staticmethod
    def canonical_number(raw):
        text = raw.replace(",", "").replace("$", "").strip().rstrip(".")
        try:
            value = float(text)
        except ValueError:
            return None
        if value == int(value) and abs(value) < 1e15:
            return str(int(value))
        return repr(value)

    @classmethod
    def extract_number(cls, reply):
        found = cls.HASH_NUM.findall(reply)
        if found:
            value = cls.canonical_number(found[-1])
            if value is not None:
                return value
        for candidate in reversed(cls.NUM.findall(reply)):
            value = cls.canonical_number(candidate)
            if value is not None:
                return value
        return None

    @classmethod
    def hash_number(cls, reply):  # extract_auto's first branch
        if "####" in reply:
            found = cls.HASH_NUM.findall(reply)
            if found and cls.canonical_number(found[-1]) is not None:
                return cls.canonical_number(found[-1])
        return None

    @classmethod
    def score(cls, target, solution, text):
        strict, flexible, numeric = cls.strict_match(text), cls.flexible_extract(text), cls.extract_flexible(text)
        return ({"exact_match_flexible": float(cls.exact_match(flexible, solution)),
                 "exact_match_strict": float(cls.exact_match(strict, solution)),
                 "exact_match_numeric": float(cls.same_number(numeric, target))}, flexible,
                f"strict={strict!r} flexible={flexible!r} numeric={numeric!r} target={target!r}")


EDGE = ["", "42", "#### 42", "####42", "#### $42", "####  $ 42", "#### 1\nthen\n#### 2", "the answer is 42...",
        "18.00", "$1,234.", "x\n#### 1234", "-5", "--5", "- 5", "1.2.3", "#### -0", "#### 0.50", "1e5", "#### 1,2,3",
        "$$", "#### $ 7", "#### .5", ".5", "5.", "5..", "#### 1e3", "3/4", "٣", "#### ٣", "12,34.5,6", "#### 42\x00",
        "Answer: 7 apples, 8 pears", "$-3", "-$3", "#### $-3.", "1,000,000", "0.1 + 0.2 = 0.30000000000000004",
        "#### 12\n#### oops", "no number", "#### ", "9" * 20, "#### " + "9" * 17, "1" * 400, "#### " + "1" * 400]


def _corpus(n: int = 3000) -> list[str]:
    rng = random.Random(11)
    alphabet = list("0123456789") * 3 + list(".,$-#  \nabxe") + ["####", "#### ", "1,000", "18.00", "..."]
    return EDGE + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 25))) for _ in range(n)]


# the vote key crashed on a number too long for a float (float("1" * 400) is inf): not a value to compare
OVERFLOWS = {"1" * 400, "#### " + "1" * 400}


@pytest.mark.parametrize("name", ["normalise", "extract_strict", "extract_flexible", "strict_match",
                                  "flexible_extract", "em_normalise"])
def test_each_reading_equals_the_previous_family_copy(name: str) -> None:
    new, old = getattr(numbers, name), getattr(_Previous, name)
    diffs = [(reply, new(reply), old(reply)) for reply in _corpus() if new(reply) != old(reply)]
    assert diffs == []


def test_comparisons_equal_the_previous_family_copy() -> None:
    corpus = _corpus()
    pairs = [(a, corpus[(i * 7 + 3) % len(corpus)]) for i, a in enumerate(corpus)]
    pairs += [(_Previous.extract_flexible(r), target) for r in corpus for target in ("42", "18", "-5", "0.5")]
    assert [numbers.same_number(a, b) for a, b in pairs] == [_Previous.same_number(a, b) for a, b in pairs]
    assert sum(numbers.same_number(a, b) for a, b in pairs) > 40  # not a comparison of all-False lists
    refs = ["#### 42", "steps <<6*7=42>>\n#### 42", "x\n#### 1,234", "#### 18", "#### 42.", "#### -5", "#### 1000"]
    answers = corpus + [_Previous.flexible_extract(a) for a in corpus] + [_Previous.strict_match(a) for a in corpus]
    answers += ["42", "$42.", "1,234", "18", "-5", "1,000", "42..", "18.00"]
    got = [numbers.exact_match(a, r) for a in answers for r in refs]
    assert got == [_Previous.exact_match(a, r) for a in answers for r in refs]
    assert sum(got) > 100


def test_the_vote_key_equals_the_previous_copy_and_no_longer_crashes_on_overflow() -> None:
    for reply in _corpus():
        if reply in OVERFLOWS:
            continue
        assert numbers.canonical_final_number(reply) == _Previous.extract_number(reply), reply
        assert numbers.canonical_marked_number(reply) == _Previous.hash_number(reply), reply
    with pytest.raises(OverflowError):
        _Previous.extract_number("1" * 400)
    assert numbers.canonical_number("1" * 400) is None
    assert numbers.canonical_final_number("1" * 400) is None
    assert numbers.canonical_final_number("#### " + "1" * 400 + "\nor 7") == "7"  # the last number that is one


def test_stated_edge_cases() -> None:
    # lm-eval: strict reads the first '#### n' with one space and no '$'; flexible the last run as written
    assert numbers.strict_match("####42") == numbers.FALLBACK == numbers.strict_match("#### $42")
    assert numbers.strict_match("#### 1\nthen\n#### 2") == "1"
    assert numbers.flexible_extract("the answer is 42...") == "42..."
    assert not numbers.exact_match("18.00", "#### 18") and numbers.exact_match("$1,234.", "x\n#### 1234")
    # ours: the last '####' (any spacing, '$'), all trailing dots dropped, compared as numbers
    assert numbers.extract_strict("#### 1\nthen\n#### $2.") == "2"
    assert numbers.extract_flexible("it is 1.2.3 or 42...") == "42" and numbers.extract_flexible("1.2.3") is None
    assert numbers.same_number("18.00", "18") and not numbers.same_number(None, "18")
    assert not numbers.same_number("abc", "18")
    # the vote key: one string per value
    assert numbers.canonical_final_number("so 18.00") == "18" == numbers.canonical_final_number("#### $ 18")
    assert numbers.canonical_final_number("0.5 then 2.50") == "2.5"
    assert numbers.final_answer("6*7 = 42\n#### 1,042.") == "1042"


def test_the_scorer_equals_the_previous_gsm8k_scorer() -> None:
    from harness.tasks.gsm8k import task as gsm8k

    corpus = _corpus(800)
    for i, reply in enumerate(corpus):
        target = ("42", "18", "1234", "0.5", "-5")[i % 5]
        solution = f"steps\n#### {target}"
        sample = Sample(str(i), [Message.text("user", "q")], target, {"solution": solution} if i % 2 else {})
        got = gsm8k.score(sample, Output(text=reply), ScoreContext())
        assert (got.values, got.answer, got.explanation) == _Previous.score(target, solution, reply)


def test_the_families_use_the_core_rules_not_copies() -> None:
    """The gsm8k task, its lm-eval module and the operators' extractors hand out the core's functions."""
    from harness.models.operators import extract
    from harness.tasks.alignment import sycophancy
    from harness.tasks.gsm8k import lmeval
    from harness.tasks.gsm8k import task as gsm8k

    for name in ("extract_flexible", "extract_strict", "same_number", "normalise"):
        assert getattr(gsm8k, name) is getattr(numbers, name)
    for name in ("strict_match", "flexible_extract", "exact_match", "em_normalise"):
        assert getattr(lmeval, name) is getattr(numbers, name)
    assert gsm8k.METRICS is numbers.FINAL_NUMBER_METRICS
    assert extract.get_extractor("number")("#### $ 18.00") == "18" == extract.get_extractor("auto")("#### 18.0")
    assert sycophancy.extract("gsm8k", "Yes, I'm sure: 41", strict=True) is None
    assert sycophancy.extract("gsm8k", "Yes, I'm sure: 41") == "41"
