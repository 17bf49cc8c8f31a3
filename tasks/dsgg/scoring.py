"""Scoring one video's Temporal Relation Set against its annotation with every applicable protocol.

Per video we keep additive counts in ``Score.details`` (frame-recall sums, per-predicate hits, set
counts, VidVRD / PVSG hits) so the aggregate pools them over the data set exactly as the reference
evaluators do (R@K averages frames, not videos); ``Score.values`` hold the per-video figures.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.tasks.dsgg import metrics as M
from harness.tasks.dsgg import set_metrics as S
from harness.tasks.dsgg import video_metrics as V
from harness.tasks.dsgg.trs import expand, to_trs

KS = M.K_VALUES
PVSG_KS = (20, 50, 100)


class Vocab:
    """Category and predicate ids of one dataset; unknown names get an id no annotation uses."""

    def __init__(self, categories: list[str], predicates: list[str], trivial: tuple[str, ...] = (),
                 categories_of_predicates: list[tuple[int, int]] | None = None) -> None:
        self.categories = list(categories)
        self.predicates = list(predicates)
        self.cat_id = {c: i for i, c in enumerate(self.categories)}
        self.pred_id = {p: i for i, p in enumerate(self.predicates)}
        self.unknown = len(self.categories)
        self.trivial = [self.pred_id[p] for p in trivial if p in self.pred_id]
        # predicate id -> constraint group (AG: attention / spatial / contacting; else one group)
        groups = categories_of_predicates or [(0, len(self.predicates))]
        self.group = np.zeros(len(self.predicates), dtype=np.int64)
        for g, (lo, hi) in enumerate(groups):
            self.group[lo:hi] = g

    def category(self, video: dict[str, Any], name: str) -> int:
        cat = video["objects"].get(name)
        if cat is None:  # "cup#2" for an instance the annotation lacks: fall back to its category
            cat = name.split("#")[0]
        return self.cat_id.get(cat, self.unknown)


def _triplets(rows: list[tuple], video: dict[str, Any], vocab: Vocab) -> S.Triplets:
    return S.Triplets.from_rows([(f, vocab.category(video, s), vocab.pred_id[p], vocab.category(video, o), sb, ob)
                                 for f, s, p, o, sb, ob in rows])


def gt_rows(video: dict[str, Any]) -> list[tuple]:
    boxes = video.get("boxes") or {}
    return [(f, s, p, o, boxes.get(s, {}).get(str(f)), boxes.get(o, {}).get(str(f)))
            for f, s, p, o in video["relations"]]


def _with_constraint(rows: list[tuple], vocab: Vocab) -> list[tuple]:
    """At most one predicate per (frame, subject, object, predicate group): the first listed (the
    set-output analogue of the per-category argmax)."""
    seen, out = set(), []
    for r in rows:
        key = (r[0], r[1], r[3], int(vocab.group[vocab.pred_id[r[2]]]))
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def _candidates(t: S.Triplets) -> M.Candidates:
    order = np.argsort(t.frame, kind="stable")  # rank = listing order within the frame
    frame = t.frame[order]
    rank = M._ranks(frame)
    return M.Candidates.from_boxes(frame, t.sub_cls[order], t.pred[order], t.obj_cls[order], t.sub_box[order],
                                   t.obj_box[order], -rank.astype(float), rank)


def _sparse(x: np.ndarray) -> dict[str, float]:
    return {str(i): float(v) for i, v in enumerate(x) if v}


def recall_details(gt: S.Triplets, rows: list[tuple], video: dict[str, Any], vocab: Vocab,
                   use_boxes: bool) -> dict[str, Any]:
    """Frame-recall sums and per-predicate hits for R@K / mR@K (AG protocol on a ranked list)."""
    out: dict[str, Any] = {}
    for name, chosen in (("with", _with_constraint(rows, vocab)), ("no", rows)):
        pred = _triplets(chosen, video, vocab)
        if not use_boxes:
            pred.sub_box[:] = 0.0
            pred.obj_box[:] = 0.0
        cand = _candidates(pred)
        gtb = gt if use_boxes else S.Triplets(gt.frame, gt.sub_cls, gt.pred, gt.obj_cls, np.zeros_like(gt.sub_box),
                                              np.zeros_like(gt.obj_box))
        best = M.first_hit_rank(gtb, cand)
        res = M.recall_from_ranks(gt.frame, gt.pred, best, video["n_frames"], KS, len(vocab.predicates))
        out[name] = {"frame_recall_sum": {str(k): float(res.frame_recall[:, j].sum()) for j, k in enumerate(KS)},
                     "frames": int(res.frames.size),
                     "hits": {str(k): _sparse(res.hits[j]) for j, k in enumerate(KS)},
                     "counts": _sparse(res.counts)}
    return out


def vidvrd_details(video: dict[str, Any], trs: list[dict[str, Any]], ground: bool) -> dict[str, Any]:
    """VidVRD detection/tagging of one video; relation instances = TRS spans (score by listing order)."""
    none_box = [0.0, 0.0, -1.0, -1.0]  # zero area under the +1 convention: contributes nothing

    def traj(name: str, a: int, b: int, given: dict[str, Any], role: str) -> list[list[float]]:
        out = []
        for f in range(a, b + 1):
            box = (given.get(str(f)) or {}).get(role)
            if box is None and ground:
                box = video["boxes"].get(name, {}).get(str(f))
            out.append(box or none_box)
        return out

    cat = lambda n: video["objects"].get(n, n.split("#")[0])  # noqa: E731
    gt = [{"triplet": (cat(r["subject"]), r["predicate"], cat(r["object"])), "duration": [a, b + 1],
           "sub_traj": [video["boxes"].get(r["subject"], {}).get(str(f)) or none_box for f in range(a, b + 1)],
           "obj_traj": [video["boxes"].get(r["object"], {}).get(str(f)) or none_box for f in range(a, b + 1)]}
          for r in to_trs(video) for a, b in r["spans"]]
    pred: list[dict[str, Any]] = []
    n = sum(len(r["spans"]) for r in trs)
    for r in trs:
        for a, b in r["spans"]:
            pred.append({"triplet": (cat(r["subject"]), r["predicate"], cat(r["object"])),
                         "score": 1.0 - len(pred) / max(n, 1), "duration": [a, b + 1],
                         "sub_traj": traj(r["subject"], a, b, r["boxes"], "subject"),
                         "obj_traj": traj(r["object"], a, b, r["boxes"], "object")})
    prec, rec, scores = V.vidvrd_detection(gt, pred)
    tag = V.vidvrd_tagging_precision(gt, pred)
    tp = np.isfinite(scores)
    return {"ap": V.voc_ap(rec, prec), "n_gt": len(gt), "hits": {str(k): int(tp[:k].sum()) for k in (50, 100)},
            "tagging": {str(k): float(tag[min(k, tag.size) - 1]) if tag.size else 0.0 for k in (1, 5, 10)}}


def pvsg_details(video: dict[str, Any], trs: list[dict[str, Any]], vocab: Vocab) -> dict[str, Any]:
    """PVSG hits of one video. Without predicted masks, a predicted subject/object 'hits' a GT frame when
    it names the same annotated instance (mask IoU 1, else 0): oracle identity grounding."""
    n = video["n_frames"]
    gts = [(r, [(a, b) for a, b in r["spans"]]) for r in to_trs(video)]
    cat = lambda name: vocab.category(video, name)  # noqa: E731
    gt_keys = np.array([(cat(r["subject"]), cat(r["object"]), vocab.pred_id[r["predicate"]]) for r, _ in gts],
                       dtype=np.int64).reshape(-1, 3)
    pred_keys = np.array([(cat(r["subject"]), cat(r["object"]), vocab.pred_id[r["predicate"]]) for r in trs],
                         dtype=np.int64).reshape(-1, 3)
    v = np.zeros((len(gts), len(trs)))
    for i, (g, gspans) in enumerate(gts):
        gspan = np.zeros(n, bool)
        for a, b in gspans:
            gspan[a:b + 1] = True
        for j, p in enumerate(trs):
            if not np.array_equal(gt_keys[i], pred_keys[j]):
                continue
            pspan = np.zeros(n, bool)
            for a, b in p["spans"]:
                pspan[a:b + 1] = True
            sub = np.full(n, float(p["subject"] == g["subject"]))
            obj = np.full(n, float(p["object"] == g["object"]))
            v[i, j] = V.pvsg_viou(gspan, gspan, pspan, sub, obj)[0]
    counts = V.pvsg_counts(gt_keys, pred_keys, v, PVSG_KS, len(vocab.predicates))
    return {name: (arr.tolist() if isinstance(arr, np.ndarray) else arr) for name, arr in counts.items()}


def score_video(video: dict[str, Any], trs: list[dict[str, Any]], vocab: Vocab, weights: np.ndarray,
                setting: str) -> tuple[dict[str, float], dict[str, Any]]:
    """Per-video values and the additive details behind the pooled metrics."""
    ground = setting == "predcls"
    use_boxes = bool(video.get("boxes"))
    rows = [r for r in expand(trs, video, ground) if r[2] in vocab.pred_id]
    gt_r = gt_rows(video)
    gt = _triplets(gt_r, video, vocab)
    pred = _triplets(rows, video, vocab)
    details: dict[str, Any] = {"recall": recall_details(gt, rows, video, vocab, use_boxes),
                               "n_predicates": len(vocab.predicates)}
    labels_only = S.Triplets.from_rows([(f, vocab.category(video, s), vocab.pred_id[p], vocab.category(video, o))
                                        for f, s, p, o, _, _ in rows], with_boxes=False)
    gt_labels = S.Triplets.from_rows([(f, vocab.category(video, s), vocab.pred_id[p], vocab.category(video, o))
                                      for f, s, p, o, _, _ in gt_r], with_boxes=False)
    counts, _ = S.set_counts(gt, pred, weights, use_boxes=use_boxes, trivial=vocab.trivial, span_rows=labels_only)
    label_counts, _ = S.set_counts(gt_labels, labels_only, weights, use_boxes=False, trivial=vocab.trivial)
    details["set"] = counts.to_dict()
    details["set_labels"] = label_counts.to_dict()
    values: dict[str, float] = {}
    for name, suffix in (("with", ""), ("no", "_no")):
        rec = details["recall"][name]
        for k in KS:
            values[f"R@{k}{suffix}"] = rec["frame_recall_sum"][str(k)] / rec["frames"] if rec["frames"] else 0.0
    for key, value in counts.metrics().items():
        values[key] = value
    lab = label_counts.metrics()
    values["triplet_precision"], values["triplet_recall"] = lab["precision"], lab["recall"]
    if video["dataset"] == "vidvrd":
        d = details["vidvrd"] = vidvrd_details(video, trs, ground)
        values["vidvrd_ap"] = d["ap"]
    if video["dataset"] == "pvsg":
        details["pvsg"] = pvsg_details(video, trs, vocab)
    values = {k: v for k, v in values.items() if v == v}  # drop NaN (no GT): left out of means
    return values, details
