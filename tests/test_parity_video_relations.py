"""Parity of the VidVRD and PVSG video relation protocols with their released evaluators.

References (``ref_*`` below re-implement them from reading them):
- xdshang/VidVRD-helper at commit 1b4de175ce6e7a103d5feaae66b68d32a306a877: ``evaluation/common.py``
  (``voc_ap``, ``viou``) and ``evaluation/visual_relation_detection.py`` (``eval_detection_scores``,
  ``eval_tagging_scores``, ``evaluate``: mAP, detection R@50/100, tagging P@1/5/10);
- LilyDaytoy/OpenPVSG at commit b2850b980c272368215a754299986cb904d55820: ``utils/rel_metrics.py``
  (``calculate_iou``, ``calculate_mask_iou``, ``calculate_viou``, ``calculate_final_metrics``) and the
  per-GT loop of ``tools/rel_test_full.py`` (weak hit at vIoU >= 0.1, hit at >= 0.5 then ``break``, the
  soft dictionaries adding the vIoU). The panoptic masks the reference reads from PNG files are passed
  in memory here (one label image per frame), and predicted masks as arrays instead of tensors.
Inputs: seeded random videos with overlapping and disjoint durations, duplicate predictions, tied
scores, videos without predictions or without GT, empty masks.
"""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pytest

from harness.tasks.dsgg import video_metrics as V


# ---- literal re-implementation: VidVRD-helper --------------------------------------------------
def ref_voc_ap(rec, prec):  # type: ignore[no-untyped-def]
    mrec = np.concatenate(([0.0], rec, [1.0]))
    mpre = np.concatenate(([0.0], prec, [0.0]))
    for i in range(mpre.size - 1, 0, -1):
        mpre[i - 1] = np.maximum(mpre[i - 1], mpre[i])
    i = np.where(mrec[1:] != mrec[:-1])[0]
    return np.sum((mrec[i + 1] - mrec[i]) * mpre[i + 1])


def ref_viou(traj_1, duration_1, traj_2, duration_2):  # type: ignore[no-untyped-def]
    if duration_1[0] >= duration_2[1] or duration_1[1] <= duration_2[0]:
        return 0.0
    elif duration_1[0] <= duration_2[0]:
        head_1 = duration_2[0] - duration_1[0]
        head_2 = 0
        if duration_1[1] < duration_2[1]:
            tail_1 = duration_1[1] - duration_1[0]
            tail_2 = duration_1[1] - duration_2[0]  # noqa: F841 (unused there too)
        else:
            tail_1 = duration_2[1] - duration_1[0]
            tail_2 = duration_2[1] - duration_2[0]  # noqa: F841
    else:
        head_1 = 0
        head_2 = duration_1[0] - duration_2[0]
        if duration_1[1] < duration_2[1]:
            tail_1 = duration_1[1] - duration_1[0]
            tail_2 = duration_1[1] - duration_2[0]  # noqa: F841
        else:
            tail_1 = duration_2[1] - duration_1[0]
            tail_2 = duration_2[1] - duration_2[0]  # noqa: F841
    v_overlap = 0
    for i in range(tail_1 - head_1):
        roi_1 = traj_1[head_1 + i]
        roi_2 = traj_2[head_2 + i]
        left = max(roi_1[0], roi_2[0])
        top = max(roi_1[1], roi_2[1])
        right = min(roi_1[2], roi_2[2])
        bottom = min(roi_1[3], roi_2[3])
        v_overlap += max(0, right - left + 1) * max(0, bottom - top + 1)
    v1 = sum((b[2] - b[0] + 1) * (b[3] - b[1] + 1) for b in traj_1)
    v2 = sum((b[2] - b[0] + 1) * (b[3] - b[1] + 1) for b in traj_2)
    return float(v_overlap) / (v1 + v2 - v_overlap)


