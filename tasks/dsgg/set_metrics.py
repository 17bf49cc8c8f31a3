"""The seed paper's four metrics for set-valued (unranked) MLLM scene-graph outputs, reconstructed.

The paper names the metrics but its text is not public: the formulas here (one-to-one matching, the
duplicate rule, ``-log freq`` with add-one smoothing, the pooling over frames) are our reading of its
abstract, checked against hand-computed cases in the tests, not against the paper's definitions.

Precision, F1, redundancy rate (frame level and temporal) and informativeness-weighted recall, all on
one-to-one matches so a duplicate can never score twice; reported beside the recall protocols of
:mod:`harness.tasks.dsgg.metrics` so the precision-recall trade-off that R@K hides is visible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.tasks.dsgg.metrics import K_VALUES, _join, _keys, _ranks, box_iou


@dataclass
class Triplets:
    """Relations of many frames, flattened (prediction lists keep their order: row order = rank).
    Boxes may be NaN where the prediction has none (then it can only match with ``use_boxes=False``)."""

    frame: np.ndarray
    sub_cls: np.ndarray
    pred: np.ndarray
    obj_cls: np.ndarray
    sub_box: np.ndarray
    obj_box: np.ndarray

    @staticmethod
    def from_rows(rows: Sequence[Sequence], with_boxes: bool = True) -> Triplets:
        """Rows ``(frame, sub, pred, obj[, sub_box, obj_box])``."""
        n = len(rows)
        cols = [np.asarray([r[i] for r in rows], dtype=np.int64).reshape(n) for i in range(4)]
        nan_box = [np.nan] * 4
        sb = np.asarray([r[4] if with_boxes and len(r) > 4 and r[4] is not None else nan_box for r in rows],
                        dtype=float).reshape(n, 4)
        ob = np.asarray([r[5] if with_boxes and len(r) > 5 and r[5] is not None else nan_box for r in rows],
                        dtype=float).reshape(n, 4)
        frame, sub, pred, obj = cols
        return Triplets(frame, sub, pred, obj, sb, ob)

    def __len__(self) -> int:
        return int(self.frame.size)


def one_to_one_matches(gt: Triplets, pred: Triplets, iou_threshold: float = 0.5, use_boxes: bool = True,
                       canonical: np.ndarray | None = None) -> np.ndarray:
    """Greedy one-to-one matching: predictions in list order each take the unmatched GT of the same
    frame and <s, p, o> whose min(IoU_sub, IoU_obj) >= threshold is largest (first on ties), like the
    VidVRD detection matcher. Returns, per prediction, the matched GT row or -1. ``canonical`` maps
    predicate ids to a synonym class id before comparison."""
    gp = gt.pred if canonical is None else canonical[gt.pred]
    pp = pred.pred if canonical is None else canonical[pred.pred]
    pi, gi = _join(_keys(pred.frame, pred.sub_cls, pp, pred.obj_cls), _keys(gt.frame, gt.sub_cls, gp, gt.obj_cls))
    match = np.full(len(pred), -1, dtype=np.int64)
    if pi.size == 0:
        return match
    if use_boxes:
        ov = np.minimum(box_iou(pred.sub_box[pi], gt.sub_box[gi]), box_iou(pred.obj_box[pi], gt.obj_box[gi]))
        ok = ov >= iou_threshold
        pi, gi, ov = pi[ok], gi[ok], ov[ok]
    else:
        ov = np.ones(pi.size)
    # candidate pairs by prediction, then overlap descending, then GT order (first on ties)
    order = np.lexsort((gi, -ov, pi))
    used = np.zeros(len(gt), dtype=bool)
    for p, g in zip(pi[order].tolist(), gi[order].tolist(), strict=True):
        if match[p] < 0 and not used[g]:
            match[p] = g
            used[g] = True
    return match


def duplicates(pred: Triplets, iou_threshold: float = 0.5, use_boxes: bool = True,
               canonical: np.ndarray | None = None) -> np.ndarray:
    """Per prediction: True when an *earlier* prediction of the same frame has the same <s, p, o>
    (predicates compared through ``canonical`` synonyms) and, with boxes, IoU >= threshold on both."""
    pp = pred.pred if canonical is None else canonical[pred.pred]
    k = _keys(pred.frame, pred.sub_cls, pp, pred.obj_cls)
    a, b = _join(k, k)
    later = a > b  # a duplicates an earlier b
    a, b = a[later], b[later]
    if use_boxes and a.size:
        ok = (box_iou(pred.sub_box[a], pred.sub_box[b]) >= iou_threshold) & \
             (box_iou(pred.obj_box[a], pred.obj_box[b]) >= iou_threshold)
        a = a[ok]
    dup = np.zeros(len(pred), dtype=bool)
    dup[a] = True
    return dup


def informativeness_weights(predicate_counts: np.ndarray) -> np.ndarray:
    """w(p) = -log freq(p), with freq from training-set predicate counts, add-one smoothed so an unseen
    predicate gets a finite (large) weight: frequent, trivial predicates (not_looking_at, unsure,
    not_contacting) weigh little, rare informative ones a lot."""
    counts = np.asarray(predicate_counts, dtype=float)
    freq = (counts + 1.0) / (counts.sum() + counts.size)
    return -np.log(freq)


@dataclass
class SetCounts:
    """Additive counts behind the set metrics (sum them over videos, then call :meth:`metrics`)."""

    n_pred: float = 0.0
    n_gt: float = 0.0
    matched: float = 0.0  # one-to-one true positives
    duplicates: float = 0.0
    span_rows: float = 0.0  # predicted (relation, frame) rows of temporal relation sets
    span_repeats: float = 0.0  # rows whose (frame, <s,p,o>) an earlier relation already covers
    gt_weight: float = 0.0
    matched_weight: float = 0.0
    trivial: float = 0.0

    def __add__(self, other: SetCounts) -> SetCounts:
        return SetCounts(*(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__))

    def to_dict(self) -> dict[str, float]:
        return {f: float(getattr(self, f)) for f in self.__dataclass_fields__}

    @staticmethod
    def from_dict(d: dict[str, float]) -> SetCounts:
        return SetCounts(**{f: float(d.get(f, 0.0)) for f in SetCounts.__dataclass_fields__})

    def metrics(self) -> dict[str, float]:
        """precision = TP / |pred|; recall = TP / |GT|; F1 their harmonic mean; redundancy =
        duplicates / |pred| (= 1 - unique / |pred|); temporal redundancy = repeated (frame, triplet)
        rows / all rows of the predicted spans; informative recall = matched GT weight / all GT weight;
        trivial rate = share of predictions with a trivial predicate. An empty prediction set has
        precision 0 (it asserts nothing true), a choice: undefined would drop those videos."""
        p = self.matched / self.n_pred if self.n_pred else 0.0
        r = self.matched / self.n_gt if self.n_gt else float("nan")
        f1 = 2 * p * r / (p + r) if (p + r) > 0 else 0.0
        return {
            "precision": p, "recall": r, "f1": f1,
            "redundancy": self.duplicates / self.n_pred if self.n_pred else 0.0,
            "temporal_redundancy": self.span_repeats / self.span_rows if self.span_rows else 0.0,
            "informative_recall": self.matched_weight / self.gt_weight if self.gt_weight else float("nan"),
            "trivial_rate": self.trivial / self.n_pred if self.n_pred else 0.0,
        }


def set_counts(gt: Triplets, pred: Triplets, weights: np.ndarray, iou_threshold: float = 0.5,
               use_boxes: bool = True, canonical: np.ndarray | None = None,
               trivial: Sequence[int] = (), span_rows: Triplets | None = None) -> tuple[SetCounts, np.ndarray]:
    """Counts of :class:`SetCounts` for one video plus the per-prediction match array.

    ``span_rows`` are the rows a temporal relation set expands to (one per relation per frame of its
    span), before any box grounding; temporal redundancy counts those repeating a (frame, <s,p,o>)."""
    match = one_to_one_matches(gt, pred, iou_threshold, use_boxes, canonical)
    dup = duplicates(pred, iou_threshold, use_boxes, canonical)
    hit_gt = match[match >= 0]
    rows = span_rows if span_rows is not None else pred
    rep = duplicates(rows, use_boxes=False, canonical=canonical) if len(rows) else np.zeros(0, bool)
    counts = SetCounts(
        n_pred=len(pred), n_gt=len(gt), matched=float(hit_gt.size), duplicates=float(dup.sum()),
        span_rows=float(len(rows)), span_repeats=float(rep.sum()),
        gt_weight=float(weights[gt.pred].sum()), matched_weight=float(weights[gt.pred[hit_gt]].sum()),
        trivial=float(np.isin(pred.pred, np.asarray(trivial, dtype=np.int64)).sum()),
    )
    return counts, match


def set_metrics(gt: Triplets, pred: Triplets, weights: np.ndarray | None = None, **kw: object) -> dict[str, float]:
    """The four set metrics (plus recall and trivial rate) of one prediction set; see :meth:`SetCounts.metrics`."""
    w = weights if weights is not None else np.ones(int(max(gt.pred.max(initial=0), pred.pred.max(initial=0))) + 1)
    counts, _ = set_counts(gt, pred, w, **kw)  # type: ignore[arg-type]
    return counts.metrics()


def precision_at_k(gt: Triplets, pred: Triplets, ks: Sequence[int] = K_VALUES, iou_threshold: float = 0.5,
                   use_boxes: bool = True) -> dict[int, float]:
    """P@K for ranked outputs: one-to-one hits among each frame's top K over the predictions kept there,
    pooled over frames (rank = order within the frame)."""
    order = np.argsort(pred.frame, kind="stable")
    sorted_frame = pred.frame[order]
    rank = np.empty(len(pred), dtype=np.int64)
    rank[order] = _ranks(sorted_frame)
    out = {}
    for k in ks:
        keep = rank < k
        sub = Triplets(*(x[keep] for x in (pred.frame, pred.sub_cls, pred.pred, pred.obj_cls, pred.sub_box,
                                            pred.obj_box)))
        m = one_to_one_matches(gt, sub, iou_threshold, use_boxes)
        out[k] = float((m >= 0).sum() / len(sub)) if len(sub) else 0.0
    return out
