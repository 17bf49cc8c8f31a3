"""PartVerse-QA metrics: slot Jaccard/EM by hand, caption metrics against hand values and the
reference libraries, the judge reply parser on odd replies, offline WordNet."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from requirements import needs

from harness.tasks.partverse import captions, slots
from harness.tasks.partverse.judge import PROMPT, judge_messages, parse_reply

os.environ.setdefault("OMP_NUM_THREADS", "1")
HAVE_WORDNET = Path("/usr/share/wordnet/index.sense").exists()


# ---- C2S slots ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("reply", "expected"), [
    ("<part_3>, <part_7>", {3, 7}),
    ("<part_7>,<part_3>,<part_3>", {3, 7}),              # duplicates and order do not matter
    ("The seat is <part_12> and also <part_0>.", {0, 12}),
    ("<part_>, <part 3>, part_4, <Part_5>, <part_x>", set()),  # malformed: not slots (case-sensitive)
    ("<part_03>", {3}),                                   # int("03") == 3, as the released regex + int()
    ("<part_1><part_2>", {1, 2}),
    ("", set()),
])
def test_parse_slots(reply: str, expected: set[int]) -> None:
    assert slots.parse_slots(reply) == expected


@pytest.mark.parametrize(("gold", "pred", "jaccard", "em"), [
    ({3, 7}, {3, 7}, 1.0, 1.0),
    ({3, 7}, {7}, 0.5, 0.0),
    ({3, 7}, {3, 7, 9}, 2 / 3, 0.0),
    ({1, 2, 3}, {3, 4}, 1 / 4, 0.0),
    ({3, 7}, set(), 0.0, 0.0),          # empty prediction -> 0
    (set(), set(), 0.0, 0.0),           # empty gold: Jaccard 0 and never an exact match
    (set(), {1}, 0.0, 0.0),
    ({5}, {6}, 0.0, 0.0),
])
def test_jaccard_and_exact_match(gold: set[int], pred: set[int], jaccard: float, em: float) -> None:
    assert slots.jaccard(gold, pred) == pytest.approx(jaccard)
    assert slots.exact_match(gold, pred) == em


def test_gold_slots_use_the_part_index_base() -> None:
    assert slots.gold_slots([0, 4], 0) == {0, 4}
    assert slots.gold_slots([0, 4], 1) == {1, 5}  # <part_1>.. vocabulary
    assert slots.format_slots({7, 3}) == "<part_3>,<part_7>"


# ---- traditional caption metrics ------------------------------------------------------------------
GT = "a red wooden chair with four legs"


def test_bleu_by_hand_and_against_nltk() -> None:
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    got = captions.bleu_scores(GT, "a red chair")
    # BLEU-1 = brevity penalty exp(1 - 7/3) x unigram precision 3/3
    assert got["bleu-1"] == pytest.approx(100 * math.exp(1 - 7 / 3))
    # BLEU-2: bigram precision 1/2 ("a red" of "a red", "red chair")
    assert got["bleu-2"] == pytest.approx(100 * math.exp(1 - 7 / 3) * math.sqrt(1.0 * 0.5))
    smooth = SmoothingFunction().method1
    ref = sentence_bleu([GT.split()], "a red chair".split(), weights=(0.33, 0.33, 0.33, 0), smoothing_function=smooth)
    assert got["bleu-3"] == pytest.approx(100 * ref)
    assert captions.bleu_scores(GT, GT)["bleu-4"] == pytest.approx(100.0)
    assert captions.bleu_scores(GT, "") == {"bleu-1": 0.0, "bleu-2": 0.0, "bleu-3": 0.0, "bleu-4": 0.0}  # "##"


def test_rouge_is_the_reference_package_and_differs_from_rouge_score() -> None:
    from rouge_score import rouge_scorer

    got = captions.rouge_scores(GT, "a red chair")
    # LCS 3: P = 1, R = 3/7, F = 0.6 (the rouge package's F carries a 1e-8 epsilon)
    assert got["rouge-l"] == pytest.approx(60.0, abs=1e-5)
    assert got["rouge-1"] == pytest.approx(60.0, abs=1e-5)
    assert got["rouge-2"] == pytest.approx(25.0, abs=1e-5)  # bigrams: 1 of 2 vs 1 of 6
    # case and punctuation: `rouge` (reference) sees "A", "Red", "chair." as new words ...
    assert captions.rouge_scores(GT, "A Red chair.")["rouge-l"] == pytest.approx(20.0, abs=1e-5)
    # ... Google's rouge-score normalises them away: the documented difference
    google = rouge_scorer.RougeScorer(["rougeL"]).score(GT, "A Red chair.")["rougeL"].fmeasure
    assert google == pytest.approx(0.6)
    # the reference package rejects a hypothesis that is empty after its cleaning; we score 0
    assert captions.rouge_scores(GT, ".") == {"rouge-1": 0.0, "rouge-2": 0.0, "rouge-l": 0.0}


@needs(HAVE_WORDNET, "WordNet 3.0 (Debian wordnet-base, wordnet-sense-index)", "tests/setup.d/75-partverse.sh")
def test_meteor_by_hand_with_offline_wordnet() -> None:
    # exact matches a, red, chair: P=1, R=3/7, Fmean = PR/(0.9P + 0.1R); 2 chunks of 3 matches
    fmean = (3 / 7) / (0.9 + 0.1 * 3 / 7)
    assert captions.meteor(GT, "a red chair") == pytest.approx(100 * fmean * (1 - 0.5 * (2 / 3) ** 3))
    # "auto" matches "car" only through WordNet synonyms: 3 matches, one chunk
    assert captions.meteor("a red car", "a red auto") == pytest.approx(100 * (1 - 0.5 * (1 / 3) ** 3))
    assert captions.meteor("a red car", "a red banana") == pytest.approx(100 * (2 / 3) * (1 - 0.5 * (1 / 2) ** 3))


def test_wordnet_corpus_built_from_debian_files(tmp_path: Path) -> None:
    from harness.tasks.partverse import wordnet

    fake = tmp_path / "debian"
    fake.mkdir()
    with pytest.raises(wordnet.WordNetUnavailable, match="apt-get install wordnet-base"):
        wordnet.build_from_debian(fake, tmp_path / "nltk")
    if not HAVE_WORDNET:
        return
    root = wordnet.build_from_debian(nltk_root=tmp_path / "nltk")
    lexnames = (root / "corpora" / "wordnet" / "lexnames").read_text().splitlines()
    assert len(lexnames) == 45 and lexnames[0] == "00\tadj.all\t3" and lexnames[-1] == "44\tadj.ppl\t3"


def test_embedding_similarity_with_the_shipped_minilm() -> None:
    path = captions.default_embedder_path()
    same = captions.sentence_similarity(path, "a red chair", "a red chair")
    close = captions.sentence_similarity(path, "a red wooden chair", "a crimson seat made of wood")
    far = captions.sentence_similarity(path, "a red wooden chair", "quarterly tax filing deadline")
    assert same == pytest.approx(100.0, abs=1e-3)
    assert close > far + 20


def test_sbert_and_simcse_paths_with_local_models(tmp_path: Path) -> None:
    """The paper's models cannot be fetched here; the same code paths run on local folders (a tiny
    random BERT stands in for SimCSE's RoBERTa: pooler output, cosine)."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    minilm = captions.default_embedder_path()
    tokenizer = BertTokenizerFast.from_pretrained(minilm, local_files_only=True)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64)
    BertModel(config).save_pretrained(tmp_path / "simcse")
    tokenizer.save_pretrained(tmp_path / "simcse")
    metrics = captions.CaptionMetrics(traditional=False, embedder=None, sbert_model=minilm,
                                      simcse_model=str(tmp_path / "simcse"))
    values, _ = metrics.compute("a red chair", "a red chair")
    assert set(values) == {"sbert_similarity", "simcse_similarity"}
    assert values["simcse_similarity"] == pytest.approx(100.0, abs=1e-3)
    import torch

    model = BertModel.from_pretrained(tmp_path / "simcse").eval()
    batch = tokenizer(["a red chair", "quarterly tax filing deadline"], padding=True, return_tensors="pt")
    with torch.no_grad():
        pooled = model(**batch).pooler_output
    expected = 100 * torch.nn.functional.cosine_similarity(pooled[0:1], pooled[1:2]).item()
    values, _ = metrics.compute("a red chair", "quarterly tax filing deadline")
    assert values["simcse_similarity"] == pytest.approx(expected, abs=1e-3)


