"""Parity of the PartVerse-QA C2S scorer and the PointLLM caption metrics with the released code.

References:
- jintangxue/3D-PLOT-LLM at commit 84ae5d7b02e8e186117464bc2f51ac92dc8d8e19,
  ``eval_tools/compute_c2s_metrics.py`` (``parse_slots``, ``gt_slots``, ``jaccard``, ``exact_match`` and
  ``main``'s means: Jaccard over queries, exact match in percent);
- OpenRobotLab/PointLLM at commit 77bf64cc703c70ea896b44326b96673ffed5af4e,
  ``pointllm/eval/traditional_evaluator.py`` (``TraditionalMetricEvaluator.evaluate_result``: BLEU-1..4,
  ROUGE-1/2/L, METEOR, all x100, an empty reply read as ``"##"``). The embedding similarities need the
  SBERT / SimCSE weights and are not re-run here.
The ``ref_*`` functions re-implement them from reading them, with the same libraries (nltk, rouge). The
one change: METEOR is handed the offline WordNet 3.0 this machine has (the reference reads NLTK's
downloaded copy of the same database). Replies the ``rouge`` package refuses as empty (whitespace,
"."), on which the reference crashes, are left out of the caption parity; ours scores them 0.
"""

from __future__ import annotations

import random
import re

import pytest

from harness.tasks.partverse import slots
from harness.tasks.partverse.captions import CaptionMetrics
from harness.tasks.partverse.wordnet import load_wordnet

# ---- literal re-implementation: C2S ------------------------------------------------------------
REF_PART_RE = re.compile(r"<part_(\d+)>")


def ref_parse_slots(text):  # type: ignore[no-untyped-def]
    return {int(m.group(1)) for m in REF_PART_RE.finditer(text or "")}


def ref_gt_slots(entry):  # type: ignore[no-untyped-def]
    return set(int(g) for g in entry.get("meta", {}).get("bcp_group_ids", []))


def ref_jaccard(a, b):  # type: ignore[no-untyped-def]
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def ref_exact_match(a, b):  # type: ignore[no-untyped-def]
    return 1.0 if (a == b and a) else 0.0


def reply(rng: random.Random) -> str:
    tokens = [f"<part_{rng.randint(0, 17)}>" for _ in range(rng.randint(0, 5))]
    near_misses = ["<part_>", "<Part_3>", "part_3", "<part 3>", "<part_03>", "<part_3", "none"]
    tokens += rng.sample(near_misses, rng.randint(0, 2))
    rng.shuffle(tokens)
    return rng.choice([",", ", ", " ", "\n"]).join(tokens)


@pytest.mark.parametrize("case", range(40))
def test_c2s_equals_the_released_scorer(case: int) -> None:
    rng = random.Random(case)
    rows = []
    for _ in range(rng.randint(1, 15)):
        gold = rng.sample(range(16), rng.randint(0 if case % 9 == 0 else 1, 4))
        rows.append(({"meta": {"bcp_group_ids": gold}}, reply(rng) if rng.random() < 0.7 else slots.format_slots(gold)))
    js, ems, our_js, our_ems = [], [], [], []
    for entry, text in rows:
        gs, ps = ref_gt_slots(entry), ref_parse_slots(text)
        js.append(ref_jaccard(gs, ps))
        ems.append(ref_exact_match(gs, ps))
        gold, pred = slots.gold_slots(entry["meta"]["bcp_group_ids"]), slots.parse_slots(text)
        our_js.append(slots.jaccard(gold, pred))
        our_ems.append(slots.exact_match(gold, pred))
    assert our_js == js and our_ems == ems
    assert sum(our_js) / len(rows) == pytest.approx(sum(js) / len(rows))


