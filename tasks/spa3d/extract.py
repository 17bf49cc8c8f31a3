"""Video -> 3D semantic tracks, as 3DSPA's inference pipeline:

1. 2D tracks: CoTracker3 (offline) on a 64x64 grid of query points (torch.hub, local cache only);
2. depth: a video depth model (the paper: Video-Depth-Anything; here any transformers depth
   estimator given by ``depth_model``, run per frame, default Depth-Anything-V2 metric indoor small
   -- a substitution: per-frame depth lacks Video-Depth-Anything's temporal consistency);
3. lifting with the paper's intrinsics fx = fy = max(H, W), cx = W/2, cy = H/2;
4. DINOv2-base patch features sampled at each track's 2D position per frame.

Every model is loaded from local files only (no machine here reaches a model hub); when one is
missing, ``ExtractorMissing`` names all of the missing pieces in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.tasks.spa3d.tracks import Tracks, default_intrinsics, validate

COTRACKER_REPO = "facebookresearch/co-tracker"
COTRACKER_ENTRY = "cotracker3_offline"
DINO_MODEL = "facebook/dinov2-base"
DEPTH_MODEL = "depth-anything/Depth-Anything-V2-Metric-Indoor-Small-hf"
GRID_SIZE = 64


class ExtractorMissing(RuntimeError):
    """A model or library the extraction pipeline needs is not available locally."""


@dataclass
class ExtractorSpec:
    dino_model: str = DINO_MODEL
    depth_model: str = DEPTH_MODEL
    grid_size: int = GRID_SIZE
    max_frames: int = 150  # the paper's clip length


def _hub_cached(name: str) -> bool:
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(name, local_files_only=True)
        return True
    except Exception:
        return Path(name).exists()  # a local directory works too


def _cotracker_dir() -> Path:
    import torch

    owner, repo = COTRACKER_REPO.split("/")
    return Path(torch.hub.get_dir()) / f"{owner}_{repo}_main"


def missing_extractors(spec: ExtractorSpec | None = None) -> list[str]:
    """Human-readable names of what is missing (empty when extraction can run)."""
    spec = spec or ExtractorSpec()
    missing = []
    try:
        import av  # noqa: F401  (video decoding)
    except ImportError:
        missing.append("video decoder (pip package 'av')")
    if not _cotracker_dir().exists():
        missing.append(f"2D point tracker CoTracker3 (torch.hub cache {_cotracker_dir()})")
    if not _hub_cached(spec.depth_model):
        missing.append(f"depth model {spec.depth_model!r} (not in the local Hugging Face cache)")
    if not _hub_cached(spec.dino_model):
        missing.append(f"DINO features {spec.dino_model!r} (not in the local Hugging Face cache)")
    return missing


def read_video(path: str | Path, max_frames: int) -> np.ndarray:
    """RGB frames [T, H, W, 3] uint8, uniformly subsampled to at most ``max_frames``."""
    import av

    with av.open(str(path)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    if not frames:
        raise ValueError(f"{path}: no video frames decoded")
    idx = np.round(np.linspace(0, len(frames) - 1, min(max_frames, len(frames)))).astype(int)
    return np.stack([frames[i] for i in idx])


def lift_to_3d(tracks_2d: np.ndarray, depth: np.ndarray, height: int, width: int) -> np.ndarray:
    """[N, T, 2] pixel tracks (x, y) + depth maps [T, H, W] -> [N, T, 3] camera points with the
    paper's intrinsics. Depth is read at the nearest pixel (clamped to the frame)."""
    fx, fy, cx, cy = default_intrinsics(height, width)
    n, t = tracks_2d.shape[:2]
    xs = np.clip(np.round(tracks_2d[..., 0]).astype(int), 0, width - 1)
    ys = np.clip(np.round(tracks_2d[..., 1]).astype(int), 0, height - 1)
    z = depth[np.arange(t)[None, :].repeat(n, 0), ys, xs]
    x3 = (tracks_2d[..., 0] - cx) * z / fx
    y3 = (tracks_2d[..., 1] - cy) * z / fy
    return np.stack([x3, y3, z], axis=-1).astype(np.float32)


def _track_2d(frames: np.ndarray, grid: int) -> tuple[np.ndarray, np.ndarray]:
    import torch

    tracker = torch.hub.load(str(_cotracker_dir()), COTRACKER_ENTRY, source="local")
    video = torch.from_numpy(frames).permute(0, 3, 1, 2)[None].float()
    with torch.no_grad():
        pred_tracks, pred_vis = tracker(video, grid_size=grid)
    return pred_tracks[0].permute(1, 0, 2).numpy(), pred_vis[0].permute(1, 0).numpy().astype(bool)


def _depth(frames: np.ndarray, model_name: str) -> np.ndarray:
    import torch
    from transformers import AutoImageProcessor, AutoModelForDepthEstimation

    processor = AutoImageProcessor.from_pretrained(model_name, local_files_only=True)
    model = AutoModelForDepthEstimation.from_pretrained(model_name, local_files_only=True).eval()
    out = []
    with torch.no_grad():
        for frame in frames:
            pred = model(**processor(images=frame, return_tensors="pt")).predicted_depth
            pred = torch.nn.functional.interpolate(pred[:, None], size=frame.shape[:2], mode="bilinear")
            out.append(pred[0, 0].numpy())
    return np.stack(out)


def _dino(frames: np.ndarray, tracks_2d: np.ndarray, model_name: str) -> np.ndarray:
    import torch
    from transformers import AutoImageProcessor, AutoModel

    processor = AutoImageProcessor.from_pretrained(model_name, local_files_only=True)
    model = AutoModel.from_pretrained(model_name, local_files_only=True).eval()
    h, w = frames.shape[1:3]
    feats = []
    with torch.no_grad():
        for t, frame in enumerate(frames):
            inputs = processor(images=frame, return_tensors="pt", do_center_crop=False)
            hidden = model(**inputs).last_hidden_state[0, 1:]  # drop CLS
            gh, gw = inputs["pixel_values"].shape[2] // 14, inputs["pixel_values"].shape[3] // 14
            grid = hidden.reshape(gh, gw, -1).numpy()
            ys = np.clip((tracks_2d[:, t, 1] / h * gh).astype(int), 0, gh - 1)
            xs = np.clip((tracks_2d[:, t, 0] / w * gw).astype(int), 0, gw - 1)
            feats.append(grid[ys, xs])
    return np.stack(feats, axis=1).astype(np.float32)


def extract_tracks(video: str | Path, spec: ExtractorSpec | None = None, with_features: bool = True) -> Tracks:
    spec = spec or ExtractorSpec()
    missing = missing_extractors(spec)
    if not with_features:
        missing = [m for m in missing if not m.startswith("DINO")]
    if missing:
        raise ExtractorMissing(f"{video}: cannot extract 3D tracks, missing: {'; '.join(missing)}")
    frames = read_video(video, spec.max_frames)
    height, width = frames.shape[1:3]
    tracks_2d, visible = _track_2d(frames, spec.grid_size)
    depth = _depth(frames, spec.depth_model)
    tracks_3d = lift_to_3d(tracks_2d, depth, height, width)
    features = _dino(frames, tracks_2d, spec.dino_model) if with_features else None
    return validate(Tracks(tracks_3d, visible, features, default_intrinsics(height, width)), str(video))