def ref_eval_detection_scores(gt_relations, pred_relations, viou_threshold):  # type: ignore[no-untyped-def]
    pred_relations = sorted(pred_relations, key=lambda x: x["score"], reverse=True)
    gt_detected = np.zeros((len(gt_relations),), dtype=bool)
    hit_scores = np.ones(len(pred_relations)) * -np.inf
    for pred_idx, pred_relation in enumerate(pred_relations):
        ov_max = -float("Inf")
        k_max = -1
        for gt_idx, gt_relation in enumerate(gt_relations):
            if not gt_detected[gt_idx] and tuple(pred_relation["triplet"]) == tuple(gt_relation["triplet"]):
                s_iou = ref_viou(pred_relation["sub_traj"], pred_relation["duration"], gt_relation["sub_traj"],
                                 gt_relation["duration"])
                o_iou = ref_viou(pred_relation["obj_traj"], pred_relation["duration"], gt_relation["obj_traj"],
                                 gt_relation["duration"])
                ov = min(s_iou, o_iou)
                if ov >= viou_threshold and ov > ov_max:
                    ov_max = ov
                    k_max = gt_idx
        if k_max >= 0:
            hit_scores[pred_idx] = pred_relation["score"]
            gt_detected[k_max] = True
    tp = np.isfinite(hit_scores)
    fp = ~tp
    cum_tp = np.cumsum(tp).astype(np.float32)
    cum_fp = np.cumsum(fp).astype(np.float32)
    rec = cum_tp / np.maximum(len(gt_relations), np.finfo(np.float32).eps)
    prec = cum_tp / np.maximum(cum_tp + cum_fp, np.finfo(np.float32).eps)
    return prec, rec, hit_scores


def ref_eval_tagging_scores(gt_relations, pred_relations):  # type: ignore[no-untyped-def]
    pred_relations = sorted(pred_relations, key=lambda x: x["score"], reverse=True)
    gt_triplets = set(tuple(r["triplet"]) for r in gt_relations)
    pred_triplets = []
    hit_scores = []
    for r in pred_relations:
        triplet = tuple(r["triplet"])
        if triplet not in pred_triplets:
            pred_triplets.append(triplet)
            hit_scores.append(r["score"])
    hit_scores = np.asarray(hit_scores)
    for i, t in enumerate(pred_triplets):
        if t not in gt_triplets:
            hit_scores[i] = -np.inf
    tp = np.isfinite(hit_scores)
    fp = ~tp
    cum_tp = np.cumsum(tp).astype(np.float32)
    cum_fp = np.cumsum(fp).astype(np.float32)
    prec = cum_tp / np.maximum(cum_tp + cum_fp, np.finfo(np.float32).eps)
    return prec


def ref_evaluate(groundtruth, prediction, viou_threshold=0.5, det_nreturns=(50, 100), tag_nreturns=(1, 5, 10)):  # type: ignore
    video_ap = dict()
    tot_scores = defaultdict(list)
    tot_tp = defaultdict(list)
    prec_at_n = defaultdict(list)
    tot_gt_relations = 0
    for vid, gt_relations in groundtruth.items():
        if len(gt_relations) == 0:
            continue
        tot_gt_relations += len(gt_relations)
        predict_relations = prediction.get(vid, [])
        det_prec, det_rec, det_scores = ref_eval_detection_scores(gt_relations, predict_relations, viou_threshold)
        video_ap[vid] = ref_voc_ap(det_rec, det_prec)
        tp = np.isfinite(det_scores)
        for nre in det_nreturns:
            cut_off = min(nre, det_scores.size)
            tot_scores[nre].append(det_scores[:cut_off])
            tot_tp[nre].append(tp[:cut_off])
        tag_prec = ref_eval_tagging_scores(gt_relations, predict_relations)
        for nre in tag_nreturns:
            cut_off = min(nre, tag_prec.size)
            prec_at_n[nre].append(tag_prec[cut_off - 1] if cut_off > 0 else 0.0)
    mean_ap = np.mean(list(video_ap.values()))
    rec_at_n = dict()
    for nre in det_nreturns:
        scores = np.concatenate(tot_scores[nre])
        tps = np.concatenate(tot_tp[nre])
        sort_indices = np.argsort(scores)[::-1]
        tps = tps[sort_indices]
        cum_tp = np.cumsum(tps).astype(np.float32)
        rec = cum_tp / np.maximum(tot_gt_relations, np.finfo(np.float32).eps)
        rec_at_n[nre] = rec[-1]
    mprec_at_n = {nre: np.mean(prec_at_n[nre]) for nre in tag_nreturns}
    return mean_ap, rec_at_n, mprec_at_n