# ---- literal re-implementation: PointLLM traditional metrics ------------------------------------
def ref_evaluate_result(ground_truth: str, model_output: str) -> dict[str, float]:
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from nltk.translate.meteor_score import meteor_score
    from rouge import Rouge

    if model_output == "":
        model_output = "##"
    smoothing_function = SmoothingFunction().method1
    bleu_1 = sentence_bleu([ground_truth.split()], model_output.split(), weights=(1, 0, 0, 0),
                           smoothing_function=smoothing_function)
    bleu_2 = sentence_bleu([ground_truth.split()], model_output.split(), weights=(0.5, 0.5, 0, 0),
                           smoothing_function=smoothing_function)
    bleu_3 = sentence_bleu([ground_truth.split()], model_output.split(), weights=(0.33, 0.33, 0.33, 0),
                           smoothing_function=smoothing_function)
    bleu_4 = sentence_bleu([ground_truth.split()], model_output.split(), weights=(0.25, 0.25, 0.25, 0.25),
                           smoothing_function=smoothing_function)
    rouge = Rouge()
    rouge_l = rouge.get_scores(model_output, ground_truth)[0]["rouge-l"]
    rouge_1 = rouge.get_scores(model_output, ground_truth)[0]["rouge-1"]
    rouge_2 = rouge.get_scores(model_output, ground_truth)[0]["rouge-2"]
    meteor = meteor_score([ground_truth.split()], model_output.split(), wordnet=load_wordnet())
    return {"bleu-1": bleu_1 * 100, "bleu-2": bleu_2 * 100, "bleu-3": bleu_3 * 100, "bleu-4": bleu_4 * 100,
            "rouge-l": rouge_l["f"] * 100, "rouge-1": rouge_1["f"] * 100, "rouge-2": rouge_2["f"] * 100,
            "meteor": meteor * 100}


WORDS = ["a", "the", "red", "wooden", "chair", "chairs", "with", "four", "legs", "leg", "table", "lamp", "shade",
         "black", "Red", "Chair.", "seat", "backrest", "metal", "small", "round", "of", "and", "is", "sitting"]


def caption(rng: random.Random, lo: int = 0) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(lo, 14))]
    text = " ".join(words)
    return rng.choice([text, text + ".", text.capitalize(), text.upper()]) if text else ""


CAPTIONS = [(caption(random.Random(c), 1), caption(random.Random(10_000 + c))) for c in range(120)]
CAPTIONS += [("a red wooden chair with four legs", "A Red chair."), ("a lamp", ""), ("a lamp", "a lamp"),
             ("a red chair", "a red chair a red chair a red chair")]


@pytest.mark.parametrize("gt, out", CAPTIONS)
def test_caption_metrics_equal_pointllm(gt: str, out: str) -> None:
    try:
        ref = ref_evaluate_result(gt, out)
    except ValueError:  # the rouge package refuses this hypothesis: the reference crashes, we score 0
        return
    ours, _ = CaptionMetrics(embedder=None).compute(gt, out)
    assert ours.keys() == ref.keys()
    for name, value in ref.items():
        assert ours[name] == pytest.approx(value, abs=1e-9), name


# ---- literal re-implementation: PointLLM's caption judge parsing ---------------------------------
def ref_parse_gpt_response_evaluate(gpt_response: str) -> int:
    """``OpenAIObjectCaptioningEvaluator.parse_gpt_response_evaluate`` (pointllm/eval/evaluator.py):
    the score, -1 for an invalid reply."""
    pattern = r"(\d*#.*)"
    match = re.search(pattern, gpt_response)
    gpt_response = match.group(1) if match else gpt_response
    gpt_response = gpt_response.strip()
    gpt_response_list = gpt_response.split("#")
    gpt_score = gpt_response_list[0]
    try:
        gpt_score = int(gpt_score)
        if gpt_score not in range(101):
            gpt_score = -1
    except ValueError:
        gpt_score = -1
    return gpt_score


JUDGE_PIECES = ["85", "100", "101", "0", "-5", "007", " ", "#", "##", "Score:", "score is", "\n", "good", "a#b",
                "#1:", "60#two of three", "85 # spaced", "eighty#words", "+40", "1_0", "", "50%", "#reason"]


@pytest.mark.parametrize("case", range(300))
def test_judge_parsing_equals_pointllm(case: int) -> None:
    from harness.tasks.partverse.judge import parse_reply

    rng = random.Random(case)
    text = rng.choice(["", " ", "#"]).join(rng.choice(JUDGE_PIECES) for _ in range(rng.randint(0, 4)))
    ref = ref_parse_gpt_response_evaluate(text)
    ours = parse_reply(text)
    assert (ours["score"] if ours else -1) == ref, repr(text)


def test_judge_parsing_differences_that_were_fixed() -> None:
    from harness.tasks.partverse.judge import parse_reply

    assert parse_reply(" 85 ") == {"score": 85, "reason": ""}  # no '#': the reference reads the whole reply
    assert parse_reply("#1: 80#ok") is None  # the first '#' has no digits before it
    assert ref_parse_gpt_response_evaluate(" 85 ") == 85 and ref_parse_gpt_response_evaluate("#1: 80#ok") == -1
