"""Reading a ``points`` part for PointLLM: the .npy checked, then PointLLM's ``pc_norm``.

PointLLM reads ``<object_id>_8192.npy`` (float (N, 6): xyz, then rgb in 0..1), centres xyz on its
centroid and scales it into the unit ball (``pc_norm``); rgb passes through unchanged. Anything
else is refused here with a kind of its own, so a bad file fails its sample, never the run:

- ``points_missing``: no file; ``points_unreadable``: not a plain .npy array (pickles are refused);
- ``points_shape``: not (N, 6) (or (N, 3) for a model without colour), or fewer points than the
  backbone groups (it needs at least ``num_group`` and ``group_size``);
- ``points_nonfinite``: NaN or infinity; ``points_colour``: rgb outside 0..1 (0..255 colours would
  reach the encoder 255 times too large); ``points_degenerate``: every point at one place.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

_COLOUR_SLACK = 1e-3  # rounding in files written from 8-bit colours


class CloudInputError(ValueError):
    """A points part PointLLM cannot take; ``kind`` is the sample's error kind."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def read_cloud(path: str | Path, use_color: bool, min_points: int) -> np.ndarray:
    """The (N, 6) or (N, 3) float32 cloud at ``path``, validated and normalised as PointLLM does."""
    path = Path(path)
    if not path.is_file():
        raise CloudInputError("points_missing", f"point cloud {path} not found")
    try:
        cloud = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CloudInputError("points_unreadable", f"point cloud {path}: not a .npy array ({first})") from None
    if not isinstance(cloud, np.ndarray) or cloud.dtype.kind not in "fiu":
        raise CloudInputError("points_unreadable", f"point cloud {path}: not a numeric array "
                                                   f"(dtype {getattr(cloud, 'dtype', type(cloud).__name__)})")
    columns = (6,) if use_color else (3, 6)
    want = "(N, 6) xyz+rgb" if use_color else "(N, 3) xyz or (N, 6) xyz+rgb"
    if cloud.ndim != 2 or cloud.shape[1] not in columns:
        raise CloudInputError("points_shape", f"point cloud {path}: expected an {want} array, got shape {cloud.shape}")
    if len(cloud) < min_points:
        raise CloudInputError("points_shape", f"point cloud {path}: {len(cloud)} points; the point encoder "
                                              f"needs at least {min_points}")
    cloud = cloud.astype(np.float64)
    if not np.isfinite(cloud).all():
        bad = int((~np.isfinite(cloud)).any(axis=1).sum())
        raise CloudInputError("points_nonfinite", f"point cloud {path}: {bad} point(s) hold NaN or infinity")
    if cloud.shape[1] == 6:
        lo, hi = float(cloud[:, 3:].min()), float(cloud[:, 3:].max())
        if lo < -_COLOUR_SLACK or hi > 1 + _COLOUR_SLACK:
            raise CloudInputError("points_colour", f"point cloud {path}: rgb spans {lo:g}..{hi:g}; PointLLM "
                                                   "takes colours in 0..1")
    if not use_color:
        cloud = cloud[:, :3]  # as PointLLM without colour: the rgb columns are dropped
    return pc_norm(cloud, path).astype(np.float32)


def pc_norm(cloud: np.ndarray, where: str | Path = "point cloud") -> np.ndarray:
    """PointLLM's ``pc_norm``: xyz minus its centroid, divided by the largest distance from it."""
    xyz = cloud[:, :3] - cloud[:, :3].mean(axis=0)
    scale = float(np.sqrt((xyz**2).sum(axis=1)).max())
    if not scale > 0:  # the reference would divide by zero and feed NaNs to the model
        raise CloudInputError("points_degenerate", f"point cloud {where}: every point is at the same place")
    return np.concatenate([xyz / scale, cloud[:, 3:]], axis=1)
