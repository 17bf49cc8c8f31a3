"""Scored predictions of existing DSGG models in STTran's layout, scored with the AG protocol.

``Output.prediction = {"format": "sttran", "boxes": [[x1,y1,x2,y2], ...], "labels": [...],
"obj_scores": [...], "pair_idx": [[person, object], ...], "pair_frame": [...], "attention": [[3]],
"spatial": [[6]], "contacting": [[17]]}`` -- labels in STTran's numbering (``__background__`` = 0, so
person = 1 = our category index + 1), frames = the video's annotated-frame numbers, attention as
probabilities (STTran softmaxes its logits before evaluating). R@K / mR@K under all three constraints;
the set metrics read the with-constraint triplets (three per pair) as the predicted set.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.tasks.dsgg import metrics as M
from harness.tasks.dsgg import set_metrics as S
from harness.tasks.dsgg.scoring import KS, Vocab, _sparse, gt_rows

FIELDS = ("boxes", "labels", "obj_scores", "pair_idx", "pair_frame", "attention", "spatial", "contacting")
WIDTHS = {"boxes": 4, "pair_idx": 2, "attention": 3, "spatial": 6, "contacting": 17}


class PredictionError(ValueError):
    """A malformed STTran-format prediction; the message is one line."""


def parse_prediction(pred: dict[str, Any], n_frames: int) -> M.AGPrediction:
    """Check and convert a prediction. Empty lists (no boxes, no pairs) are valid: they score 0.
    Only this step rejects input; scoring a prediction that passed it must not raise."""
    missing = [k for k in FIELDS if k not in pred]
    if missing:
        raise PredictionError(f"missing field(s) {', '.join(missing)}")
    arrays: dict[str, np.ndarray] = {}
    for key in FIELDS:
        dtype = np.int64 if key in ("labels", "pair_idx", "pair_frame") else float
        try:
            a = np.asarray(pred[key], dtype=dtype)
        except (TypeError, ValueError, OverflowError):
            raise PredictionError(f"field {key!r} is not a numeric array") from None
        width = WIDTHS.get(key, 1)
        if a.size % width:
            raise PredictionError(f"field {key!r} should have {width} values per row, got {a.size} values")
        arrays[key] = a.reshape(-1, width) if key in WIDTHS else a.reshape(-1)
    n_boxes, n_pairs = len(arrays["boxes"]), len(arrays["pair_idx"])
    for key in ("labels", "obj_scores"):
        if len(arrays[key]) != n_boxes:
            raise PredictionError(f"field {key!r} has {len(arrays[key])} entries for {n_boxes} boxes")
    for key in ("pair_frame", "attention", "spatial", "contacting"):
        if len(arrays[key]) != n_pairs:
            raise PredictionError(f"field {key!r} has {len(arrays[key])} rows for {n_pairs} pairs")
    if n_pairs and (arrays["pair_idx"].min() < 0 or arrays["pair_idx"].max() >= n_boxes):
        raise PredictionError(f"pair_idx out of range (0..{n_boxes - 1})")
    if n_pairs and (arrays["pair_frame"].min() < 0 or arrays["pair_frame"].max() >= n_frames):
        raise PredictionError(f"pair_frame out of range (0..{n_frames - 1})")
    return M.AGPrediction(*(arrays[k] for k in FIELDS))


def score_sttran(video: dict[str, Any], p: M.AGPrediction, vocab: Vocab, weights: np.ndarray
                 ) -> tuple[dict[str, float], dict[str, Any]]:
    """``p`` from :func:`parse_prediction`."""
    rows = gt_rows(video)
    gt = S.Triplets.from_rows([(f, vocab.category(video, s) + 1, vocab.pred_id[pr], vocab.category(video, o) + 1,
                                sb, ob) for f, s, pr, o, sb, ob in rows])
    values: dict[str, float] = {}
    details: dict[str, Any] = {"recall": {}, "n_predicates": len(vocab.predicates)}
    for constraint, suffix in (("with", ""), ("no", "_no"), ("semi", "_semi")):
        cand = M.ag_candidates(p, constraint, max_rank=max(KS))
        best = M.first_hit_rank(gt, cand)
        res = M.recall_from_ranks(gt.frame, gt.pred, best, video["n_frames"], KS, len(vocab.predicates))
        details["recall"][constraint] = {
            "frame_recall_sum": {str(k): float(res.frame_recall[:, j].sum()) for j, k in enumerate(KS)},
            "frames": int(res.frames.size), "hits": {str(k): _sparse(res.hits[j]) for j, k in enumerate(KS)},
            "counts": _sparse(res.counts)}
        for j, k in enumerate(KS):
            values[f"R@{k}{suffix}"] = float(res.frame_recall[:, j].mean()) if res.frames.size else 0.0
    full = M.ag_candidates(p, "with", max_rank=10**9)
    pred_set = S.Triplets(full.frame, full.sub_cls, full.pred, full.obj_cls, full.sub_box, full.obj_box)
    counts, _ = S.set_counts(gt, pred_set, weights, trivial=vocab.trivial)
    details["set"] = counts.to_dict()
    values.update({k: v for k, v in counts.metrics().items() if v == v})
    return values, details
