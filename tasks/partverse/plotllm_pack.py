"""Reading a 3D-PLOT-LLM partition pack (``<oid>.pack.npz``) into what the model's part tokens need.

A released pack (3D-PLOT-LLM's ``data_tools/partition_packs``) holds, for the 512 Point-BERT
patches of one object: ``patch_xyz`` (the patch centres, farthest-point samples of the normalised
cloud), ``patch_feat`` and ``cls_feat`` (the frozen Point-BERT's patch and cls outputs for those
centres), ``patch_adj_edges`` (the patch graph: each centre's 12 nearest centres, made symmetric,
keeping only edges no longer than the 75th percentile of those neighbour distances), and the region
labels: ``patch_r16`` or ``patch_r64`` with ``map64_to_16``. From them, as the reference's data
loader and eval scripts do:

- **group ids**: ``patch_r{K}``, else ``map64_to_{K}[patch_r64]`` (K from the checkpoint's
  ``bcp_num_groups``); every region must hold at least one patch (the reference asserts it);
- **region adjacency** (K, K): regions ``a != b`` are adjacent when a patch edge joins them;
- **region statistics** (K, 7): the mean of the region's patch centres (3), its share of the
  patches (1; the reference divides by 512, the patch count of every released pack) and the extent
  ``max - min`` of its centres (3).

Two keys may be absent, as in the family's generated fixture: without ``patch_adj_edges`` the patch
graph is rebuilt from ``patch_xyz`` by the generator's rule above; without ``patch_feat`` and
``cls_feat`` the backend runs the checkpoint's own Point-BERT on the cloud around the pack's centres
(which is how the generator made them: the frozen encoder of the same checkpoint lineage). A pack
that is missing, unreadable or malformed fails its sample (``CloudInputError`` kinds
``pack_missing``, ``pack_unreadable``, ``pack_invalid``), one line naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.tasks.partverse.pointllm_cloud import CloudInputError

STATS_DIM = 7
# the generator's patch graph: k nearest centres, then a distance gate at this percentile of their distances
GRAPH_NEIGHBOURS = 12
GRAPH_GATE_PERCENTILE = 75.0


@dataclass(frozen=True, slots=True)
class PartPack:
    path: str
    group_ids: np.ndarray  # (P,) int64 in 0..K-1
    patch_xyz: np.ndarray  # (P, 3) float32
    adjacency: np.ndarray  # (K, K) float32, 0/1, symmetric, zero diagonal
    stats: np.ndarray  # (K, 7) float32
    patch_feat: np.ndarray | None  # (P, D) float32, or None: computed from the cloud
    cls_feat: np.ndarray | None  # (D,) float32

    @property
    def has_features(self) -> bool:
        return self.patch_feat is not None and self.cls_feat is not None


def patch_graph_edges(patch_xyz: np.ndarray, neighbours: int = GRAPH_NEIGHBOURS,
                      percentile: float = GRAPH_GATE_PERCENTILE) -> np.ndarray:
    """(E, 2) directed edges of the generator's gated kNN patch graph (both directions listed). Up to
    rounding at the gate: the generator takes the percentile of scikit-learn's neighbour distances."""
    xyz = patch_xyz.astype(np.float32)
    n = len(xyz)
    k = min(neighbours, n - 1)
    if k <= 0:
        return np.zeros((0, 2), dtype=np.int64)
    # the gate compares float32 norms of the stored centres, as the generator's np.linalg.norm does
    dist32 = np.linalg.norm(xyz[:, None, :] - xyz[None, :, :], axis=-1)
    dist = dist32.astype(np.float64)
    np.fill_diagonal(dist, np.inf)  # include_self=False
    nearest = np.argsort(dist, axis=1, kind="stable")[:, :k]
    knn = np.zeros((n, n), dtype=bool)
    knn[np.arange(n)[:, None], nearest] = True
    tau = np.percentile(dist[np.arange(n)[:, None], nearest], percentile)
    gated = (knn | knn.T) & (dist32 <= tau)
    np.fill_diagonal(gated, False)
    return np.argwhere(gated)


def region_adjacency(group_ids: np.ndarray, edges: np.ndarray, num_groups: int) -> np.ndarray:
    adj = np.zeros((num_groups, num_groups), dtype=np.float32)
    a, b = group_ids[edges[:, 0]], group_ids[edges[:, 1]]
    cross = a != b
    adj[a[cross], b[cross]] = 1.0
    adj[b[cross], a[cross]] = 1.0
    return adj


