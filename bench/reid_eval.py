"""ReID evaluation speed: the vectorised evaluation (tasks/reid/metrics.py) against the per-query loop
of torchreid/fast-reid's ``eval_market1501`` (pure-Python path), on a random [queries x gallery]
distance matrix (float32) with 1000 identities over 6 cameras.

The loop baseline is timed on the first ``--loop-queries`` queries only (its cost is linear in the
number of queries, the shared argsort included) and extrapolated to all of them; the table says so.

    python bench/reid_eval.py                       # 10k queries x 50k gallery (~2 GB distance matrix)
    python bench/reid_eval.py --queries 2000 --gallery 10000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from harness.tasks.reid.metrics import evaluate


def loop_baseline(distmat: np.ndarray, q_pids: np.ndarray, g_pids: np.ndarray, q_camids: np.ndarray,
                  g_camids: np.ndarray, max_rank: int) -> tuple[np.ndarray, float, float]:
    """The reference's per-query loop (re-written from torchreid/fast-reid, see tests/test_reid_metrics.py)."""
    indices = np.argsort(distmat, axis=1)
    matches = (g_pids[indices] == q_pids[:, np.newaxis]).astype(np.int32)
    all_cmc, all_ap, all_inp = [], [], []
    for q in range(distmat.shape[0]):
        order = indices[q]
        keep = ~((g_pids[order] == q_pids[q]) & (g_camids[order] == q_camids[q]))
        raw = matches[q][keep]
        if not raw.any():
            continue
        cmc = raw.cumsum()
        last = int(np.max(np.where(raw == 1)))
        all_inp.append(cmc[last] / (last + 1.0))
        cmc[cmc > 1] = 1
        all_cmc.append(cmc[:max_rank])
        tmp = np.asarray([x / (i + 1.0) for i, x in enumerate(raw.cumsum())]) * raw
        all_ap.append(tmp.sum() / raw.sum())
    return np.asarray(all_cmc, dtype=np.float32).mean(0), float(np.mean(all_ap)), float(np.mean(all_inp))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--gallery", type=int, default=50_000)
    ap.add_argument("--loop-queries", type=int, default=200, help="queries the loop baseline is timed on")
    ap.add_argument("--ids", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    n_q, n_g = args.queries, args.gallery
    q_pids, g_pids = rng.integers(0, args.ids, n_q), rng.integers(0, args.ids, n_g)
    q_cams, g_cams = rng.integers(0, 6, n_q), rng.integers(0, 6, n_g)
    dist = rng.random((n_q, n_g), dtype=np.float32)
    # make true matches closer so the metrics are not all near zero
    dist -= 0.3 * (q_pids[:, None] == g_pids[None, :])

    t0 = time.perf_counter()
    ours = evaluate(dist, q_pids, g_pids, q_cams, g_cams, max_rank=50)
    t_vec = time.perf_counter() - t0

    m = min(args.loop_queries, n_q)
    t0 = time.perf_counter()
    ref = loop_baseline(dist[:m], q_pids[:m], g_pids, q_cams[:m], g_cams, 50)
    t_loop_m = time.perf_counter() - t0
    t_loop = t_loop_m * n_q / m
    sub = evaluate(dist[:m], q_pids[:m], g_pids, q_cams[:m], g_cams, max_rank=50)
    agree = abs(sub.mAP - ref[1]) < 1e-9 and abs(sub.mINP - ref[2]) < 1e-9 and np.allclose(sub.cmc, ref[0], atol=1e-6)

    print(f"ReID evaluation, {n_q} queries x {n_g} gallery, float32 distances, max_rank 50")
    print(f"{'method':<44}{'seconds':>10}{'ratio':>8}")
    print(f"{'per-query loop (reference), extrapolated':<44}{t_loop:>10.2f}{1.0:>8.2f}")
    print(f"{'  measured on ' + str(m) + ' queries':<44}{t_loop_m:>10.2f}")
    print(f"{'vectorised (harness.tasks.reid.metrics)':<44}{t_vec:>10.2f}{t_loop / t_vec:>8.1f}x")
    print(f"mAP {ours.mAP:.4f}  rank-1 {ours.rank(1):.4f}  mINP {ours.mINP:.4f}  "
          f"(loop vs vectorised on the timed queries agree: {agree})")


if __name__ == "__main__":
    main()
