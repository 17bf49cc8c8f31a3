"""Training loop for the track autoencoder, with checkpoints (resumable) and a loss history."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.tasks.spa3d.autoencoder import POSITION_WEIGHT, VISIBILITY_WEIGHT, AutoencoderConfig
from harness.tasks.spa3d.calibration import Calibration, fit_calibration
from harness.tasks.spa3d.sampling import Normaliser, arrays_for, sample_with_replacement, split_support_query, to_batch
from harness.tasks.spa3d.tracks import Tracks, resample_frames

ADAM_EPS = 1e-16
CALIBRATION_FRACTION = 0.2  # of the realistic videos, held out of training to calibrate the score


@dataclass
class TrainConfig:
    steps: int = 1500
    batch_size: int = 8
    support: int = 96  # tracks per training video (the paper: 2048 support / 512 query)
    query: int = 32
    lr: float = 1e-3
    seed: int = 0
    checkpoint_every: int = 100
    max_seconds: float | None = None  # stop early (and checkpoint) after this long
    position_weight: float = POSITION_WEIGHT
    visibility_weight: float = VISIBILITY_WEIGHT
    model: AutoencoderConfig = field(default_factory=AutoencoderConfig)


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """Cosine decay from cfg.lr to 10% of it over cfg.steps (our choice; resumed runs continue it)."""
    return cfg.lr * (0.1 + 0.45 * (1 + np.cos(np.pi * min(step, cfg.steps) / max(cfg.steps, 1))))


def _video_batch(videos: Sequence[Tracks], cfg: TrainConfig, rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    items = []
    for i in rng.integers(0, len(videos), size=cfg.batch_size):
        video = videos[int(i)]
        s, q = split_support_query(video, rng, support=10**9, query=10**9, query_fraction=0.25)
        s = sample_with_replacement(s, cfg.support, rng)
        q = sample_with_replacement(q, cfg.query, rng)
        # the normaliser is fitted on support points only: nothing about the queries leaks in
        items.append(arrays_for(video, Normaliser.fit(video.subset(s)), s, q))
    return items


def save_checkpoint(path: str | Path, model, optimiser, step: int, cfg: TrainConfig, history: list[dict],
                    calibration: Calibration | None = None) -> Path:
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"config": cfg.model.to_dict(), "state_dict": model.state_dict(),
                "optimiser": optimiser.state_dict() if optimiser is not None else None, "step": step,
                "history": history, "calibration": calibration.to_dict() if calibration else None}, tmp)
    tmp.replace(path)  # atomic: an interrupted save never leaves a broken checkpoint
    return path


def _read_checkpoint(path: str | Path) -> dict:
    import torch

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: 3DSPA checkpoint not found")
    return torch.load(path, map_location="cpu", weights_only=False)


def _model_from(state: dict):
    from harness.tasks.spa3d.autoencoder import TrackAutoencoder

    model = TrackAutoencoder(AutoencoderConfig(**state["config"]))
    model.load_state_dict(state["state_dict"])
    return model.eval()


def _calibration_from(state: dict) -> Calibration | None:
    data = state.get("calibration")
    return Calibration.from_dict(data) if data else None


def load_model(path: str | Path):
    """A trained TrackAutoencoder in eval mode, from a checkpoint written by ``train``."""
    return _model_from(_read_checkpoint(path))


def load_calibration(path: str | Path) -> Calibration | None:
    """The realistic-video calibration stored with a checkpoint (None for an uncalibrated one)."""
    return _calibration_from(_read_checkpoint(path))


def load_checkpoint(path: str | Path) -> tuple[object, Calibration | None]:
    """(model, calibration) from one read of the checkpoint."""
    state = _read_checkpoint(path)
    return _model_from(state), _calibration_from(state)


def attach_calibration(path: str | Path, calibration: Calibration) -> None:
    """Store a calibration in an existing checkpoint (atomically; the optimiser state is kept)."""
    import torch

    path = Path(path)
    state = torch.load(path, map_location="cpu", weights_only=False)
    state["calibration"] = calibration.to_dict()
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)


def split_for_calibration(videos: Sequence[Tracks], fraction: float = CALIBRATION_FRACTION,
                          seed: int = 0) -> tuple[list[Tracks], list[Tracks]]:
    """(train, calibration): a held-out ``fraction`` (at least 2 videos) calibrates the realism score
    on realistic videos the autoencoder never saw."""
    if len(videos) < 4:
        raise ValueError(f"{len(videos)} videos: need at least 4 (2 to train, 2 to calibrate)")
    n_cal = max(2, int(round(len(videos) * fraction)))
    order = np.random.default_rng(seed).permutation(len(videos))
    return [videos[i] for i in order[n_cal:]], [videos[i] for i in order[:n_cal]]


def fit_scorer(videos: Sequence[Tracks], cfg: TrainConfig, checkpoint: str | Path | None = None, log=None):
    """Train on most ``videos``, calibrate the realism score on the held-out rest, save both in the
    checkpoint; returns (RealismScorer, history)."""
    from harness.tasks.spa3d.scorer import RealismScorer

    train_videos, calibration_videos = split_for_calibration(videos, seed=cfg.seed)
    model, history = train(train_videos, cfg, checkpoint=checkpoint, log=log)
    scorer = RealismScorer(model, seed=cfg.seed)
    scorer.calibration = fit_calibration([scorer.score_tracks(v) for v in calibration_videos])
    if checkpoint is not None:
        attach_calibration(checkpoint, scorer.calibration)
    if log is not None:
        log(f"calibrated on {len(calibration_videos)} held-out realistic videos: {scorer.calibration}")
    return scorer, history


def train(videos: Sequence[Tracks], cfg: TrainConfig, checkpoint: str | Path | None = None,
          resume: bool = True, log=None) -> tuple[object, list[dict]]:
    """Train on realistic videos; returns (model, history). Resumes from ``checkpoint`` if it exists."""
    import torch

    from harness.tasks.spa3d.autoencoder import TrackAutoencoder, paper_loss

    if not videos:
        raise ValueError("no training videos")
    videos = [resample_frames(v, cfg.model.num_frames) for v in videos]
    dims = {v.feature_dim for v in videos}
    if dims != {cfg.model.feature_dim}:
        raise ValueError(f"training videos have feature dims {sorted(dims)}, model expects {cfg.model.feature_dim}")
    torch.manual_seed(cfg.seed)
    model = TrackAutoencoder(cfg.model)
    # Adam's default eps (1e-8) would swamp the gradients of the paper's 1e-8-weighted visibility
    # term, so visibility would never be learnt; a tiny eps keeps Adam scale-free for that head
    optimiser = torch.optim.Adam(model.parameters(), lr=cfg.lr, eps=ADAM_EPS)
    step, history = 0, []
    if checkpoint is not None and resume and Path(checkpoint).exists():
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)
        model.load_state_dict(state["state_dict"])
        if state.get("optimiser"):
            optimiser.load_state_dict(state["optimiser"])
        step, history = int(state["step"]), list(state["history"])
    rng = np.random.default_rng(cfg.seed + step)  # a resumed run draws fresh batches
    model.train()
    started = time.perf_counter()
    while step < cfg.steps:
        for group in optimiser.param_groups:
            group["lr"] = learning_rate(cfg, step)
        support, query, target = to_batch(_video_batch(videos, cfg, rng))
        pred_pos, vis_logits = model(support, query)
        loss, parts = paper_loss(pred_pos, vis_logits, target["pos"], target["vis"], cfg.position_weight,
                                 cfg.visibility_weight)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        step += 1
        history.append({"step": step, **parts})
        if log is not None and step % 50 == 0:
            log(f"step {step}: l1={parts['l1']:.4f} bce={parts['bce']:.3f}")
        out_of_time = cfg.max_seconds is not None and time.perf_counter() - started > cfg.max_seconds
        if checkpoint is not None and (step % cfg.checkpoint_every == 0 or step == cfg.steps or out_of_time):
            save_checkpoint(checkpoint, model, optimiser, step, cfg, history)
        if out_of_time:
            break
    model.eval()
    return model, history
