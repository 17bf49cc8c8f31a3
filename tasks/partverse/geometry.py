"""Geometric IoU of C2S slot sets over the K=16 partition pack, as 3D-PLOT-LLM's inference script
(``pointllm/eval/eval_partverse_caption2slots.py``) reports next to Jaccard/EM.

A pack ``<oid>.pack.npz`` holds ``patch_xyz`` (512 Point-BERT patch centres, in the normalised
cloud's frame) and ``patch_r16`` (region id 0..15 of each patch). Slot ``<part_n>`` is region
``n - part_index_base``; ids outside 0..K-1 are dropped. Only queries with a non-empty gold set
get the two values:

- ``patch_iou``: IoU of the patch masks (patches whose region is in the set), over 512 patches;
- ``point_iou``: IoU of the point masks, each point taking the region of its primary patch --
  the reference's default ``pointbert_group`` lift: patch g claims its ``group_size`` (32) nearest
  points; a point's primary patch is the claiming patch with the nearest centre, or its nearest
  centre when no patch claims it.
An empty union scores 0, as in the reference.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

import numpy as np

from harness.tasks.partverse.points import load_cloud, normalise

GROUP_SIZE = 32


def masks_iou(a: np.ndarray, b: np.ndarray) -> float:
    union = int(np.logical_or(a, b).sum())
    return 0.0 if union == 0 else int(np.logical_and(a, b).sum()) / union


def region_ids(slot_ids: Iterable[int], part_index_base: int, k: int) -> set[int]:
    return {s - part_index_base for s in slot_ids if 0 <= s - part_index_base < k}


def point_regions(xyz: np.ndarray, patch_xyz: np.ndarray, patch_region: np.ndarray,
                  group_size: int = GROUP_SIZE) -> np.ndarray:
    """Region id per point by the pointbert_group lift (see the module docstring)."""
    # squared distances (points, patches), axis by axis: the reference's sum over the last axis
    # without its (points, patches, 3) temporary
    d2 = (xyz[:, None, 0] - patch_xyz[None, :, 0]) ** 2
    d2 += (xyz[:, None, 1] - patch_xyz[None, :, 1]) ** 2
    d2 += (xyz[:, None, 2] - patch_xyz[None, :, 2]) ** 2
    k_nn = min(group_size, len(xyz))
    claimed = np.zeros_like(d2, dtype=bool)
    nearest_points = np.argpartition(d2, k_nn - 1, axis=0)[:k_nn]  # (k_nn, patches)
    claimed[nearest_points, np.arange(d2.shape[1])[None, :]] = True
    primary = np.where(claimed, d2, np.inf).argmin(1)
    unclaimed = ~claimed.any(1)
    primary[unclaimed] = d2[unclaimed].argmin(1)
    return patch_region[primary]


@lru_cache(maxsize=8)  # an object is asked about several parts: lift its points once
def _object_regions(cloud_path: str, pack_path: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(region per patch, region per point) of one object."""
    with np.load(pack_path) as pack:
        patch_region = np.asarray(pack[f"patch_r{k}"], dtype=np.int64)
        patch_xyz = np.asarray(pack["patch_xyz"], dtype=np.float32)
    if patch_xyz.ndim != 2 or patch_xyz.shape[1] != 3 or len(patch_xyz) != len(patch_region):
        raise ValueError(f"patch_xyz {patch_xyz.shape} and patch_r{k} {patch_region.shape} do not match")
    xyz = normalise(load_cloud(cloud_path)[:, :3])  # float32, as the reference's pc_norm on the .npy
    return patch_region, point_regions(xyz, patch_xyz, patch_region)


def geometric_iou(cloud_path: str | Path, pack_path: str | Path, gold_slots: set[int], pred_slots: set[int],
                  part_index_base: int = 0, k: int = 16) -> dict[str, float]:
    """{"patch_iou", "point_iou"} for one query; {} when the gold set is empty."""
    gold = region_ids(gold_slots, part_index_base, k)
    pred = region_ids(pred_slots, part_index_base, k)
    if not gold:
        return {}
    patch_region, regions = _object_regions(str(cloud_path), str(pack_path), k)
    return {"patch_iou": masks_iou(np.isin(patch_region, list(gold)), np.isin(patch_region, list(pred))),
            "point_iou": masks_iou(np.isin(regions, list(gold)), np.isin(regions, list(pred)))}