# ---- random VidVRD videos -------------------------------------------------------------------------
def trajectory(rng: random.Random, n: int, base: tuple[int, int]) -> list[list[int]]:
    out = []
    for _ in range(n):
        x, y = base[0] + rng.randint(-8, 8), base[1] + rng.randint(-8, 8)
        out.append([x, y, x + rng.randint(0, 40), y + rng.randint(0, 40)])
    return out


def relation(rng: random.Random, triplet: tuple, start: int, end: int, score: float | None = None) -> dict:
    return {"triplet": list(triplet), "duration": [start, end], "score": score,
            "sub_traj": trajectory(rng, end - start, (50, 50)), "obj_traj": trajectory(rng, end - start, (70, 60))}


TRIPLETS = [("dog", "chase", "cat"), ("cat", "left", "dog"), ("person", "ride", "bike"), ("dog", "next_to", "cat")]


def jittered(rng: random.Random, traj: list[list[int]], span: tuple[int, int], new: tuple[int, int],
             jitter: int) -> list[list[int]]:
    """A GT trajectory over a shifted duration (edge boxes repeated), each coordinate moved by <= jitter."""
    return [[c + rng.randint(-jitter, jitter) for c in traj[min(max(f, span[0]), span[1] - 1) - span[0]]]
            for f in range(*new)]


def vidvrd_data(case: int) -> tuple[dict, dict]:
    rng = random.Random(case)
    gts, preds = {}, {}
    for v in range(rng.randint(1, 4)):
        gt = []
        for _ in range(0 if rng.random() < 0.1 else rng.randint(1, 6)):
            s = rng.randint(0, 20)
            gt.append(relation(rng, rng.choice(TRIPLETS), s, s + rng.randint(1, 12)))
        gts[f"v{v}"] = gt
        if rng.random() < 0.15:
            continue  # no predictions for this video
        pred = []
        for _ in range(rng.randint(0, 70)):
            if gt and rng.random() < 0.6:  # a jittered copy of a GT relation, sometimes shifted in time
                g = rng.choice(gt)
                shift = rng.choice([0, 0, 0, 1, -1, 4])
                g0, g1 = g["duration"]
                s = max(0, g0 + shift)
                e = max(s + 1, g1 + shift)
                jitter = rng.choice([0, 1, 3, 15])
                r = {"triplet": list(g["triplet"]), "duration": [s, e],
                     "sub_traj": jittered(rng, g["sub_traj"], (g0, g1), (s, e), jitter),
                     "obj_traj": jittered(rng, g["obj_traj"], (g0, g1), (s, e), jitter)}
            else:
                s = rng.randint(0, 20)
                r = relation(rng, rng.choice(TRIPLETS), s, s + rng.randint(1, 12))
            r["score"] = rng.choice([0.5, 0.9, round(rng.random(), 3)])  # ties on purpose
            pred.append(r)
        preds[f"v{v}"] = pred
    return gts, preds


