"""Support/query split and per-video normalisation shared by training and scoring."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from harness.tasks.spa3d.metrics import first_visible_frames
from harness.tasks.spa3d.tracks import Tracks

# The paper's inference setting: 2048 support + 512 query tracks
SUPPORT = 2048
QUERY = 512


@dataclass
class Normaliser:
    """Centre and RMS scale of a video's visible support points (positions -> ~unit range)."""

    centre: np.ndarray
    scale: float

    @staticmethod
    def fit(tracks: Tracks) -> Normaliser:
        pts = tracks.tracks_3d[tracks.visible]
        centre = pts.mean(axis=0)
        scale = float(np.sqrt(np.mean(np.sum((pts - centre) ** 2, axis=-1))))
        return Normaliser(centre.astype(np.float32), max(scale, 1e-6))

    def apply(self, pos: np.ndarray) -> np.ndarray:
        return (pos - self.centre) / self.scale

    def invert(self, pos: np.ndarray) -> np.ndarray:
        return pos * self.scale + self.centre


def split_support_query(tracks: Tracks, rng: np.random.Generator, support: int = SUPPORT, query: int = QUERY,
                        query_fraction: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint index sets; videos with fewer than support + query tracks keep ``query_fraction``
    of their tracks as queries (a choice: the paper's counts assume dense 64x64-grid tracking).
    Only tracks visible somewhere are used as queries (a query needs a query frame)."""
    n = tracks.num_points
    order = rng.permutation(n)
    seen = cast(np.ndarray, tracks.visible.any(axis=1))
    queries = [i for i in order if seen[i]]
    n_query = min(query, max(1, int(round(n * query_fraction))), len(queries))
    q = np.array(sorted(queries[:n_query]))
    rest = np.setdiff1d(order, q)
    s = np.sort(rng.permutation(rest)[:support])
    return s, q


def sample_with_replacement(idx: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Exactly ``k`` indices (without replacement when enough, else padded by repeats) so that
    training batches stack without padding masks."""
    if len(idx) >= k:
        return rng.choice(idx, size=k, replace=False)
    return np.concatenate([idx, rng.choice(idx, size=k - len(idx), replace=True)])


def arrays_for(tracks: Tracks, norm: Normaliser, support_idx: np.ndarray,
               query_idx: np.ndarray) -> dict[str, np.ndarray]:
    feats = tracks.features
    out = {
        "s_pos": norm.apply(tracks.tracks_3d[support_idx]).astype(np.float32),
        "s_vis": tracks.visible[support_idx],
        "q_pos": norm.apply(tracks.tracks_3d[query_idx]).astype(np.float32),
        "q_vis": tracks.visible[query_idx],
        "q_frame": first_visible_frames(tracks.visible[query_idx]).astype(np.int64),
    }
    if feats is not None:
        out["s_feats"] = feats[support_idx]
        out["q_feats"] = feats[query_idx]
    return out


def to_batch(items: list[dict[str, np.ndarray]]) -> tuple[dict, dict, dict]:
    """Stack per-video arrays to (support, query inputs, targets) tensors."""
    import torch

    def stack(key: str) -> torch.Tensor:
        return torch.from_numpy(np.stack([it[key] for it in items]))

    support = {"pos": stack("s_pos"), "vis": stack("s_vis")}
    query = {"pos": stack("q_pos"), "frame": stack("q_frame")}
    if "s_feats" in items[0]:
        support["feats"] = stack("s_feats")
        query["feats"] = stack("q_feats")
    return support, query, {"pos": stack("q_pos"), "vis": stack("q_vis")}
