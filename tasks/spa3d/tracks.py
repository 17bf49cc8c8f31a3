"""The canonical 3DSPA input: precomputed 3D point tracks in an ``.npz`` file.

Required arrays: ``tracks_3d`` [N, T, 3] (camera coordinates, z = depth) and ``visible`` [N, T]
(bool, or [N, T, 1] as the paper's training records store it). Optional: ``intrinsics`` [4]
(fx, fy, cx, cy; default the paper's lift for a 256x256 frame) and per-point features, any of
``features`` / ``dino_features`` / ``depth_features`` as [N, T, F] or [N, F] (constant over time).
Features present are concatenated in that fixed order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

FEATURE_KEYS = ("features", "dino_features", "depth_features")
DEFAULT_SIZE = 256


class TrackFileError(ValueError):
    """A track file that cannot be used: the message names the file and the field."""


def default_intrinsics(height: int = DEFAULT_SIZE, width: int = DEFAULT_SIZE) -> np.ndarray:
    """3DSPA's lift: fx = fy = max(H, W), cx = W/2, cy = H/2."""
    f = float(max(height, width))
    return np.array([f, f, width / 2.0, height / 2.0], dtype=np.float32)


@dataclass
class Tracks:
    tracks_3d: np.ndarray  # [N, T, 3] float32
    visible: np.ndarray  # [N, T] bool
    features: np.ndarray | None = None  # [N, T, F] float32
    intrinsics: np.ndarray | None = None  # [4]

    @property
    def num_points(self) -> int:
        return int(self.tracks_3d.shape[0])

    @property
    def num_frames(self) -> int:
        return int(self.tracks_3d.shape[1])

    @property
    def feature_dim(self) -> int:
        return 0 if self.features is None else int(self.features.shape[-1])

    def camera(self) -> np.ndarray:
        return self.intrinsics if self.intrinsics is not None else default_intrinsics()

    def subset(self, idx: np.ndarray) -> Tracks:
        feats = None if self.features is None else self.features[idx]
        return Tracks(self.tracks_3d[idx], self.visible[idx], feats, self.intrinsics)


def validate(tracks: Tracks, where: str = "tracks") -> Tracks:
    """Check shapes and values; return a normalised copy (float32 / bool / [N,T,F])."""
    pos = np.asarray(tracks.tracks_3d)
    if pos.ndim != 3 or pos.shape[-1] != 3:
        raise TrackFileError(f"{where}: field 'tracks_3d' should have shape [N, T, 3], got {list(pos.shape)}")
    n, t = pos.shape[:2]
    if n < 2 or t < 2:
        raise TrackFileError(f"{where}: field 'tracks_3d' needs at least 2 points and 2 frames, got {list(pos.shape)}")
    vis = np.asarray(tracks.visible)
    if vis.ndim == 3 and vis.shape[-1] == 1:
        vis = vis[..., 0]
    if vis.shape != (n, t):
        raise TrackFileError(f"{where}: field 'visible' should have shape [{n}, {t}], got {list(vis.shape)}")
    vis = vis.astype(bool)
    pos = pos.astype(np.float32)
    if not np.isfinite(pos[vis]).all():
        raise TrackFileError(f"{where}: field 'tracks_3d' has non-finite values at visible points")
    if not vis.any():
        raise TrackFileError(f"{where}: field 'visible' marks no point visible in any frame")
    pos = np.where(vis[..., None], pos, np.nan_to_num(pos))  # occluded positions are never read
    feats = tracks.features
    if feats is not None:
        feats = np.asarray(feats, dtype=np.float32)
        if feats.ndim == 2 and feats.shape[0] == n:
            feats = np.repeat(feats[:, None, :], t, axis=1)
        if feats.ndim != 3 or feats.shape[:2] != (n, t):
            raise TrackFileError(
                f"{where}: features should have shape [{n}, {t}, F] or [{n}, F], got {list(feats.shape)}")
        feats = np.nan_to_num(feats)
    intr = tracks.intrinsics
    if intr is not None:
        intr = np.asarray(intr, dtype=np.float32).reshape(-1)
        if intr.shape != (4,) or not np.all(intr[:2] > 0):
            raise TrackFileError(f"{where}: field 'intrinsics' should be [fx, fy, cx, cy] with fx, fy > 0")
    return Tracks(pos, vis, feats, intr)


def load_tracks(path: str | Path) -> Tracks:
    path = Path(path)
    if not path.exists():
        raise TrackFileError(f"{path}: file not found")
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as exc:  # zipfile / pickle errors: say what the file is not
        raise TrackFileError(f"{path}: not a readable .npz file ({type(exc).__name__}: {exc})") from None
    with data:
        for key in ("tracks_3d", "visible"):
            if key not in data.files:
                raise TrackFileError(f"{path}: missing field {key!r} (fields: {', '.join(data.files) or 'none'})")
        feats = [np.asarray(data[k], dtype=np.float32) for k in FEATURE_KEYS if k in data.files]
        n, t = data["tracks_3d"].shape[:2] if data["tracks_3d"].ndim == 3 else (0, 0)
        feats = [np.repeat(f[:, None], t, axis=1) if f.ndim == 2 and f.shape[0] == n else f for f in feats]
        if feats and len({f.shape[:2] for f in feats}) > 1:
            raise TrackFileError(f"{path}: feature arrays disagree on [N, T]: {[list(f.shape) for f in feats]}")
        features = np.concatenate(feats, axis=-1) if feats else None
        intr = data["intrinsics"] if "intrinsics" in data.files else None
        return validate(Tracks(data["tracks_3d"], data["visible"], features, intr), str(path))


def save_tracks(path: str | Path, tracks: Tracks, **extra: np.ndarray) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {"tracks_3d": tracks.tracks_3d.astype(np.float32), "visible": tracks.visible.astype(bool), **extra}
    if tracks.features is not None:
        arrays["features"] = tracks.features.astype(np.float32)
    if tracks.intrinsics is not None:
        arrays["intrinsics"] = np.asarray(tracks.intrinsics, dtype=np.float32)
    np.savez_compressed(path, **arrays)  # type: ignore[arg-type]  # stubs match **arrays against allow_pickle
    return path


def resample_frames(tracks: Tracks, num_frames: int) -> Tracks:
    """Nearest-frame temporal resampling to the model's fixed clip length (a choice: the paper
    uses 150-frame clips; we keep whole videos and sample frames uniformly)."""
    t = tracks.num_frames
    if t == num_frames:
        return tracks
    idx = np.round(np.linspace(0, t - 1, num_frames)).astype(int)
    feats = None if tracks.features is None else tracks.features[:, idx]
    return Tracks(tracks.tracks_3d[:, idx], tracks.visible[:, idx], feats, tracks.intrinsics)
