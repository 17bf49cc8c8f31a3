"""3DSPA realism score of one video's tracks: reconstruct held-out query tracks, measure them.

[Inferred, to be confirmed against the paper's code] Every track visible somewhere is held out as a
query exactly once: the tracks are split into folds (at least ``folds``, and enough that no fold has
more than the paper's 512 queries), each fold is reconstructed from up to 2048 of the other tracks as
support (the paper's inference sizes). Folds use a fixed seed, so a video's score is deterministic.
Holding out every track rather than one random 20% draw removes most of the split noise (measured:
pair accuracy 0.63 -> 0.73 on the same model and metric; README).

Reported per video: the query-masked TAPVid-3D metrics of the reconstruction (``metrics.py``: frames
after the query frame, no rescaling; Average Jaccard as in TRAJAN),
the plain 3D error, and two surprise channels in the model's own normalised units: mean L1 of
visible positions and mean visibility cross-entropy (the two terms of the paper's loss).
``realism`` is the calibrated surprise (``calibration.py``) when the checkpoint carries a
calibration, else the Average Jaccard (higher = more realistic either way).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from harness.tasks.spa3d.calibration import Calibration
from harness.tasks.spa3d.metrics import evaluation_mask, query_masked_metrics
from harness.tasks.spa3d.sampling import QUERY, SUPPORT, Normaliser, arrays_for, to_batch
from harness.tasks.spa3d.tracks import Tracks, load_tracks, resample_frames

if TYPE_CHECKING:
    from harness.tasks.spa3d.autoencoder import TrackAutoencoder

VIDEO_SUFFIXES = (".mp4", ".webm", ".avi", ".mov", ".mkv", ".gif")


@dataclass
class Reconstruction:
    """Every queried track of one video: prediction (input units), visibility logits, query frames,
    and the per-point L1 (normalised units, mean over xyz) used by the position surprise."""

    query: np.ndarray  # [Q] track indices
    positions: np.ndarray  # [Q, T, 3]
    visibility_logits: np.ndarray  # [Q, T]
    query_frames: np.ndarray  # [Q]
    l1_normalised: np.ndarray  # [Q, T]


@dataclass
class RealismScorer:
    """Wraps a trained autoencoder; ``score_tracks`` / ``score_path`` return the metrics dict."""

    model: object
    seed: int = 0
    folds: int = 5
    support: int = SUPPORT
    query: int = QUERY
    calibration: Calibration | None = None

    @staticmethod
    def from_checkpoint(path: str | Path, **kw) -> RealismScorer:
        from harness.tasks.spa3d.train import load_checkpoint

        model, calibration = load_checkpoint(path)
        kw.setdefault("calibration", calibration)
        return RealismScorer(model, **kw)

    def reconstruct(self, tracks: Tracks) -> Reconstruction:
        """Hold out every track visible somewhere exactly once (see the module docstring)."""
        import torch

        model = cast("TrackAutoencoder", self.model)
        cfg = model.cfg
        if tracks.feature_dim != cfg.feature_dim:
            raise ValueError(
                f"tracks have {tracks.feature_dim} feature channels, the checkpoint expects {cfg.feature_dim}")
        rng = np.random.default_rng(self.seed)
        seen = np.flatnonzero(tracks.visible.any(axis=1))
        if len(seen) < 2:
            raise ValueError(f"{len(seen)} visible track(s): nothing to reconstruct from")
        n_folds = min(len(seen), max(self.folds, -(-len(seen) // self.query)))
        parts: list[tuple] = []
        for fold in np.array_split(rng.permutation(seen), n_folds):
            q = np.sort(fold)
            rest = np.setdiff1d(np.arange(tracks.num_points), q)
            s = np.sort(rng.choice(rest, size=min(self.support, len(rest)), replace=False))
            norm = Normaliser.fit(tracks.subset(s))
            support, query, target = to_batch([arrays_for(tracks, norm, s, q)])
            with torch.no_grad():
                pos, logits = model(support, query)
            pos = pos[0].numpy()
            l1 = np.abs(pos - target["pos"][0].numpy()).mean(axis=-1)
            parts.append((q, norm.invert(pos), logits[0].numpy(), query["frame"][0].numpy(), l1))
        order = np.argsort(np.concatenate([p[0] for p in parts]))
        return Reconstruction(*(np.concatenate([p[i] for p in parts])[order] for i in range(5)))

    def score_tracks(self, tracks: Tracks) -> dict[str, float]:
        tracks = resample_frames(tracks, cast("TrackAutoencoder", self.model).cfg.num_frames)
        rec = self.reconstruct(tracks)
        gt_vis = tracks.visible[rec.query]
        out = query_masked_metrics(tracks.tracks_3d[rec.query], gt_vis, rec.positions, rec.visibility_logits > 0,
                               rec.query_frames, tracks.camera())
        evaluate = evaluation_mask(rec.query_frames, tracks.num_frames)
        visible_eval = evaluate & gt_vis
        bce = np.logaddexp(0.0, rec.visibility_logits) - gt_vis * rec.visibility_logits
        out["position_surprise"] = float(rec.l1_normalised[visible_eval].mean()) if visible_eval.any() else float("nan")
        out["visibility_surprise"] = float(bce[evaluate].mean()) if evaluate.any() else float("nan")
        if self.calibration is not None:
            out["realism"] = self.calibration.realism(out)
            out["calibrated"] = 1.0
        else:
            out["realism"] = out["average_jaccard"]
            out["calibrated"] = 0.0
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
