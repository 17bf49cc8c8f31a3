"""3DSPA realism score of one video's tracks: reconstruct held-out query tracks, measure them.

[Inferred, to be confirmed against the paper's code] The per-video score is the TAPVid-3D Average
Jaccard of the query-track reconstruction (higher = more realistic), as in TRAJAN; the plain
reconstruction error is reported alongside (lower = more realistic). Support/query split: 2048 /
512 tracks as the paper, drawn with a fixed seed so a video's score is deterministic; with fewer
tracks, 20% are queries. Several draws can be averaged (``draws``) to reduce split noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.tasks.spa3d.metrics import tapvid3d_metrics
from harness.tasks.spa3d.sampling import QUERY, SUPPORT, Normaliser, arrays_for, split_support_query, to_batch
from harness.tasks.spa3d.tracks import Tracks, load_tracks, resample_frames

VIDEO_SUFFIXES = (".mp4", ".webm", ".avi", ".mov", ".mkv", ".gif")


@dataclass
class RealismScorer:
    """Wraps a trained autoencoder; ``score_tracks`` / ``score_path`` return the metrics dict."""

    model: object
    seed: int = 0
    draws: int = 1
    support: int = SUPPORT
    query: int = QUERY

    @staticmethod
    def from_checkpoint(path: str | Path, **kw) -> RealismScorer:
        from harness.tasks.spa3d.train import load_model

        return RealismScorer(load_model(path), **kw)

    def reconstruct(self, tracks: Tracks, rng: np.random.Generator) -> tuple[np.ndarray, dict[str, float]]:
        import torch

        cfg = self.model.cfg
        if tracks.feature_dim != cfg.feature_dim:
            raise ValueError(
                f"tracks have {tracks.feature_dim} feature channels, the checkpoint expects {cfg.feature_dim}")
        s, q = split_support_query(tracks, rng, self.support, self.query)
        norm = Normaliser.fit(tracks.subset(s))
        support, query, _ = to_batch([arrays_for(tracks, norm, s, q)])
        with torch.no_grad():
            pos, logits = self.model(support, query)
        pred = norm.invert(pos[0].numpy())
        pred_vis = logits[0].numpy() > 0
        metrics = tapvid3d_metrics(tracks.tracks_3d[q], tracks.visible[q], pred, pred_vis,
                                   query["frame"][0].numpy(), tracks.camera())
        return q, metrics

    def score_tracks(self, tracks: Tracks) -> dict[str, float]:
        tracks = resample_frames(tracks, self.model.cfg.num_frames)
        rng = np.random.default_rng(self.seed)
        runs = [self.reconstruct(tracks, rng)[1] for _ in range(self.draws)]
        out = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
        out["realism"] = out["average_jaccard"]
        return out

    def score_path(self, path: str | Path, **extract_options) -> dict[str, float]:
        """A ``.npz`` track file, or a video (tracks extracted; a precomputed ``<video>.npz`` /
        ``<stem>.npz`` next to it is used first)."""
        path = Path(path)
        if path.suffix.lower() == ".npz":
            return self.score_tracks(load_tracks(path))
        for candidate in (path.with_name(path.name + ".npz"), path.with_suffix(".npz")):
            if candidate.exists():
                return self.score_tracks(load_tracks(candidate))
        if not path.exists():
            raise FileNotFoundError(f"{path}: not found (nor precomputed tracks {path.name}.npz / {path.stem}.npz)")
        if path.suffix.lower() not in VIDEO_SUFFIXES:
            raise ValueError(f"{path}: expected a .npz track file or a video ({', '.join(VIDEO_SUFFIXES)})")
        from harness.tasks.spa3d.extract import extract_tracks

        return self.score_tracks(extract_tracks(path, **extract_options))


def output_media_paths(output) -> list[str]:
    """Video / track file paths in a model Output: ``prediction`` as a path, a list of paths, a
    ``{"path": ...}`` / ``{"video": ...}`` dict, or a Part-like dict with ``type`` video/points."""
    pred = output.prediction
    items = pred if isinstance(pred, list) else [pred]
    paths = []
    for item in items:
        if isinstance(item, str):
            paths.append(item)
        elif isinstance(item, dict):
            value = item.get("path") or item.get("video")
            if isinstance(value, str):
                paths.append(value)
    return paths


def score_video_output(output, scorer: RealismScorer):
    """A ``Score`` with 3DSPA realism for the video(s) another task's model generated (mean over
    videos); unscored, with the reason, when there is no video or it cannot be tracked."""
    from harness.types import Score

    paths = output_media_paths(output)
    if not paths:
        return Score.not_scored("no generated video in the output's prediction")
    try:
        results = [scorer.score_path(p) for p in paths]
    except Exception as exc:  # the reason is recorded per sample, never fatal
        return Score.not_scored(f"3DSPA: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    keys = ("realism", "error", "occlusion_accuracy")
    values = {f"spa3d_{k}": float(np.mean([r[k] for r in results])) for k in keys}
    explanation = f"3DSPA realism (AJ) {values['spa3d_realism']:.4f} over {len(paths)} video(s)"
    return Score(values=values, explanation=explanation)
