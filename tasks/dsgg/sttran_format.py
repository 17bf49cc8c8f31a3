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


def _prediction(pred: dict[str, Any]) -> M.AGPrediction:
    arr = lambda key, dtype=float: np.asarray(pred[key], dtype=dtype)  # noqa: E731
    return M.AGPrediction(arr("boxes").reshape(-1, 4), arr("labels", np.int64), arr("obj_scores"),
                          arr("pair_idx", np.int64).reshape(-1, 2), arr("pair_frame", np.int64),
                          arr("attention").reshape(-1, 3), arr("spatial").reshape(-1, 6),
                          arr("contacting").reshape(-1, 17))


def score_sttran(video: dict[str, Any], pred: dict[str, Any], vocab: Vocab, weights: np.ndarray
                 ) -> tuple[dict[str, float], dict[str, Any]]:
    p = _prediction(pred)
    if p.pair_idx.size and (p.pair_idx.max() >= len(p.labels) or p.pair_frame.max() >= video["n_frames"]):
        raise ValueError("pair_idx or pair_frame out of range")
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
