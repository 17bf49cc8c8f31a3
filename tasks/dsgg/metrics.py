"""Dynamic scene graph metrics, vectorised with numpy; usable on its own.

Recall protocols, each documented at its function:

- Action Genome (STTran ``lib/evaluation_recall.py``, TEMPURA's ``calc_mrecall``): PredCls/SGCls/SGDet
  differ only in what the model is given, not in scoring, so one evaluator serves all three.
  :func:`evaluate_ag` takes scored per-frame predictions (boxes, labels, object scores, subject-object
  pairs and the attention/spatial/contacting distributions, as the STTran evaluator does) and returns
  R@K (per-frame recall averaged over frames) and mR@K (per-predicate hits/counts pooled over the data
  set, averaged over all 26 predicates; absent predicates contribute 0) under the with / no / semi
  graph constraint.
- VidVRD and PVSG (whole-trajectory / mask vIoU protocols) live in
  :mod:`harness.tasks.dsgg.video_metrics`.
- Set-valued (unranked) MLLM outputs: the four added metrics live in
  :mod:`harness.tasks.dsgg.set_metrics` (precision, F1, redundancy, informativeness-weighted recall).

Boxes are ``[x1, y1, x2, y2]`` pixel coordinates; box IoU uses the ``+1`` pixel convention of the
reference evaluators (``bbox_overlaps`` in STTran's Cython helper, ``iou``/``viou`` in VidVRD-helper).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

import numpy as np

K_VALUES: tuple[int, ...] = (10, 20, 50, 100)
N_PREDICATES = 26
# Action Genome predicate index ranges (STTran order): attention 0-2, spatial 3-8, contacting 9-25
ATTENTION = (0, 3)
SPATIAL = (3, 9)
CONTACTING = (9, 26)
CONSTRAINTS = ("with", "no", "semi")


# ----------------------------------------------------------------------------------------------
# geometry


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise IoU of two (n, 4) box arrays with the ``+1`` pixel convention of the references
    (width = x2 - x1 + 1): the convention decides whether a pair sits exactly at 0.5."""
    a = np.asarray(a, dtype=float).reshape(-1, 4)
    b = np.asarray(b, dtype=float).reshape(-1, 4)
    iw = np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]) + 1
    ih = np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]) + 1
    inter = np.where((iw > 0) & (ih > 0), iw * ih, 0.0)
    area_a = (a[:, 2] - a[:, 0] + 1) * (a[:, 3] - a[:, 1] + 1)
    area_b = (b[:, 2] - b[:, 0] + 1) * (b[:, 3] - b[:, 1] + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        iou = inter / (area_a + area_b - inter)
    # a missing (NaN) box never overlaps anything
    return np.where(np.isfinite(iou), iou, 0.0)


def _join(left_keys: np.ndarray, right_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All (i, j) with left_keys[i] == right_keys[j], vectorised (sort + searchsorted + repeat)."""
    order = np.argsort(right_keys, kind="stable")
    sorted_keys = right_keys[order]
    lo = np.searchsorted(sorted_keys, left_keys, side="left")
    hi = np.searchsorted(sorted_keys, left_keys, side="right")
    counts = hi - lo
    left = np.repeat(np.arange(left_keys.size), counts)
    if left.size == 0:
        return left, left.copy()
    starts = np.repeat(lo, counts)
    offsets = np.arange(left.size) - np.repeat(np.cumsum(counts) - counts, counts)
    return left, order[starts + offsets]


def _keys(frame: np.ndarray, sub: np.ndarray, pred: np.ndarray, obj: np.ndarray) -> np.ndarray:
    """One int64 per (frame, subject class, predicate, object class): 13 bits per class / predicate
    field (< 8192), 24 bits of frame (< 16.7M frames)."""
    as64 = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return (as64(frame) << 39) | (as64(sub) << 26) | (as64(pred) << 13) | as64(obj)


# ----------------------------------------------------------------------------------------------
# Action Genome (STTran / TEMPURA)


@dataclass
class AGGroundTruth:
    """Ground-truth relations of many frames, flattened: row i is one <subject, predicate, object>
    of frame ``frame[i]`` (frames numbered 0..n_frames-1). Build it with :func:`ag_ground_truth`."""

    frame: np.ndarray
    sub_cls: np.ndarray
    pred: np.ndarray
    obj_cls: np.ndarray
    sub_box: np.ndarray
    obj_box: np.ndarray
    n_frames: int


@dataclass
class AGPrediction:
    """Scored predictions of many frames, in STTran's ``pred`` layout (flattened over frames).

    ``boxes`` (N, 4), ``labels`` (N,), ``obj_scores`` (N,): detected (or given) objects; ``pair_idx``
    (P, 2) indexes into them (subject = the person, object); ``pair_frame`` (P,) is STTran's
    ``im_idx``; ``attention`` (P, 3), ``spatial`` (P, 6), ``contacting`` (P, 17) are the predicate
    distributions *after* STTran's softmax on attention (pass probabilities, not logits)."""

    boxes: np.ndarray
    labels: np.ndarray
    obj_scores: np.ndarray
    pair_idx: np.ndarray
    pair_frame: np.ndarray
    attention: np.ndarray
    spatial: np.ndarray
    contacting: np.ndarray


def ag_ground_truth(frames: Sequence[dict], person_class: int = 1) -> AGGroundTruth:
    """Flatten Action Genome frames into :class:`AGGroundTruth`.

    A frame is ``{"person_box": [x1,y1,x2,y2], "objects": [{"class": c, "box": [...],
    "attention": [i], "spatial": [i, ...], "contacting": [i, ...]}]}`` with predicate indices local
    to their category (as STTran's dataloader stores them). Like STTran, attention and contacting
    relations are <person, predicate, object> and spatial ones are reversed <object, predicate, person>."""
    fr, sub, prd, obj, sbox, obox = [], [], [], [], [], []
    for f, frame in enumerate(frames):
        person = np.asarray(frame["person_box"], dtype=float)
        for o in frame["objects"]:
            box = np.asarray(o["box"], dtype=float)
            c = int(o["class"])
            for local in o.get("attention", []):
                fr.append(f)
                sub.append(person_class)
                prd.append(ATTENTION[0] + int(local))
                obj.append(c)
                sbox.append(person)
                obox.append(box)
            for local in o.get("spatial", []):
                fr.append(f)
                sub.append(c)
                prd.append(SPATIAL[0] + int(local))
                obj.append(person_class)
                sbox.append(box)
                obox.append(person)
            for local in o.get("contacting", []):
                fr.append(f)
                sub.append(person_class)
                prd.append(CONTACTING[0] + int(local))
                obj.append(c)
                sbox.append(person)
                obox.append(box)
    as_int = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    return AGGroundTruth(as_int(fr), as_int(sub), as_int(prd), as_int(obj),
                         np.asarray(sbox, dtype=float).reshape(-1, 4), np.asarray(obox, dtype=float).reshape(-1, 4),
                         len(frames))


@dataclass
class Candidates:
    """Ranked predicted triplets: ``rank`` is the 0-based position within its frame. Boxes are rows of
    ``boxes`` referenced by ``sub_idx``/``obj_idx`` (gathered only for the few candidates whose labels
    match a GT triplet)."""

    frame: np.ndarray
    sub_cls: np.ndarray
    pred: np.ndarray
    obj_cls: np.ndarray
    boxes: np.ndarray
    sub_idx: np.ndarray
    obj_idx: np.ndarray
    score: np.ndarray
    rank: np.ndarray

    @property
    def sub_box(self) -> np.ndarray:
        return self.boxes[self.sub_idx]

    @property
    def obj_box(self) -> np.ndarray:
        return self.boxes[self.obj_idx]

    @staticmethod
    def from_boxes(frame: np.ndarray, sub_cls: np.ndarray, pred: np.ndarray, obj_cls: np.ndarray,
                   sub_box: np.ndarray, obj_box: np.ndarray, score: np.ndarray, rank: np.ndarray) -> Candidates:
        n = frame.size
        return Candidates(frame, sub_cls, pred, obj_cls, np.concatenate([sub_box, obj_box]).reshape(-1, 4),
                          np.arange(n), n + np.arange(n), score, rank)


def _rank_within_frame(frame: np.ndarray, score: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Order by frame, then score descending; ties put the *later* candidate (higher position) first.

    The reference sorts with ``scores.argsort()[::-1]``: reversing an ascending sort puts tied
    candidates in reverse input order when numpy's sort keeps ties in place (always for the small
    per-frame arrays it sorts by insertion sort). We reproduce that deterministically at any size.

    Vectorised as a segmented sort: one radix sort groups candidates by (frame, position), then each
    frame's scores sit in a row of a padded 2-D array sorted row-wise (cheap: rows are short)."""
    n = frame.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    position = np.asarray(position, dtype=np.int64)
    span = int(position.max()) - int(position.min()) + 1
    order = np.argsort(frame.astype(np.int64) * span + (position - position.min()), kind="stable")
    f = frame[order]
    starts = np.flatnonzero(np.r_[True, f[1:] != f[:-1]])
    lengths = np.diff(np.r_[starts, n])
    col = np.arange(n) - np.repeat(starts, lengths)
    width = int(lengths.max())
    row = np.repeat(np.arange(starts.size), lengths)
    keys = np.full((starts.size, width), np.inf)
    # columns reversed so a stable ascending sort of -score puts the later of tied candidates first
    keys[row, width - 1 - col] = -np.asarray(score, dtype=float)[order]
    within = np.argsort(keys, axis=1, kind="stable")
    valid = np.arange(width)[None, :] < lengths[:, None]  # padding (+inf) sorts to the end of each row
    orig_col = (width - 1 - within)[valid]
    return order[np.repeat(starts, lengths) + orig_col]


def _distribution(x: np.ndarray, n_pairs: int, block: tuple[int, int], name: str) -> np.ndarray:
    """(P, width) scores of one predicate category. The width is known, so a prediction with no pairs
    is a (0, width) array (``reshape(0, -1)`` cannot infer it) and scores R@K = 0, as in STTran."""
    x = np.asarray(x, dtype=float)
    width = block[1] - block[0]
    if x.size != n_pairs * width:
        raise ValueError(f"{name}: expected {n_pairs} x {width} scores (one row per pair), got {x.size} values")
    return x.reshape(n_pairs, width)


def ag_candidates(pred: AGPrediction, constraint: str = "with", semi_threshold: float = 0.9,
                  max_rank: int = 100) -> Candidates:
    """Turn STTran-layout scores into ranked triplets under a graph constraint (top ``max_rank``).

    - ``with``: per pair and category, the argmax predicate (3 triplets per pair);
    - ``no``: every (row, predicate) of the 3P x 26 score matrix, scored s_sub * s_obj * p, top 100
      per frame (zero-padded entries included, as the reference's ``argsort_desc`` does);
    - ``semi``: attention argmax; spatial and contacting predicates with p > ``semi_threshold``.
    Triplets are then ranked by s_sub * s_obj * p within their frame."""
    if constraint not in CONSTRAINTS:
        raise ValueError(f"constraint must be one of {CONSTRAINTS}, got {constraint!r}")
    pairs = np.asarray(pred.pair_idx, dtype=np.int64).reshape(-1, 2)
    pf = np.asarray(pred.pair_frame, dtype=np.int64)
    labels = np.asarray(pred.labels, dtype=np.int64)
    boxes = np.asarray(pred.boxes, dtype=float).reshape(-1, 4)
    oscore = np.asarray(pred.obj_scores, dtype=float)
    blocks = [
        (pairs[:, 0], pairs[:, 1], _distribution(pred.attention, len(pairs), ATTENTION, "attention"), ATTENTION),
        (pairs[:, 1], pairs[:, 0], _distribution(pred.spatial, len(pairs), SPATIAL, "spatial"), SPATIAL),
        (pairs[:, 0], pairs[:, 1], _distribution(pred.contacting, len(pairs), CONTACTING, "contacting"), CONTACTING),
    ]
    if constraint == "no":
        return _no_constraint_candidates(pf, blocks, oscore, labels, boxes, max_rank)
    # rows in the reference's per-frame order: block (attention, spatial, contacting), then pair
    frame_parts, sub_parts, obj_parts, pred_parts, p_parts, pos_parts = [], [], [], [], [], []
    n_pairs = len(pairs)
    # position of a pair within its frame (pairs are grouped by frame in STTran's layout)
    pair_order = np.argsort(pf, kind="stable")
    pair_pos = np.empty(n_pairs, dtype=np.int64)
    if n_pairs:
        pair_pos[pair_order] = _ranks(pf[pair_order])
        frame_pairs = np.bincount(pf, minlength=int(pf.max()) + 1)[pf]
    else:
        frame_pairs = np.zeros(0, dtype=np.int64)
    for b, (s, o, dist, (lo, _hi)) in enumerate(blocks):
        row = b * frame_pairs + pair_pos  # row index within the frame's 3P x 26 matrix
        if constraint == "with":
            arg = dist.argmax(1)
            best = dist.max(1)
            # the reference's argmax runs over the 26-wide row with zeros outside the block: an
            # all-zero block yields predicate 0 with score 0
            predicate = np.where(best > 0, lo + arg, 0) if b else lo + arg
            frame_parts.append(pf)
            sub_parts.append(s)
            obj_parts.append(o)
            pred_parts.append(predicate)
            p_parts.append(best)
            pos_parts.append(row * N_PREDICATES)
        elif constraint == "semi":
            if b == 0:
                keep = dist[:, 0] + dist[:, 1] > 0
                frame_parts.append(pf[keep])
                sub_parts.append(s[keep])
                obj_parts.append(o[keep])
                pred_parts.append(lo + dist.argmax(1)[keep])
                p_parts.append(dist.max(1)[keep])
                pos_parts.append(row[keep] * N_PREDICATES)
            else:
                ok_row = dist[:, 0] + dist[:, 1] > 0
                r, c = np.nonzero((dist > semi_threshold) & ok_row[:, None])
                frame_parts.append(pf[r])
                sub_parts.append(s[r])
                obj_parts.append(o[r])
                pred_parts.append(lo + c)
                p_parts.append(dist[r, c])
                pos_parts.append(row[r] * N_PREDICATES + lo + c)
    frame = np.concatenate(frame_parts) if frame_parts else np.zeros(0, np.int64)
    sub = np.concatenate(sub_parts).astype(np.int64)
    obj = np.concatenate(obj_parts).astype(np.int64)
    predicate = np.concatenate(pred_parts).astype(np.int64)
    p = np.concatenate(p_parts).astype(float)
    pos = np.concatenate(pos_parts).astype(np.int64)
    total = oscore[sub] * oscore[obj] * p if sub.size else p
    order = _rank_within_frame(frame, total, pos)
    frame, sub, obj, predicate, total = (x[order] for x in (frame, sub, obj, predicate, total))
    rank = _ranks(frame)
    keep = rank < max_rank
    return Candidates(frame[keep], labels[sub[keep]], predicate[keep], labels[obj[keep]], boxes, sub[keep],
                      obj[keep], total[keep], rank[keep])


def _top_cells(grid: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of each row's ``k`` largest finite cells, ties at the cut taken in column order
    (what ``argsort_desc(...)[:k]`` keeps on a row-major matrix), in row-major order."""
    if grid.shape[1] > k:
        kth = -np.partition(-grid, k - 1, axis=1)[:, k - 1]
        greater = grid > kth[:, None]
        tie = grid == kth[:, None]
        tie &= np.isfinite(grid)
        need = k - greater.sum(1)
        keep = greater | (tie & (np.cumsum(tie, axis=1) <= need[:, None]))
    else:
        keep = np.isfinite(grid)
    return cast(tuple[np.ndarray, np.ndarray], np.nonzero(keep))  # grid is 2-D: (rows, cols)


def _no_constraint_candidates(pf: np.ndarray, blocks: list, oscore: np.ndarray, labels: np.ndarray,
                              boxes: np.ndarray, max_rank: int, top: int = 100, chunk_frames: int = 4096
                              ) -> Candidates:
    """No constraint: each frame's 3P x 26 matrix (zeros outside a row's category) scored
    s_sub * s_obj * p, its top 100 kept (``argsort_desc(...)[:100]``: ties at the cut in row-major
    order) and re-ranked by score with ties reversed (the second sort's ``[::-1]``).

    Frames with the same number of pairs are rows of one 2-D array (plain reshapes of the score
    arrays) and one ``np.partition`` per chunk finds every frame's top 100. A frame with at least 100
    positive cells uses only its category cells (compact columns [attention | spatial | contacting],
    pair-major: the full matrix's row-major order, a third of the cells); a smaller frame uses its whole
    matrix, zeros included, so the zero-score entries the reference pads its top 100 with are there too
    (they can still hit a GT at R@100)."""
    if pf.size == 0:
        e = np.zeros(0, dtype=np.int64)
        return Candidates(e, e, e, e, boxes, e, e, np.zeros(0), e)
    if np.all(pf[1:] >= pf[:-1]):  # STTran's layout: pairs already grouped by frame
        subs = [s for s, _, _, _ in blocks]
        objs = [o for _, o, _, _ in blocks]
        dists = [d for _, _, d, _ in blocks]
    else:  # pairs by frame, then position (input order within a frame)
        order = np.argsort(pf, kind="stable")
        pf = pf[order]
        subs = [s[order] for s, _, _, _ in blocks]
        objs = [o[order] for _, o, _, _ in blocks]
        dists = [d[order] for _, _, d, _ in blocks]
    vals = [(oscore[s] * oscore[o])[:, None] * d for s, o, d in zip(subs, objs, dists, strict=True)]
    los = [lo for _, _, _, (lo, _) in blocks]
    widths = [hi - lo for _, _, _, (lo, hi) in blocks]
    n_frames = int(pf[-1]) + 1
    n_of = np.bincount(pf, minlength=n_frames)
    start_of = np.searchsorted(pf, np.arange(n_frames + 1))
    n_pos = cast(np.ndarray, sum(np.bincount(pf, weights=(v > 0).sum(1), minlength=n_frames) for v in vals))
    parts: list[tuple[np.ndarray, ...]] = []
    # frames with the same number of pairs P share a layout: their matrices are plain reshapes
    for n_pairs in np.unique(n_of[n_of > 0]).tolist():
        frames_p = np.flatnonzero(n_of == n_pairs)
        sel = np.repeat(start_of[frames_p], n_pairs) + np.tile(np.arange(n_pairs), frames_p.size)
        per_block = [v[sel].reshape(frames_p.size, n_pairs, -1) for v in vals]
        big = n_pos[frames_p] >= top
        for is_big in (True, False):
            rows = np.flatnonzero(big == is_big)
            for c0 in range(0, rows.size, chunk_frames):
                rr = rows[c0:c0 + chunk_frames]
                if is_big:  # category cells only, [attention | spatial | contacting], pair-major
                    grid = np.concatenate([x[rr].reshape(rr.size, -1) for x in per_block], axis=1)
                else:  # whole 3P x 26 matrix, zeros outside each row's category
                    full = np.zeros((3, rr.size, n_pairs, N_PREDICATES))
                    for bi, (x, lo, w) in enumerate(zip(per_block, los, widths, strict=True)):
                        full[bi, :, :, lo:lo + w] = x[rr]
                    grid = full.transpose(1, 0, 2, 3).reshape(rr.size, -1)
                r, c = _top_cells(grid, top)
                # every row keeps the same number of cells, in column (= row-major position) order; the
                # second sort (score descending, ties reversed) is a row-wise sort of reversed columns
                m = r.size // rr.size
                c = c.reshape(rr.size, m)
                total = grid[r.reshape(rr.size, m), c]
                within = np.argsort(-total[:, ::-1], axis=1, kind="stable")[:, :max_rank]
                pick = m - 1 - within
                c = np.take_along_axis(c, pick, axis=1)
                total = np.take_along_axis(total, pick, axis=1)
                rank = np.broadcast_to(np.arange(pick.shape[1]), pick.shape)
                frame = np.repeat(frames_p[rr], pick.shape[1]).reshape(pick.shape)
                if is_big:
                    e0, e1 = widths[0] * n_pairs, (widths[0] + widths[1]) * n_pairs
                    b = (c >= e0).astype(np.int64) + (c >= e1)
                    ppos, j = np.divmod(c - np.asarray([0, e0, e1])[b], np.asarray(widths)[b])
                    pred = np.asarray(los)[b] + j
                else:
                    row, pred = np.divmod(c, N_PREDICATES)
                    b, ppos = np.divmod(row, n_pairs)
                parts.append(tuple(x.ravel() for x in (frame, b, ppos, pred, total, rank)))
    frame, b, ppos, predicate, total, rank = (np.concatenate([p[i] for p in parts]) for i in range(6))
    pair = start_of[frame] + ppos  # pairs are sorted by frame, then position
    sub = np.stack(subs)[b, pair]
    obj = np.stack(objs)[b, pair]
    return Candidates(frame, labels[sub], predicate, labels[obj], boxes, sub, obj, total, rank)


def _ranks(sorted_frame: np.ndarray) -> np.ndarray:
    """0-based position of each row within its (contiguous) frame group."""
    n = sorted_frame.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, sorted_frame[1:] != sorted_frame[:-1]])
    return np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))


class Relations(Protocol):
    """What :func:`first_hit_rank` reads of its GT: :class:`AGGroundTruth` or ``set_metrics.Triplets``."""

    frame: np.ndarray
    sub_cls: np.ndarray
    pred: np.ndarray
    obj_cls: np.ndarray
    sub_box: np.ndarray
    obj_box: np.ndarray


def first_hit_rank(gt: Relations, cand: Candidates, iou_threshold: float = 0.5) -> np.ndarray:
    """For each GT relation, the best (lowest) rank of a candidate that matches it, inf if none.

    Match (STTran ``_compute_pred_matches``): same <subject class, predicate, object class> in the same
    frame, IoU(subject) >= threshold and IoU(object) >= threshold. Several candidates may hit one GT and
    one candidate may hit several GTs: recall counts GTs, so this is not a one-to-one matching."""
    gk = _keys(gt.frame, gt.sub_cls, gt.pred, gt.obj_cls)
    ck = _keys(cand.frame, cand.sub_cls, cand.pred, cand.obj_cls)
    ci, gi = _join(ck, gk)
    best = np.full(gk.size, np.inf)
    if ci.size:
        ok = (box_iou(cand.boxes[cand.sub_idx[ci]], gt.sub_box[gi]) >= iou_threshold) & \
             (box_iou(cand.boxes[cand.obj_idx[ci]], gt.obj_box[gi]) >= iou_threshold)
        np.minimum.at(best, gi[ok], cand.rank[ci[ok]].astype(float))
    return best


@dataclass
class RecallResult:
    """R@K and mR@K with the per-frame and per-predicate numbers behind them."""

    ks: tuple[int, ...]
    recall: dict[int, float]
    mean_recall: dict[int, float]
    frame_recall: np.ndarray  # (frames with GT, len(ks))
    hits: np.ndarray  # (len(ks), n_predicates) GT relations recalled, per predicate
    counts: np.ndarray  # (n_predicates,) GT relations, per predicate
    frames: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # frame ids of frame_recall

    def per_predicate(self, k: int) -> np.ndarray:
        return self.hits[self.ks.index(k)] / (self.counts + 1e-10)


def recall_from_ranks(gt_frame: np.ndarray, gt_pred: np.ndarray, best_rank: np.ndarray, n_frames: int,
                      ks: Sequence[int] = K_VALUES, n_predicates: int = N_PREDICATES) -> RecallResult:
    """R@K = mean over frames (with GT) of |GT hit within the top K| / |GT|; mR@K = mean over all
    predicates of pooled hits / (pooled count + 1e-10), so a predicate absent from the GT adds 0
    (TEMPURA ``calc_mrecall``). Frames without GT relations are skipped (the reference asserts there
    are none)."""
    ks = tuple(ks)
    n_gt = np.bincount(gt_frame, minlength=n_frames)
    frames = np.nonzero(n_gt)[0]
    counts = np.bincount(gt_pred, minlength=n_predicates).astype(float)
    frame_recall = np.zeros((frames.size, len(ks)))
    hits = np.zeros((len(ks), n_predicates))
    recall, mrecall = {}, {}
    for j, k in enumerate(ks):
        hit = best_rank < k
        per_frame = np.bincount(gt_frame, weights=hit, minlength=n_frames)[frames] / n_gt[frames]
        frame_recall[:, j] = per_frame
        hits[j] = np.bincount(gt_pred[hit], minlength=n_predicates)
        recall[k] = float(per_frame.mean()) if frames.size else float("nan")
        mrecall[k] = float(np.mean(hits[j] / (counts + 1e-10)))
    return RecallResult(ks, recall, mrecall, frame_recall, hits, counts, frames)


def evaluate_ag(gt: AGGroundTruth, pred: AGPrediction, constraint: str = "with", iou_threshold: float = 0.5,
                semi_threshold: float = 0.9, ks: Sequence[int] = K_VALUES) -> RecallResult:
    """Action Genome R@K / mR@K exactly as STTran's ``BasicSceneGraphEvaluator`` + TEMPURA's mR."""
    cand = ag_candidates(pred, constraint, semi_threshold, max_rank=max(ks))
    best = first_hit_rank(gt, cand, iou_threshold)
    return recall_from_ranks(gt.frame, gt.pred, best, gt.n_frames, ks)