@pytest.mark.parametrize("case", range(80))
def test_vidvrd_equals_vidvrd_helper(case: int) -> None:
    gts, preds = vidvrd_data(case)
    ours = V.evaluate_vidvrd(gts, preds)
    if not any(gts.values()) or not any(preds.get(v) for v, g in gts.items() if g):
        # the reference cannot run here (concatenating no scores / a mean of nothing); ours reports 0 or NaN
        assert all(r == 0.0 or r != r for r in ours.recall.values())
        return
    mean_ap, rec_at_n, prec_at_n = ref_evaluate(gts, preds)
    assert ours.mean_ap == pytest.approx(float(mean_ap), abs=1e-6)
    for n in (50, 100):
        assert ours.recall[n] == pytest.approx(float(rec_at_n[n]), abs=1e-6)
    for n in (1, 5, 10):
        assert ours.tagging_precision[n] == pytest.approx(float(prec_at_n[n]), abs=1e-6)


def test_viou_equals_vidvrd_helper() -> None:
    rng = random.Random(0)
    for _ in range(300):
        s1, s2 = rng.randint(0, 10), rng.randint(0, 10)
        d1, d2 = [s1, s1 + rng.randint(1, 8)], [s2, s2 + rng.randint(1, 8)]
        t1, t2 = trajectory(rng, d1[1] - d1[0], (10, 10)), trajectory(rng, d2[1] - d2[0], (20, 15))
        assert V.viou(t1, d1, t2, d2) == pytest.approx(ref_viou(t1, d1, t2, d2), abs=1e-12)


# ---- literal re-implementation: OpenPVSG --------------------------------------------------------
def ref_calculate_iou(span1, span2):  # type: ignore[no-untyped-def]
    intersection = (span1 * span2).sum()
    union = span1.sum() + span2.sum() - intersection
    return intersection / union if union > 0 else 0


def ref_calculate_mask_iou(gt_mask, pred_mask):  # type: ignore[no-untyped-def]
    intersection = np.logical_and(gt_mask, pred_mask).sum()
    union = np.logical_or(gt_mask, pred_mask).sum()
    return 0 if union == 0 else intersection / union


class _Tensorish:
    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def numpy(self) -> np.ndarray:
        return self.a


def ref_calculate_viou(gt_set, pred_set, pan_masks):  # type: ignore[no-untyped-def]
    (gt_sub_idx, gt_obj_idx, gt_span_list) = gt_set
    (pred_sub_mask_list, pred_obj_mask_list, pred_span_list) = pred_set
    pred_sub_mask_dict, pred_obj_mask_dict = {}, {}
    for mask_dict in pred_sub_mask_list:
        for k, v in mask_dict.items():
            pred_sub_mask_dict[k] = v
    for mask_dict in pred_obj_mask_list:
        for k, v in mask_dict.items():
            pred_obj_mask_dict[k] = v
    gt_real_span_list = np.zeros_like(pred_span_list)
    pred_hit_list = np.zeros_like(pred_span_list)
    for range_pair in gt_span_list:
        start, end = range_pair
        for frame_id in range(start, end + 1):
            if frame_id >= len(pred_span_list):
                continue
            pan_mask = pan_masks[frame_id]  # the reference: np.array(Image.open(<frame>.png))
            gt_sub_mask = (pan_mask == gt_sub_idx).astype(bool)
            gt_obj_mask = (pan_mask == gt_obj_idx).astype(bool)
            if np.any(gt_sub_mask) and np.any(gt_obj_mask):
                gt_real_span_list[frame_id] = 1
            if frame_id in pred_sub_mask_dict and frame_id in pred_obj_mask_dict:
                pred_sub_mask = pred_sub_mask_dict[frame_id].numpy().astype(bool)
                sub_iou = ref_calculate_mask_iou(gt_sub_mask, pred_sub_mask)
                pred_obj_mask = pred_obj_mask_dict[frame_id].numpy().astype(bool)
                obj_iou = ref_calculate_mask_iou(gt_obj_mask, pred_obj_mask)
                if sub_iou >= 0.5 and obj_iou >= 0.5:
                    pred_hit_list[frame_id] = 1
    pred_hit_list_real = np.logical_and(pred_hit_list == 1, pred_span_list == 1).astype(pred_hit_list.dtype)
    iou_weak = ref_calculate_iou(pred_hit_list, gt_real_span_list)
    iou = ref_calculate_iou(pred_hit_list_real, gt_real_span_list)
    return iou, iou_weak