def test_word_f1_and_exact_norm_match() -> None:
    # pred 3 words, gold 4; common bag: "a", "red" (once each) -> P = 2/3, R = 2/4
    assert captions.word_f1("A red red", "a red wooden chair") == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert captions.word_f1("", "a chair") == 0.0 and captions.word_f1("x", "") == 0.0
    assert captions.exact_norm_match("  A  Red chair ", "a red chair") == 1.0
    assert captions.exact_norm_match("a red chair.", "a red chair") == 0.0  # punctuation counts
    assert captions.exact_norm_match("", "") == 0.0


def test_caption_metrics_names_and_substitute() -> None:
    values, notes = captions.CaptionMetrics(traditional=False).compute("a red chair", "a red chair")
    assert set(values) == {"minilm_similarity"}  # the substitute is named as such, never "sbert"
    values, _ = captions.CaptionMetrics(traditional=True, embedder=None).compute("a", "")
    assert "minilm_similarity" not in values and values["bleu-1"] == 0.0


# ---- judge reply parsing --------------------------------------------------------------------------
@pytest.mark.parametrize(("reply", "score"), [
    ("85#mentions the colour and the legs", 85),
    ("  100#perfect\n", 100),
    ("0#nothing matches", 0),
    ("Score: 70#ok", 70),                        # the first <digits># anywhere, as the reference
    ("3 aspects found; 60#two of three", 60),
    ("60#a#b", 60),
    ("101#too high", None),                      # out of 0..100
    ("85 # spaced", None),
    ("eighty#words", None),
    ("I cannot evaluate this.", None),
    ("", None),
])
def test_parse_judge_reply(reply: str, score: int | None) -> None:
    parsed = parse_reply(reply)
    assert (parsed["score"] if parsed else None) == score


