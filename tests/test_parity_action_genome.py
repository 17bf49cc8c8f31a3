"""Parity of the Action Genome R@K (``evaluate_ag``) with STTran's released evaluator.

Reference: yrcong/STTran at commit 6b559e13ae891db4da913378a4153ddb444d4875, ``lib/evaluation_recall.py``
(``BasicSceneGraphEvaluator.evaluate_scene_graph``, ``evaluate_from_dict``, ``evaluate_recall``,
``_triplet``, ``_compute_pred_matches``), ``lib/ults/pytorch_misc.py`` (``intersect_2d``,
``argsort_desc``) and ``lib/fpn/box_intersections_cpu/bbox.pyx`` (``bbox_overlaps``). The ``ref_*``
functions re-implement them from reading them, per frame, with numpy in place of torch tensors; the
attention softmax is left out (both sides get probabilities). Scores are continuous so no two candidates
tie (numpy's default sort leaves tie order to the platform); for the no-constraint protocol every frame
has at least 4 pairs, so its top 100 never reaches the zero-padded cells. Edge cases: frames without
pairs, predictions without boxes or pairs (R@K = 0, as the reference's ``pred_rels.size == 0`` branch),
duplicate pairs, wrong labels, boxes at IoU 0.5.
"""

from __future__ import annotations

from functools import reduce

import numpy as np
import pytest

from harness.tasks.dsgg import metrics as M

KS = (10, 20, 50, 100)


# ---- literal re-implementation of the reference -------------------------------------------------
def ref_bbox_overlaps(boxes: np.ndarray, query_boxes: np.ndarray) -> np.ndarray:
    n, k_ = boxes.shape[0], query_boxes.shape[0]
    overlaps = np.zeros((n, k_), dtype=float)
    for k in range(k_):
        box_area = (query_boxes[k, 2] - query_boxes[k, 0] + 1) * (query_boxes[k, 3] - query_boxes[k, 1] + 1)
        for i in range(n):
            iw = min(boxes[i, 2], query_boxes[k, 2]) - max(boxes[i, 0], query_boxes[k, 0]) + 1
            if iw > 0:
                ih = min(boxes[i, 3], query_boxes[k, 3]) - max(boxes[i, 1], query_boxes[k, 1]) + 1
                if ih > 0:
                    ua = float((boxes[i, 2] - boxes[i, 0] + 1) * (boxes[i, 3] - boxes[i, 1] + 1) + box_area - iw * ih)
                    overlaps[i, k] = iw * ih / ua
    return overlaps