def ref_calculate_final_metrics(relation_recall_dict, K_values):  # type: ignore[no-untyped-def]  # noqa: N803
    final_metrics = {}
    num_valid_rel = len([rel for rel in relation_recall_dict[K_values[0]].values() if rel["total"] != 0])
    for K in K_values:  # noqa: N806
        total_recall = sum(rel["hit"] for rel in relation_recall_dict[K].values())
        total_weak_recall = sum(rel["weak_hit"] for rel in relation_recall_dict[K].values())
        total_gt = sum(rel["total"] for rel in relation_recall_dict[K].values())
        recall_at_k = total_recall / total_gt if total_gt > 0 else 0
        weak_recall_at_k = total_weak_recall / total_gt if total_gt > 0 else 0
        mean_recall = sum(rel["hit"] / rel["total"] for rel in relation_recall_dict[K].values()
                          if rel["total"] != 0) / num_valid_rel
        weak_mean_recall = sum(rel["weak_hit"] / rel["total"] for rel in relation_recall_dict[K].values()
                               if rel["total"] != 0) / num_valid_rel
        final_metrics[K] = {"recall": recall_at_k, "mean_recall": mean_recall, "weak_recall": weak_recall_at_k,
                            "weak_mean_recall": weak_mean_recall}
    return final_metrics


# ---- random PVSG videos ---------------------------------------------------------------------------
N_PRED, KS, H = 6, (20, 50, 100), 6


def pvsg_video(rng: np.random.Generator) -> dict:
    t = int(rng.integers(3, 9))
    n_obj = int(rng.integers(2, 5))
    cats = rng.integers(0, 3, n_obj)  # object id i (label i + 1 in the panoptic image) has category cats[i]
    pan = rng.integers(0, n_obj + 1, size=(t, H, H))  # 0 = background
    gts = []
    for _ in range(int(rng.integers(1, 5))):
        s, o = rng.choice(n_obj, 2, replace=False)
        a = int(rng.integers(0, t))
        spans = [[a, min(t - 1, a + int(rng.integers(0, 4)))]]
        gts.append((int(s) + 1, int(o) + 1, int(rng.integers(0, N_PRED)), spans))
    preds = []
    for _ in range(int(rng.integers(0, 30))):
        if gts and rng.random() < 0.6:
            s, o, p, spans = gts[int(rng.integers(0, len(gts)))]
        else:
            s, o = (int(x) + 1 for x in rng.choice(n_obj, 2, replace=False))
            p = int(rng.integers(0, N_PRED))
        span = (rng.random(t) < 0.7).astype(np.int64)
        masks = []
        for who in (s, o):
            noisy = {}
            for f in range(t):
                if rng.random() < 0.8:
                    m = pan[f] == who
                    flip = rng.random((H, H)) < rng.choice([0.0, 0.1, 0.4])
                    noisy[f] = _Tensorish((m ^ flip).astype(np.uint8))
            masks.append(noisy)
        preds.append({"sub": s, "obj": o, "cat": (int(cats[s - 1]), int(cats[o - 1]), p), "span": span,
                      "masks": masks})
    return {"t": t, "pan": pan, "cats": cats, "gts": gts, "preds": preds}