def test_judge_prompt_is_pointllm_format() -> None:
    msgs = judge_messages("a red chair", "a chair")
    text = msgs[0].text_content
    assert msgs[0].role == "user" and "Human-generated caption: a red chair\nModel-generated caption: a chair" in text
    assert text.endswith("Your response:") and "'score#reason'" in PROMPT


# ---- geometric IoU over the partition pack ---------------------------------------------------------
def test_point_regions_follow_the_pointbert_group_lift() -> None:
    import numpy as np

    from harness.tasks.partverse.geometry import point_regions

    xyz = np.array([[0, 0, 0], [0.1, 0, 0], [0.2, 0, 0], [2.4, 0, 0], [5, 0, 0]], dtype=np.float32)
    centres = np.array([[0, 0, 0], [5, 0, 0]], dtype=np.float32)
    # patch 0 claims its 3 nearest (0, 0.1, 0.2); patch 1 claims 5, 2.4, 0.2. Point 2.4 is nearer
    # patch 0's centre but only patch 1 claims it, so it goes to patch 1 (Voronoi would say 0);
    # point 0.2 is claimed by both and takes the nearer centre.
    assert point_regions(xyz, centres, np.array([7, 9]), group_size=3).tolist() == [7, 7, 7, 9, 9]
    # with group size 1 nobody claims 2.4 or 0.1/0.2: they fall back to the nearest centre
    assert point_regions(xyz, centres, np.array([7, 9]), group_size=1).tolist() == [7, 7, 7, 7, 9]


def test_geometric_iou_by_hand(tmp_path: Path) -> None:
    import numpy as np

    from harness.tasks.partverse.geometry import geometric_iou

    xyz = np.array([[0, 0, 0], [0.1, 0, 0], [0.2, 0, 0], [2.4, 0, 0], [5, 0, 0]], dtype=np.float32)
    cloud = np.concatenate([xyz, np.full((5, 3), 0.5, dtype=np.float32)], axis=1)
    np.save(tmp_path / "obj_5.npy", cloud)
    # pack centres live in the normalised cloud's frame: centred on the centroid, scaled into the unit ball
    centroid = xyz.mean(0)
    scale = np.sqrt(((xyz - centroid) ** 2).sum(1)).max()
    centres = (np.array([[0, 0, 0], [5, 0, 0]], dtype=np.float32) - centroid) / scale
    np.savez(tmp_path / "obj.pack.npz", patch_xyz=centres, patch_r16=np.array([2, 5]))
    got = geometric_iou(tmp_path / "obj_5.npy", tmp_path / "obj.pack.npz", {5}, {2, 5}, 0, k=16)
    # patches: gold {patch 1}, pred {0, 1} -> 1/2; points (group size 32 > 5: every patch claims
    # every point, so each point takes its nearest centre): regions [2, 2, 2, 2, 5] -> gold {4}, pred all -> 1/5
    assert got == {"patch_iou": pytest.approx(0.5), "point_iou": pytest.approx(0.2)}
    assert geometric_iou(tmp_path / "obj_5.npy", tmp_path / "obj.pack.npz", set(), {2}) == {}
    # a slot outside 0..K-1 is not a region: <part_99> adds nothing
    assert geometric_iou(tmp_path / "obj_5.npy", tmp_path / "obj.pack.npz", {5}, {5, 99})["patch_iou"] == 1.0