def ref_intersect_2d(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    return (x1[..., None] == x2.T[None, ...]).all(1)


def ref_argsort_desc(scores: np.ndarray) -> np.ndarray:
    return np.column_stack(np.unravel_index(np.argsort(-scores.ravel()), scores.shape))


def ref_triplet(predicates, relations, classes, boxes, predicate_scores=None, class_scores=None):  # type: ignore
    sub_ob_classes = classes[relations[:, :2]]
    triplets = np.column_stack((sub_ob_classes[:, 0], predicates, sub_ob_classes[:, 1]))
    triplet_boxes = np.column_stack((boxes[relations[:, 0]], boxes[relations[:, 1]]))
    triplet_scores = None
    if predicate_scores is not None and class_scores is not None:
        triplet_scores = np.column_stack((class_scores[relations[:, 0]], class_scores[relations[:, 1]],
                                          predicate_scores))
    return triplets, triplet_boxes, triplet_scores


def ref_compute_pred_matches(gt_triplets, pred_triplets, gt_boxes, pred_boxes, iou_thresh):  # type: ignore
    keeps = ref_intersect_2d(gt_triplets, pred_triplets)
    gt_has_match = keeps.any(1)
    pred_to_gt = [[] for _ in range(pred_boxes.shape[0])]
    for gt_ind, gt_box, keep_inds in zip(np.where(gt_has_match)[0], gt_boxes[gt_has_match], keeps[gt_has_match],
                                         strict=True):
        boxes = pred_boxes[keep_inds]
        sub_iou = ref_bbox_overlaps(gt_box[None, :4], boxes[:, :4])[0]
        obj_iou = ref_bbox_overlaps(gt_box[None, 4:], boxes[:, 4:])[0]
        inds = (sub_iou >= iou_thresh) & (obj_iou >= iou_thresh)
        for i in np.where(keep_inds)[0][inds]:
            pred_to_gt[i].append(int(gt_ind))
    return pred_to_gt


def ref_evaluate_recall(gt_rels, gt_boxes, gt_classes, pred_rels, pred_boxes, pred_classes, rel_scores,
                        cls_scores, iou_thresh=0.5):  # type: ignore
    if pred_rels.size == 0:
        return [[]]
    assert gt_rels.shape[0] != 0
    gt_triplets, gt_triplet_boxes, _ = ref_triplet(gt_rels[:, 2], gt_rels[:, :2], gt_classes, gt_boxes)
    assert pred_rels[:, :2].max() < pred_classes.shape[0]
    pred_triplets, pred_triplet_boxes, relation_scores = ref_triplet(pred_rels[:, 2], pred_rels[:, :2], pred_classes,
                                                                     pred_boxes, rel_scores, cls_scores)
    sorted_scores = relation_scores.prod(1)
    pred_triplets = pred_triplets[sorted_scores.argsort()[::-1], :]
    pred_triplet_boxes = pred_triplet_boxes[sorted_scores.argsort()[::-1], :]
    return ref_compute_pred_matches(gt_triplets, pred_triplets, gt_triplet_boxes, pred_triplet_boxes, iou_thresh)


def ref_evaluate_from_dict(gt_entry, pred_entry, method, threshold, recall):  # type: ignore
    gt_rels = gt_entry["gt_relations"]
    gt_boxes = gt_entry["gt_boxes"].astype(float)
    gt_classes = gt_entry["gt_classes"]
    pred_rel_inds = pred_entry["pred_rel_inds"]
    rel_scores = pred_entry["rel_scores"]
    pred_boxes = pred_entry["pred_boxes"].astype(float)
    pred_classes = pred_entry["pred_classes"]
    obj_scores = pred_entry["obj_scores"]
    if method == "semi":
        pred_rels, predicate_scores = [], []
        for i, j in enumerate(pred_rel_inds):
            if rel_scores[i, 0] + rel_scores[i, 1] > 0:
                pred_rels.append(np.append(j, rel_scores[i].argmax()))
                predicate_scores.append(rel_scores[i].max())
            elif rel_scores[i, 3] + rel_scores[i, 4] > 0:
                for k in np.where(rel_scores[i] > threshold)[0]:
                    pred_rels.append(np.append(j, k))
                    predicate_scores.append(rel_scores[i, k])
            elif rel_scores[i, 9] + rel_scores[i, 10] > 0:
                for k in np.where(rel_scores[i] > threshold)[0]:
                    pred_rels.append(np.append(j, k))
                    predicate_scores.append(rel_scores[i, k])
        pred_rels = np.array(pred_rels)
        predicate_scores = np.array(predicate_scores)
    elif method == "no":
        obj_scores_per_rel = obj_scores[pred_rel_inds].prod(1)
        overall_scores = obj_scores_per_rel[:, None] * rel_scores
        score_inds = ref_argsort_desc(overall_scores)[:100]
        pred_rels = np.column_stack((pred_rel_inds[score_inds[:, 0]], score_inds[:, 1]))
        predicate_scores = rel_scores[score_inds[:, 0], score_inds[:, 1]]
    else:
        pred_rels = np.column_stack((pred_rel_inds, rel_scores.argmax(1)))
        predicate_scores = rel_scores.max(1)
    pred_to_gt = ref_evaluate_recall(gt_rels, gt_boxes, gt_classes, pred_rels, pred_boxes, pred_classes,
                                     predicate_scores, obj_scores)
    for k in recall:
        match = reduce(np.union1d, pred_to_gt[:k])
        recall[k].append(float(len(match)) / float(gt_rels.shape[0]))


def ref_evaluate_video(frames: list[dict], pred: dict, method: str, threshold: float) -> dict[int, float]:
    """``evaluate_scene_graph`` for one video (predcls keys), then ``print_stats``'s mean per K."""
    recall: dict[int, list[float]] = {k: [] for k in KS}
    for idx, frame_gt in enumerate(frames):
        gt_boxes = np.zeros([len(frame_gt["objects"]) + 1, 4])
        gt_classes = np.zeros(len(frame_gt["objects"]) + 1)
        gt_relations = []
        gt_classes[0] = 1
        gt_boxes[0] = frame_gt["person_box"]
        for m, n in enumerate(frame_gt["objects"]):
            gt_boxes[m + 1, :] = n["box"]
            gt_classes[m + 1] = n["class"]
            gt_relations.append([0, m + 1, n["attention"][0]])
            for spatial in n["spatial"]:
                gt_relations.append([m + 1, 0, 3 + spatial])
            for contact in n["contacting"]:
                gt_relations.append([0, m + 1, 9 + contact])
        gt_entry = {"gt_classes": gt_classes, "gt_relations": np.array(gt_relations), "gt_boxes": gt_boxes}
        sel = pred["im_idx"] == idx
        pairs = pred["pair_idx"][sel]
        rels_i = np.concatenate((pairs, pairs[:, ::-1], pairs), axis=0)
        n_pairs = pairs.shape[0]
        s1 = np.concatenate((pred["attention"][sel], np.zeros([n_pairs, 6]), np.zeros([n_pairs, 17])), axis=1)
        s2 = np.concatenate((np.zeros([n_pairs, 3]), pred["spatial"][sel], np.zeros([n_pairs, 17])), axis=1)
        s3 = np.concatenate((np.zeros([n_pairs, 3]), np.zeros([n_pairs, 6]), pred["contacting"][sel]), axis=1)
        pred_entry = {"pred_boxes": pred["boxes"], "pred_classes": pred["labels"], "pred_rel_inds": rels_i,
                      "obj_scores": pred["scores"], "rel_scores": np.concatenate((s1, s2, s3), axis=0)}
        ref_evaluate_from_dict(gt_entry, pred_entry, method, threshold, recall)
    return {k: float(np.mean(v)) for k, v in recall.items()}


# ---- random videos -------------------------------------------------------------------------------
def random_video(rng: np.random.Generator, method: str, case: int) -> tuple[list[dict], dict]:
    n_frames = int(rng.integers(1, 5))
    frames, boxes, labels, scores, pair_idx, im_idx = [], [], [], [], [], []
    for f in range(n_frames):
        person = [float(x) for x in rng.integers(0, 50, 2)] + [0.0, 0.0]
        person[2:] = [person[0] + rng.integers(20, 80), person[1] + rng.integers(20, 80)]
        n_obj = int(rng.integers(1, 4))
        objects = []
        for _ in range(n_obj):
            x, y = (float(v) for v in rng.integers(0, 200, 2))
            w, h = (float(v) for v in rng.integers(5, 60, 2))
            objects.append({"class": int(rng.integers(2, 8)), "box": [x, y, x + w, y + h],
                            "attention": [int(rng.integers(0, 3))],
                            "spatial": sorted(rng.choice(6, int(rng.integers(1, 3)), replace=False).tolist()),
                            "contacting": sorted(rng.choice(17, int(rng.integers(0, 3)), replace=False).tolist())})
        frames.append({"person_box": person, "objects": objects})
        if case % 11 == 0 or (case % 7 == 0 and f == 0):
            continue  # no pairs in this frame (or in the whole video)
        base = len(boxes)
        jitter = float(rng.choice([0.0, 2.0, 15.0]))
        boxes.append(np.asarray(person) + rng.normal(0, jitter, 4)), labels.append(1), scores.append(rng.uniform(.3, 1))
        n_pairs = int(rng.integers(4, 7)) if method == "no" else int(rng.integers(1, 5))
        for p in range(n_pairs):
            o = objects[p % n_obj]
            right = rng.random() < 0.8
            boxes.append(np.asarray(o["box"]) + rng.normal(0, jitter, 4))
            labels.append(o["class"] if right else int(rng.integers(2, 8)))
            scores.append(rng.uniform(0.3, 1.0))
            pair_idx.append([base, len(boxes) - 1]), im_idx.append(f)
    n = len(pair_idx)
    pred = {"boxes": np.asarray(boxes, float).reshape(-1, 4), "labels": np.asarray(labels, np.int64),
            "scores": np.asarray(scores, float), "pair_idx": np.asarray(pair_idx, np.int64).reshape(-1, 2),
            "im_idx": np.asarray(im_idx, np.int64), "attention": rng.dirichlet(np.ones(3), size=n).reshape(n, 3),
            "spatial": (rng.uniform(0, 1, (n, 6)) ** 2).reshape(n, 6),
            "contacting": (rng.uniform(0, 1, (n, 17)) ** 2).reshape(n, 17)}
    return frames, pred


CASES = [(method, case) for method in ("with", "no", "semi") for case in range(100)]


@pytest.mark.parametrize("method, case", CASES)
def test_recall_equals_sttran(method: str, case: int) -> None:
    rng = np.random.default_rng(1000 * CASES.index((method, case)) + 7)
    frames, pred = random_video(rng, method, case)
    threshold = 0.5 if case % 2 else 0.9
    ref = ref_evaluate_video(frames, pred, method, threshold)
    gt = M.ag_ground_truth(frames)
    ours = M.evaluate_ag(gt, M.AGPrediction(pred["boxes"], pred["labels"], pred["scores"], pred["pair_idx"],
                                            pred["im_idx"], pred["attention"], pred["spatial"], pred["contacting"]),
                         method, semi_threshold=threshold)
    assert ours.recall == pytest.approx(ref, abs=1e-12)


def test_a_prediction_without_boxes_or_pairs_scores_zero() -> None:
    frames = [{"person_box": [0, 0, 9, 9], "objects": [{"class": 3, "box": [5, 5, 20, 20], "attention": [0],
                                                        "spatial": [1], "contacting": [2]}]}]
    empty = {"boxes": np.zeros((0, 4)), "labels": np.zeros(0, np.int64), "scores": np.zeros(0),
             "pair_idx": np.zeros((0, 2), np.int64), "im_idx": np.zeros(0, np.int64), "attention": np.zeros((0, 3)),
             "spatial": np.zeros((0, 6)), "contacting": np.zeros((0, 17))}
    for method in ("with", "no", "semi"):
        assert ref_evaluate_video(frames, empty, method, 0.9) == dict.fromkeys(KS, 0.0)
        lists = M.AGPrediction([], [], [], [], [], [], [], [])  # plain empty lists, as a JSON reply gives them
        assert M.evaluate_ag(M.ag_ground_truth(frames), lists, method).recall == dict.fromkeys(KS, 0.0)