def region_stats(group_ids: np.ndarray, patch_xyz: np.ndarray, num_groups: int) -> np.ndarray:
    stats = np.zeros((num_groups, STATS_DIM), dtype=np.float32)
    xyz = patch_xyz.astype(np.float32)
    for g in range(num_groups):
        pts = xyz[group_ids == g]
        stats[g, 3] = len(pts) / len(group_ids)
        if len(pts):
            stats[g, 0:3] = pts.mean(axis=0)
            stats[g, 4:7] = pts.max(axis=0) - pts.min(axis=0)
    return stats


def read_pack(path: str | Path, num_groups: int, num_patches: int, feature_dim: int) -> PartPack:
    """The pack at ``path`` checked against the model (K regions, P patches, D-wide features)."""
    path = Path(path)
    if not path.is_file():
        raise CloudInputError("pack_missing", f"partition pack {path} not found")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: np.asarray(npz[k]) for k in npz.files}
    except (OSError, ValueError, EOFError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CloudInputError("pack_unreadable", f"partition pack {path}: not an .npz archive ({first})") from None

    def invalid(why: str) -> CloudInputError:
        return CloudInputError("pack_invalid", f"partition pack {path}: {why}")

    if f"patch_r{num_groups}" in arrays:
        groups = arrays[f"patch_r{num_groups}"]
    elif "patch_r64" in arrays and f"map64_to_{num_groups}" in arrays:
        table, fine = arrays[f"map64_to_{num_groups}"], arrays["patch_r64"]
        if table.ndim != 1 or fine.ndim != 1 or fine.dtype.kind not in "iu" or fine.size == 0 \
                or fine.min() < 0 or fine.max() >= len(table):
            raise invalid(f"patch_r64 does not index map64_to_{num_groups}")
        groups = table[fine]
    else:
        raise invalid(f"no region labels for K={num_groups} (patch_r{num_groups}, or patch_r64 with "
                      f"map64_to_{num_groups})")
    if groups.ndim != 1 or groups.dtype.kind not in "iu":
        raise invalid(f"region labels of shape {groups.shape} and dtype {groups.dtype}, not (P,) integers")
    if len(groups) != num_patches:
        raise invalid(f"{len(groups)} patches; the checkpoint's Point-BERT has {num_patches}")
    groups = groups.astype(np.int64)
    if groups.min() < 0 or groups.max() >= num_groups:
        raise invalid(f"region labels span {groups.min()}..{groups.max()}, outside 0..{num_groups - 1}")
    empty = [g for g in range(num_groups) if not (groups == g).any()]
    if empty:
        raise invalid(f"region(s) {', '.join(map(str, empty))} hold no patch (every one of the {num_groups} "
                      "regions needs one)")
    xyz = arrays.get("patch_xyz")
    if xyz is None or xyz.shape != (num_patches, 3) or xyz.dtype.kind != "f" or not np.isfinite(xyz).all():
        raise invalid(f"patch_xyz must be ({num_patches}, 3) finite floats"
                      + (f", got {xyz.shape} {xyz.dtype}" if xyz is not None else ", absent"))
    xyz = xyz.astype(np.float32)
    edges = arrays.get("patch_adj_edges")
    if edges is None:
        edges = patch_graph_edges(xyz)
    elif edges.ndim != 2 or edges.shape[1] != 2 or edges.dtype.kind not in "iu" \
            or (edges.size and (edges.min() < 0 or edges.max() >= num_patches)):
        raise invalid(f"patch_adj_edges must be (E, 2) patch indices in 0..{num_patches - 1}")
    patch_feat, cls_feat = arrays.get("patch_feat"), arrays.get("cls_feat")
    if patch_feat is not None and cls_feat is not None:
        if patch_feat.shape != (num_patches, feature_dim) or cls_feat.shape != (feature_dim,):
            raise invalid(f"patch_feat {patch_feat.shape} / cls_feat {cls_feat.shape}; the checkpoint's Point-BERT "
                          f"gives ({num_patches}, {feature_dim}) / ({feature_dim},)")
        if not (np.isfinite(patch_feat).all() and np.isfinite(cls_feat).all()):
            raise invalid("patch_feat or cls_feat holds NaN or infinity")
        patch_feat, cls_feat = patch_feat.astype(np.float32), cls_feat.astype(np.float32)
    else:  # one without the other: both are recomputed, so cls and patches come from one encoder pass
        patch_feat = cls_feat = None
    edges = edges.astype(np.int64)
    return PartPack(str(path), groups, xyz, region_adjacency(groups, edges, num_groups),
                    region_stats(groups, xyz, num_groups), patch_feat, cls_feat)
