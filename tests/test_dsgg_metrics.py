"""DSGG metrics: hand-computed frames for every protocol, properties, and the vectorised evaluator
against the per-frame loop of bench/dsgg_metrics.py (the reference protocol written out)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.tasks.dsgg import metrics as M
from harness.tasks.dsgg import set_metrics as S
from harness.tasks.dsgg import video_metrics as V

P = [0, 0, 9, 9]  # person: 10 x 10 = 100 px with the +1 convention
C = [20, 20, 29, 29]  # cup
PERSON, CUP, CHAIR = 1, 11, 8
LOOKING_AT, IN_FRONT_OF, DRINKING_FROM, HOLDING = 0, 5, 11, 14


def frame(objects):
    return {"person_box": P, "objects": objects}


def cup(**rels):
    return {"class": CUP, "box": C, "attention": [0], "spatial": [2], "contacting": [5], **rels}


def one_pair(att, spa, con, boxes=(P, C), labels=(PERSON, CUP), scores=(1.0, 1.0), frame_id=0):
    return M.AGPrediction(np.array(boxes, float), np.array(labels), np.array(scores), np.array([[0, 1]]),
                          np.array([frame_id]), np.array([att], float), np.array([spa], float), np.array([con], float))


SPA = [0.1, 0.2, 0.6, 0.3, 0.0, 0.0]  # argmax local 2 = in_front_of (global 5)
CON_WRONG = [0, 0, 0.6, 0, 0, 0.5] + [0] * 11  # argmax drinking_from (11); holding (14) second at 0.5
ATT = [0.7, 0.2, 0.1]


def test_box_iou_pixel_convention_and_exactly_half():
    assert M.box_iou([P], [P])[0] == 1.0
    # [0,0,9,4] is 10 x 5 = 50 px inside 100 px: IoU exactly 0.5 with the +1 convention
    assert M.box_iou([P], [[0, 0, 9, 4]])[0] == 0.5
    assert M.box_iou([P], [[0, 0, 9, 3]])[0] == pytest.approx(0.4)
    assert M.box_iou([P], [[np.nan] * 4])[0] == 0.0


def test_ag_ground_truth_orientation():
    gt = M.ag_ground_truth([frame([cup()])])
    assert gt.pred.tolist() == [LOOKING_AT, IN_FRONT_OF, HOLDING]
    assert gt.sub_cls.tolist() == [PERSON, CUP, PERSON]  # spatial is <object, predicate, person>
    assert gt.obj_cls.tolist() == [CUP, PERSON, CUP]


def test_with_no_semi_constraints_by_hand():
    gt = M.ag_ground_truth([frame([cup()])])
    pred = one_pair(ATT, SPA, CON_WRONG)
    # with: argmax per category -> looking_at, in_front_of hit; drinking_from misses holding
    assert M.evaluate_ag(gt, pred, "with").recall == {10: 2 / 3, 20: 2 / 3, 50: 2 / 3, 100: 2 / 3}
    # no: holding (0.5) is the 4th triplet (0.7, 0.6, 0.6, 0.5): inside the top 10
    assert M.evaluate_ag(gt, pred, "no", ks=(3, 4, 10)).recall == {3: 2 / 3, 4: 1.0, 10: 1.0}
    # semi at 0.9: only the attention argmax survives
    assert M.evaluate_ag(gt, pred, "semi").recall[10] == pytest.approx(1 / 3)
    assert M.evaluate_ag(gt, pred, "semi", semi_threshold=0.55).recall[10] == pytest.approx(2 / 3)


def test_ties_put_the_later_candidate_first():
    # spatial and contacting argmax tie at 0.6; reference order (argsort()[::-1]): contacting ranks first
    gt = M.ag_ground_truth([frame([cup()])])
    pred = one_pair(ATT, SPA, CON_WRONG)
    res = M.evaluate_ag(gt, pred, "with", ks=(1, 2, 3))
    assert res.recall == {1: pytest.approx(1 / 3), 2: pytest.approx(1 / 3), 3: pytest.approx(2 / 3)}


def test_iou_threshold_exactly_half_hits_and_below_misses():
    gt = M.ag_ground_truth([frame([cup()])])
    half = one_pair(ATT, SPA, [0] * 5 + [1.0] + [0] * 11, boxes=([0, 0, 9, 4], C))
    below = one_pair(ATT, SPA, [0] * 5 + [1.0] + [0] * 11, boxes=([0, 0, 9, 3], C))
    assert M.evaluate_ag(gt, half, "with").recall[20] == 1.0
    assert M.evaluate_ag(gt, below, "with").recall[20] == 0.0


def test_wrong_label_misses_and_object_scores_rank():
    gt = M.ag_ground_truth([frame([cup()])])
    pred = one_pair(ATT, SPA, [0] * 5 + [1.0] + [0] * 11, labels=(PERSON, CHAIR))
    assert M.evaluate_ag(gt, pred, "with").recall[100] == 0.0


def test_recall_averages_frames_and_mr_counts_absent_predicates_as_zero():
    # frame 0: 3 GT, with-constraint hits 2; frame 1: 1 GT (attention only), hit
    gt = M.ag_ground_truth([frame([cup()]), frame([cup(spatial=[], contacting=[])])])
    pred = M.AGPrediction(np.array([P, C, P, C], float), np.array([PERSON, CUP] * 2), np.ones(4),
                          np.array([[0, 1], [2, 3]]), np.array([0, 1]), np.array([ATT, ATT], float),
                          np.array([SPA, SPA], float), np.array([CON_WRONG, CON_WRONG], float))
    res = M.evaluate_ag(gt, pred, "with")
    assert res.recall[20] == pytest.approx((2 / 3 + 1) / 2)  # mean over frames, not 3/4 pooled
    assert res.frame_recall[:, 1].tolist() == pytest.approx([2 / 3, 1.0])
    # looking_at 2/2, in_front_of 1/1, holding 0/1; the other 23 predicates have no GT and add 0
    assert res.mean_recall[20] == pytest.approx((1 + 1 + 0) / 26)
    assert res.per_predicate(20)[HOLDING] == 0.0 and res.counts[HOLDING] == 1


def test_empty_prediction_frame_scores_zero():
    gt = M.ag_ground_truth([frame([cup()]), frame([cup()])])
    pred = one_pair(ATT, SPA, [0] * 5 + [1.0] + [0] * 11, frame_id=1)
    res = M.evaluate_ag(gt, pred, "no")
    assert res.frame_recall[:, 0].tolist() == [0.0, 1.0]


def _bench():
    path = Path(__file__).resolve().parents[1] / "bench" / "dsgg_metrics.py"
    spec = importlib.util.spec_from_file_location("dsgg_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("constraint", M.CONSTRAINTS)
@pytest.mark.parametrize("discrete", [False, True])
def test_vectorised_equals_per_frame_loop(constraint, discrete):
    bench = _bench()
    gt, pred, _ = bench.synthetic(150, 6, 10, seed=3)
    if discrete:  # many exact ties: the tie rule must agree too
        for name in ("attention", "spatial", "contacting", "obj_scores"):
            setattr(pred, name, np.round(getattr(pred, name) * 4) / 4)
    vec = M.evaluate_ag(gt, pred, constraint, semi_threshold=0.5)
    loop_r, loop_mr = bench.loop_evaluate(gt, pred, constraint, semi_threshold=0.5)
    for k in M.K_VALUES:
        assert vec.recall[k] == pytest.approx(loop_r[k], abs=1e-12)
        assert vec.mean_recall[k] == pytest.approx(loop_mr[k], abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), constraint=st.sampled_from(M.CONSTRAINTS))
def test_recall_non_decreasing_in_k(seed, constraint):
    gt, pred, _ = _bench().synthetic(20, 4, 3, seed=seed)
    res = M.evaluate_ag(gt, pred, constraint)
    values = [res.recall[k] for k in M.K_VALUES]
    assert values == sorted(values)
    mvalues = [res.mean_recall[k] for k in M.K_VALUES]
    assert mvalues == sorted(mvalues)


# ---------------------------------------------------------------------------------------------- VidVRD

def traj(n, box=(0, 0, 9, 9)):
    return [list(box)] * n


def rel(triplet, score, dur, sub=None, obj=None):
    n = dur[1] - dur[0]
    return {"triplet": triplet, "score": score, "duration": list(dur), "sub_traj": sub or traj(n),
            "obj_traj": obj or traj(n, (20, 20, 29, 29))}


def test_viou_by_hand():
    assert V.viou(traj(2), [0, 2], traj(2), [1, 3]) == pytest.approx(100 / 300)
    assert V.viou(traj(2), [0, 2], traj(2), [2, 4]) == 0.0
    assert V.viou(traj(3), [0, 3], traj(3), [0, 3]) == 1.0


def test_vidvrd_greedy_one_to_one_and_ap():
    t = ["dog", "chase", "ball"]
    gt = [rel(t, 1, (0, 10)), rel(t, 1, (0, 6))]
    pred = [
        rel(t, 0.9, (0, 9)),  # vIoU 0.9 with GT0, 6/9 with GT1: takes the larger, GT0
        rel(t, 0.8, (0, 10)),  # GT0 taken; GT1 vIoU = 6/10 >= 0.5 -> hit
        rel(["dog", "bite", "ball"], 0.7, (0, 10)),  # wrong predicate
    ]
    prec, rec, scores = V.vidvrd_detection(gt, pred)
    assert np.isfinite(scores).tolist() == [True, True, False]
    assert rec.tolist() == pytest.approx([0.5, 1.0, 1.0])
    assert prec.tolist() == pytest.approx([1.0, 1.0, 2 / 3])
    assert V.voc_ap(rec, prec) == pytest.approx(1.0)
    # a GT is hit once: a duplicate of pred 0 after both GTs are taken is a false positive
    prec2, rec2, s2 = V.vidvrd_detection(gt[:1], pred[:2])
    assert np.isfinite(s2).tolist() == [True, False]
    assert V.voc_ap(rec2, prec2) == pytest.approx(1.0)


def test_vidvrd_evaluate_recall_and_tagging():
    t1, t2 = ["dog", "chase", "ball"], ["dog", "bite", "ball"]
    gt = {"v1": [rel(t1, 1, (0, 10))], "v2": [rel(t2, 1, (0, 4)), rel(t1, 1, (0, 4))]}
    pred = {"v1": [rel(t2, 0.9, (0, 10)), rel(t1, 0.5, (0, 10))], "v2": [rel(t2, 0.8, (0, 4))]}
    res = V.evaluate_vidvrd(gt, pred)
    assert res.recall[50] == pytest.approx(2 / 3)
    # v1 AP: miss then hit -> 0.5; v2 AP: hit then one GT never found -> 0.5
    assert res.video_ap == {"v1": pytest.approx(0.5), "v2": pytest.approx(0.5)}
    assert res.mean_ap == pytest.approx(0.5)
    # tagging P@1: v1 top triplet wrong (0), v2 right (1); P@5 = precision at min(5, n distinct)
    assert res.tagging_precision[1] == pytest.approx(0.5)
    assert res.tagging_precision[5] == pytest.approx((0.5 + 1.0) / 2)


# ---------------------------------------------------------------------------------------------- PVSG

def test_pvsg_viou_strict_and_weak():
    T = 10
    gt_span = np.zeros(T, bool)
    gt_span[2:6] = True
    pred_span = np.zeros(T, bool)
    pred_span[3:8] = True
    ones = np.ones(T)
    strict, weak = V.pvsg_viou(gt_span, gt_span, pred_span, ones, ones)
    assert (strict, weak) == (pytest.approx(0.75), pytest.approx(1.0))
    # masks below 0.5 IoU on half the GT frames
    half = np.where(np.arange(T) < 4, 1.0, 0.4)
    assert V.pvsg_viou(gt_span, gt_span, pred_span, half, ones)[0] == pytest.approx(1 / 4)


def test_pvsg_counts_weak_soft_and_mean_recall():
    gt = np.array([[1, 2, 0], [1, 3, 1]])
    pred = np.array([[1, 2, 0], [1, 2, 0], [1, 3, 1]])
    v = np.array([[0.2, 0.75, 0.0], [0.0, 0.0, 0.3]])
    c = V.pvsg_counts(gt, pred, v, ks=(1, 2, 3), n_predicates=3)
    assert c["hit"][:, 0].tolist() == [0, 1, 1]  # hit at rank 1
    assert c["weak"][:, 0].tolist() == [1, 2, 2]  # ranks 0 and 1 both >= 0.1 (the reference counts both)
    assert c["soft"][2, 0] == pytest.approx(0.75)
    assert c["soft_weak"][2, 0] == pytest.approx(0.95)
    assert c["hit"][:, 1].tolist() == [0, 0, 0] and c["weak"][2, 1] == 1
    res = V.evaluate_pvsg([c], ks=(1, 2, 3), n_predicates=3)
    assert res.recall[3] == pytest.approx(0.5)
    assert res.mean_recall[3] == pytest.approx((1 + 0) / 2)  # predicate 2 has no GT: left out
    assert res.weak_recall[3] == pytest.approx(3 / 2)  # not capped at 1, as in the reference


# ---------------------------------------------------------------------------------------------- set metrics

def rows(*items):
    return S.Triplets.from_rows(list(items))


def test_set_metrics_duplicates_precision_redundancy():
    gt = rows((0, PERSON, HOLDING, CUP, P, C), (0, PERSON, LOOKING_AT, CUP, P, C))
    w = S.informativeness_weights(np.array([90] + [0] * 13 + [10] + [0] * 11))
    pred = rows((0, PERSON, HOLDING, CUP, P, C), (0, PERSON, HOLDING, CUP, P, [20, 20, 29, 30]),
                (0, PERSON, DRINKING_FROM, CUP, P, C))
    m = S.set_metrics(gt, pred, w)
    assert m["precision"] == pytest.approx(1 / 3)  # the duplicate cannot match the GT a second time
    assert m["recall"] == pytest.approx(1 / 2)
    assert m["f1"] == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    assert m["redundancy"] == pytest.approx(1 / 3)
    # informative recall: holding (rare) matched, looking_at (frequent) missed
    expected = w[HOLDING] / (w[HOLDING] + w[LOOKING_AT])
    assert m["informative_recall"] == pytest.approx(expected) and expected > 0.5


def test_duplicate_needs_iou_and_same_frame():
    pred = rows((0, PERSON, HOLDING, CUP, P, C), (0, PERSON, HOLDING, CUP, P, [60, 60, 69, 69]),
                (1, PERSON, HOLDING, CUP, P, C))
    assert S.duplicates(pred).tolist() == [False, False, False]
    syn = np.arange(26)
    syn[DRINKING_FROM] = HOLDING  # treat drinking_from as a synonym of holding
    pred2 = rows((0, PERSON, HOLDING, CUP, P, C), (0, PERSON, DRINKING_FROM, CUP, P, C))
    assert S.duplicates(pred2, canonical=syn).tolist() == [False, True]


def test_temporal_redundancy_counts_overlapping_spans():
    gt = rows((0, PERSON, HOLDING, CUP))
    span_rows = rows(*[(f, PERSON, HOLDING, CUP) for f in (0, 1, 2)], *[(f, PERSON, HOLDING, CUP) for f in (2, 3)])
    counts, _ = S.set_counts(gt, span_rows, np.ones(26), use_boxes=False, span_rows=span_rows)
    assert counts.metrics()["temporal_redundancy"] == pytest.approx(1 / 5)


def test_greedy_one_to_one_prefers_larger_overlap():
    gt = rows((0, PERSON, HOLDING, CUP, P, [20, 20, 29, 29]), (0, PERSON, HOLDING, CUP, P, [20, 20, 29, 31]))
    pred = rows((0, PERSON, HOLDING, CUP, P, [20, 20, 29, 31]))
    assert S.one_to_one_matches(gt, pred).tolist() == [1]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 6), dup=st.integers(0, 5), seed=st.integers(0, 1000))
def test_duplicates_lower_precision(n, dup, seed):
    rng = np.random.default_rng(seed)
    items = [(0, PERSON, int(p), CUP, P, C) for p in rng.choice(26, size=n, replace=False)]
    gt = rows(*items[: max(1, n // 2)])
    base = S.set_metrics(gt, rows(*items))
    with_dups = S.set_metrics(gt, rows(*items, *[items[0]] * dup))
    if dup:
        assert with_dups["precision"] < base["precision"]
        assert with_dups["redundancy"] > base["redundancy"] == 0.0
    assert with_dups["recall"] == base["recall"]


def test_precision_at_k():
    gt = rows((0, PERSON, HOLDING, CUP, P, C))
    pred = rows((0, PERSON, LOOKING_AT, CUP, P, C), (0, PERSON, HOLDING, CUP, P, C))
    assert S.precision_at_k(gt, pred, ks=(1, 2)) == {1: 0.0, 2: 0.5}


def test_informativeness_weights_order():
    w = S.informativeness_weights(np.array([1000, 10, 0]))
    assert w[0] < w[1] < w[2] and math.isfinite(w[2])
