"""The ReID evaluation as the field computes it (Market-1501 protocol), vectorised.

For each query the gallery is ranked by ascending distance (``np.argsort`` with numpy's default
kind, as torchreid and fast-reid do, so tied distances are ordered exactly as theirs are); gallery
items with the query's identity *and* camera are dropped; a query with no remaining true match is
skipped (and counted: ``skipped`` lists them, so a metric is never silently computed over fewer
queries). Per valid query:

- CMC: 1 from the rank of the first true match onwards (cumulative, clipped at 1), averaged;
- AP: the mean over true matches of precision at each match's rank;
- INP (fast-reid's mINP): number of true matches / rank of the last (hardest) one.

A query whose kept gallery is shorter than ``max_rank`` keeps its CMC at its last value beyond
(the reference would fail to stack such rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


class ReIDInputError(ValueError):
    """Inconsistent evaluation input (shapes, missing camera ids, NaN distances)."""


@dataclass
class ReIDResult:
    cmc: np.ndarray  # [max_rank] float64
    mAP: float
    mINP: float
    n_valid: int
    n_queries: int
    ap: np.ndarray = field(repr=False)  # per valid query
    inp: np.ndarray = field(repr=False)
    valid: np.ndarray = field(repr=False)  # bool [n_queries]
    first: np.ndarray = field(repr=False)  # per valid query: 0-based rank of the first true match

    @property
    def skipped(self) -> list[int]:
        return [int(i) for i in np.flatnonzero(~self.valid)]

    def rank(self, k: int) -> float:
        return float(self.cmc[min(k, len(self.cmc)) - 1])

    def summary(self) -> dict[str, Any]:
        return {"mAP": self.mAP, "mINP": self.mINP, "rank1": self.rank(1), "rank5": self.rank(5),
                "rank10": self.rank(10), "valid_queries": self.n_valid, "skipped_queries": len(self.skipped)}


def _ids(name: str, values: Any, n: int) -> np.ndarray:
    if values is None:
        raise ReIDInputError(f"{name} is missing")
    arr = np.asarray(values)
    if arr.ndim != 1 or len(arr) != n:
        raise ReIDInputError(f"{name} has shape {arr.shape}, expected ({n},) to match the distance matrix")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ReIDInputError(f"{name} has missing (NaN) values")
    if arr.dtype == object and any(v is None for v in arr):
        raise ReIDInputError(f"{name} has missing (None) values")
    return arr


def evaluate(distmat: Any, q_pids: Any, g_pids: Any, q_camids: Any, g_camids: Any, max_rank: int = 50,
             chunk: int = 128) -> ReIDResult:
    """CMC (``max_rank`` long), mAP and mINP of a [queries, gallery] distance matrix."""
    dist = np.asarray(distmat)
    if dist.ndim != 2:
        raise ReIDInputError(f"the distance matrix must be 2-D, got shape {dist.shape}")
    n_q, n_g = dist.shape
    if n_q == 0 or n_g == 0:
        raise ReIDInputError(f"empty query or gallery (distance matrix {dist.shape})")
    if not np.isfinite(dist).all():
        raise ReIDInputError(f"the distance matrix has {int((~np.isfinite(dist)).sum())} non-finite entries")
    qp, gp = _ids("query ids", q_pids, n_q), _ids("gallery ids", g_pids, n_g)
    qc, gc = _ids("query camera ids", q_camids, n_q), _ids("gallery camera ids", g_camids, n_g)
    max_rank = min(int(max_rank), n_g)
    if max_rank < 1:
        raise ReIDInputError("max_rank must be at least 1")
    cmc_sum = np.zeros(max_rank, dtype=np.float64)
    aps, inps, firsts, valid = [], [], [], np.zeros(n_q, dtype=bool)
    ranks = np.arange(max_rank)
    for lo in range(0, n_q, chunk):
        hi = min(lo + chunk, n_q)
        order = np.argsort(dist[lo:hi], axis=1)
        match = gp[order] == qp[lo:hi, None]
        keep = ~(match & (gc[order] == qc[lo:hi, None]))
        good = match & keep
        n_rel = good.sum(axis=1)
        ok = n_rel > 0
        valid[lo:hi] = ok
        if not ok.any():
            continue
        good, keep, n_rel = good[ok], keep[ok], n_rel[ok]
        # position of each gallery item among the kept ones (1-based): dropping items shifts ranks
        kept_rank = np.cumsum(keep, axis=1, dtype=np.int32)
        hits = np.cumsum(good, axis=1, dtype=np.int32)
        prec = np.where(good, hits / np.maximum(kept_rank, 1), 0.0)
        aps.append(prec.sum(axis=1) / n_rel)
        first = np.where(good, kept_rank, np.iinfo(np.int32).max).min(axis=1) - 1  # 0-based kept rank
        last = np.where(good, kept_rank, 0).max(axis=1)
        inps.append(n_rel / last)
        firsts.append(first)
        cmc_sum += (first[:, None] <= ranks[None, :]).sum(axis=0)
    n_valid = int(valid.sum())
    if n_valid == 0:
        raise ReIDInputError("no query identity appears in the gallery (under another camera)")
    ap, inp = np.concatenate(aps), np.concatenate(inps)
    return ReIDResult(cmc=cmc_sum / n_valid, mAP=float(ap.mean()), mINP=float(inp.mean()), n_valid=n_valid,
                      n_queries=n_q, ap=ap, inp=inp, valid=valid, first=np.concatenate(firsts))


def euclidean_distances(query: Any, gallery: Any) -> np.ndarray:
    """Squared Euclidean distances [queries, gallery] (torchreid's ``euclidean_squared_distance``)."""
    q = np.asarray(query, dtype=np.float64)
    g = np.asarray(gallery, dtype=np.float64)
    if q.ndim != 2 or g.ndim != 2 or q.shape[1] != g.shape[1]:
        raise ReIDInputError(f"query embeddings {q.shape} and gallery embeddings {g.shape} do not match")
    d = (q * q).sum(1)[:, None] + (g * g).sum(1)[None, :] - 2.0 * q @ g.T
    return np.maximum(d, 0.0)


def cosine_distances(query: Any, gallery: Any) -> np.ndarray:
    """1 - cosine similarity (torchreid's ``cosine_distance``), on L2-normalised embeddings."""
    q = np.asarray(query, dtype=np.float64)
    g = np.asarray(gallery, dtype=np.float64)
    if q.ndim != 2 or g.ndim != 2 or q.shape[1] != g.shape[1]:
        raise ReIDInputError(f"query embeddings {q.shape} and gallery embeddings {g.shape} do not match")
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    g = g / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-12)
    return 1.0 - q @ g.T
