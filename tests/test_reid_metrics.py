"""The ReID evaluation (tasks/reid/metrics.py) against literal re-implementations of the released code.

References, re-written here from reading them (not copied):
- torchreid ``eval_market1501``: KaiyangZhou/deep-person-reid, ``torchreid/metrics/rank.py``, commit
  37f92b7cc393ac2a0a0bce93c85500a47e3e0c83 (CMC and mAP);
- fast-reid ``eval_market1501``: JDAI-CV/fast-reid, ``fastreid/evaluation/rank.py``, commit
  23bedfce124092b08c301220bf1e4d40aecbf7bb (the same loop plus mINP).
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.tasks.reid.metrics import ReIDInputError, cosine_distances, euclidean_distances, evaluate


def reference_market1501(distmat, q_pids, g_pids, q_camids, g_camids, max_rank):
    """One query at a time, as the two repositories do it (fast-reid's mINP added to torchreid's loop)."""
    num_q, num_g = distmat.shape
    if num_g < max_rank:
        max_rank = num_g
    indices = np.argsort(distmat, axis=1)
    matches = (g_pids[indices] == q_pids[:, np.newaxis]).astype(np.int32)
    all_cmc, all_ap, all_inp = [], [], []
    num_valid_q = 0.0
    for q_idx in range(num_q):
        order = indices[q_idx]
        remove = (g_pids[order] == q_pids[q_idx]) & (g_camids[order] == q_camids[q_idx])
        keep = np.invert(remove)
        raw_cmc = matches[q_idx][keep]
        if not np.any(raw_cmc):
            continue
        cmc = raw_cmc.cumsum()
        max_pos_idx = np.max(np.where(raw_cmc == 1))
        all_inp.append(cmc[max_pos_idx] / (max_pos_idx + 1.0))
        cmc[cmc > 1] = 1
        all_cmc.append(cmc[:max_rank])
        num_valid_q += 1.0
        num_rel = raw_cmc.sum()
        tmp_cmc = raw_cmc.cumsum()
        tmp_cmc = np.asarray([x / (i + 1.0) for i, x in enumerate(tmp_cmc)]) * raw_cmc
        all_ap.append(tmp_cmc.sum() / num_rel)
    assert num_valid_q > 0
    all_cmc = np.asarray(all_cmc).astype(np.float32).sum(0) / num_valid_q
    return all_cmc, np.mean(all_ap), np.mean(all_inp)


def _random_case(rng, n_q, n_g, n_ids, n_cams, ties):
    q_pids = rng.integers(0, n_ids, n_q)
    g_pids = rng.integers(0, n_ids, n_g)
    q_cams = rng.integers(0, n_cams, n_q)
    g_cams = rng.integers(0, n_cams, n_g)
    dist = rng.integers(0, 4, (n_q, n_g)).astype(np.float64) if ties else rng.random((n_q, n_g))
    return dist, q_pids, g_pids, q_cams, g_cams


@pytest.mark.parametrize("seed", range(12))
def test_parity_with_reference_on_random_matrices(seed):
    rng = np.random.default_rng(seed)
    ties = seed % 2 == 0  # integer distances: many ties, ordered by the same argsort as the reference
    n_g = int(rng.integers(30, 120))
    dist, qp, gp, qc, gc = _random_case(rng, int(rng.integers(5, 60)), n_g, int(rng.integers(3, 12)),
                                        int(rng.integers(2, 5)), ties)
    # keep every query's kept gallery at least max_rank long, the case the reference can stack
    max_rank = min(10, n_g - int(np.bincount(gp).max()))
    ref_cmc, ref_map, ref_minp = reference_market1501(dist, qp, gp, qc, gc, max_rank)
    ours = evaluate(dist, qp, gp, qc, gc, max_rank=max_rank, chunk=7)  # odd chunk: chunk borders too
    np.testing.assert_allclose(ours.cmc, ref_cmc, rtol=0, atol=1e-6)
    assert ours.mAP == pytest.approx(ref_map, abs=1e-12)
    assert ours.mINP == pytest.approx(ref_minp, abs=1e-12)


def test_parity_when_same_camera_matches_are_removed():
    """Every query has a same-id same-camera gallery item closest to it: the reference drops it."""
    rng = np.random.default_rng(5)
    qp = np.arange(8) % 4
    qc = np.zeros(8, dtype=int)
    gp = np.concatenate([np.arange(4), np.arange(4), np.arange(4)])
    gc = np.array([0] * 4 + [1] * 4 + [2] * 4)
    dist = rng.random((8, 12)) + 1.0
    for i in range(8):
        dist[i, qp[i]] = 0.0  # the same-camera duplicate
    ref = reference_market1501(dist, qp, gp, qc, gc, 5)
    ours = evaluate(dist, qp, gp, qc, gc, max_rank=5)
    np.testing.assert_allclose(ours.cmc, ref[0], atol=1e-6)
    assert ours.mAP == pytest.approx(ref[1]) and ours.mINP == pytest.approx(ref[2])
    assert ours.rank(1) < 1.0  # the duplicate would have made every query a rank-1 hit


def test_positives_at_ranks_one_and_three():
    dist = np.array([[0.1, 0.2, 0.3, 0.4, 0.5]])
    gp = np.array([7, 1, 7, 2, 3])
    res = evaluate(dist, np.array([7]), gp, np.array([0]), np.ones(5, dtype=int), max_rank=5)
    assert res.mAP == pytest.approx((1 + 2 / 3) / 2)
    assert res.mINP == pytest.approx(2 / 3)
    assert res.rank(1) == 1.0 and list(res.cmc) == [1.0] * 5


def test_ranks_shift_after_dropping_same_camera_items():
    # gallery order: same id+cam (dropped), other id, same id other cam -> kept ranks: other, match
    dist = np.array([[0.0, 0.1, 0.2]])
    res = evaluate(dist, np.array([1]), np.array([1, 2, 1]), np.array([0]), np.array([0, 1, 1]), max_rank=2)
    assert list(res.cmc) == [0.0, 1.0]
    assert res.mAP == pytest.approx(0.5) and res.mINP == pytest.approx(0.5)


def test_skipped_queries_are_counted_not_hidden():
    dist = np.array([[0.1, 0.2], [0.3, 0.1], [0.2, 0.2]])
    res = evaluate(dist, np.array([1, 2, 9]), np.array([1, 2]), np.zeros(3, int), np.ones(2, int), max_rank=2)
    assert res.n_valid == 2 and res.skipped == [2] and res.mAP == 1.0
    with pytest.raises(ReIDInputError, match="no query identity"):
        evaluate(dist[2:], np.array([9]), np.array([1, 2]), np.zeros(1, int), np.ones(2, int))


def test_short_gallery_keeps_cmc_at_its_last_value():
    # query 0 keeps one gallery item (the rest are same id+cam): the CMC stays 1 past it
    dist = np.array([[0.3, 0.1, 0.2], [0.1, 0.2, 0.3]])
    res = evaluate(dist, np.array([1, 2]), np.array([1, 1, 2]), np.array([0, 5]), np.array([0, 0, 1]),
                   max_rank=3)
    assert res.n_valid == 1 and res.rank(3) == 1.0  # query 0: only same-camera matches, skipped
    assert list(res.cmc) == [0.0, 0.0, 1.0]


@pytest.mark.parametrize("bad, message", [
    (dict(q_camids=None), "query camera ids is missing"),
    (dict(g_camids=np.array([0.0, np.nan])), "gallery camera ids has missing"),
    (dict(g_pids=np.array([1, 2, 3])), "gallery ids has shape"),
    (dict(distmat=np.array([[0.1, np.nan]])), "non-finite"),
    (dict(distmat=np.zeros((1, 0))), "empty"),
])
def test_bad_input_is_a_one_line_error(bad, message):
    args = dict(distmat=np.array([[0.1, 0.2]]), q_pids=np.array([1]), g_pids=np.array([1, 2]),
                q_camids=np.array([0]), g_camids=np.array([1, 1]))
    args.update(bad)
    with pytest.raises(ReIDInputError, match=message) as exc:
        evaluate(**args)
    assert "\n" not in str(exc.value)


def test_distances():
    rng = np.random.default_rng(0)
    q, g = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))
    brute = ((q[:, None, :] - g[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(euclidean_distances(q, g), brute, atol=1e-9)
    assert cosine_distances(q, q).diagonal() == pytest.approx(np.zeros(3), abs=1e-9)
    with pytest.raises(ReIDInputError, match="do not match"):
        euclidean_distances(q, rng.normal(size=(5, 3)))