def ref_pvsg(videos: list[dict]) -> tuple[dict, dict]:
    rec = {K: {i: {"total": 0, "hit": 0, "weak_hit": 0} for i in range(N_PRED)} for K in KS}
    soft = {K: {i: {"total": 0, "hit": 0, "weak_hit": 0} for i in range(N_PRED)} for K in KS}
    for v in videos:
        for sub_idx, obj_idx, rel_idx, gt_span_list in v["gts"]:
            rel_key = (int(v["cats"][sub_idx - 1]), int(v["cats"][obj_idx - 1]), int(rel_idx))
            for K in KS:  # noqa: N806
                rec[K][rel_key[2]]["total"] += 1
                soft[K][rel_key[2]]["total"] += 1
            for idx, result in enumerate(v["preds"]):
                if result["cat"] == rel_key:
                    iou, _ = ref_calculate_viou((sub_idx, obj_idx, gt_span_list),
                                                ([result["masks"][0]], [result["masks"][1]], result["span"]), v["pan"])
                    if iou >= 0.1:
                        for K in KS:  # noqa: N806
                            if idx < K:
                                rec[K][rel_key[2]]["weak_hit"] += 1
                                soft[K][rel_key[2]]["weak_hit"] += iou
                    if iou >= 0.5:
                        for K in KS:  # noqa: N806
                            if idx < K:
                                rec[K][rel_key[2]]["hit"] += 1
                                soft[K][rel_key[2]]["hit"] += iou
                        break
    return ref_calculate_final_metrics(rec, list(KS)), ref_calculate_final_metrics(soft, list(KS))


def ours_pvsg(videos: list[dict]) -> V.PVSGResult:
    counts = []
    for v in videos:
        t = v["t"]
        gt_keys = np.array([(int(v["cats"][s - 1]), int(v["cats"][o - 1]), p) for s, o, p, _ in v["gts"]],
                           dtype=np.int64).reshape(-1, 3)
        pred_keys = np.array([r["cat"] for r in v["preds"]], dtype=np.int64).reshape(-1, 3)
        mat = np.zeros((len(v["gts"]), len(v["preds"])))
        for i, (s, o, _, spans) in enumerate(v["gts"]):
            gt_span = np.zeros(t, bool)
            for a, b in spans:
                gt_span[a:b + 1] = True
            sub_gt, obj_gt = v["pan"] == s, v["pan"] == o
            present = sub_gt.any(axis=(1, 2)) & obj_gt.any(axis=(1, 2))
            for j, r in enumerate(v["preds"]):
                both = [f for f in range(t) if f in r["masks"][0] and f in r["masks"][1]]
                sub_iou, obj_iou = np.zeros(t), np.zeros(t)
                for f in both:
                    sub_iou[f] = V.mask_iou(sub_gt[f][None], r["masks"][0][f].numpy().astype(bool)[None])[0]
                    obj_iou[f] = V.mask_iou(obj_gt[f][None], r["masks"][1][f].numpy().astype(bool)[None])[0]
                mat[i, j] = V.pvsg_viou(gt_span, present, r["span"].astype(bool), sub_iou, obj_iou)[0]
        counts.append(V.pvsg_counts(gt_keys, pred_keys, mat, KS, N_PRED))
    return V.evaluate_pvsg(counts, KS, N_PRED)


@pytest.mark.parametrize("case", range(60))
def test_pvsg_equals_openpvsg(case: int) -> None:
    rng = np.random.default_rng(case)
    videos = [pvsg_video(rng) for _ in range(int(rng.integers(1, 4)))]
    plain, soft = ref_pvsg(videos)
    ours = ours_pvsg(videos)
    for k in KS:
        assert ours.recall[k] == pytest.approx(plain[k]["recall"], abs=1e-12)
        assert ours.mean_recall[k] == pytest.approx(plain[k]["mean_recall"], abs=1e-12)
        assert ours.weak_recall[k] == pytest.approx(plain[k]["weak_recall"], abs=1e-12)
        assert ours.weak_mean_recall[k] == pytest.approx(plain[k]["weak_mean_recall"], abs=1e-12)
        assert ours.soft_recall[k] == pytest.approx(soft[k]["recall"], abs=1e-12)
        assert ours.soft_mean_recall[k] == pytest.approx(soft[k]["mean_recall"], abs=1e-12)
        assert ours.soft_weak_recall[k] == pytest.approx(soft[k]["weak_recall"], abs=1e-12)
        assert ours.soft_weak_mean_recall[k] == pytest.approx(soft[k]["weak_mean_recall"], abs=1e-12)
