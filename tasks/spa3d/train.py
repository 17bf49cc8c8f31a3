"""Training loop for the track autoencoder, with checkpoints (resumable) and a loss history.

A checkpoint is read as data (``harness.safeload.load_torch``: ``torch.load(weights_only=True)``), and
checked before a model is built from it: the config's sizes must be plain bounded integers, and the model
they describe is first laid out on torch's ``meta`` device (no memory) and compared, tensor by tensor, with
the weights the file holds, so a config naming a huge model allocates nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import UserError
from harness.safeload import load_torch
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


class CheckpointError(UserError, ValueError):
    """A 3DSPA checkpoint that cannot be used: one line naming the file and the field."""


# bounds on a checkpoint's config: far above any trained model, low enough that laying the model out
# (even on the meta device) is instant
_CONFIG_LIMITS = {"num_frames": (1, 4096), "feature_dim": (0, 65536), "feature_proj": (1, 65536),
                  "width": (1, 65536), "num_latents": (1, 65536), "heads": (1, 1024), "latent_layers": (0, 256)}


def _read_checkpoint(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: 3DSPA checkpoint not found")
    state = load_torch(path)  # tensors and plain data only: a checkpoint cannot run code
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: not a 3DSPA checkpoint (a {type(state).__name__}, not a dict)")
    for key in ("config", "state_dict"):
        if not isinstance(state.get(key), dict):
            raise CheckpointError(f"{path}: not a 3DSPA checkpoint (field {key!r} is missing or not a dict)")
    return state


def _config_from(state: dict[str, Any], path: Path) -> AutoencoderConfig:
    config = state["config"]
    known = {f.name for f in fields(AutoencoderConfig)}
    unknown = sorted(str(k) for k in config if k not in known)
    if unknown:
        raise CheckpointError(f"{path}: config field {unknown[0]!r} is not a 3DSPA autoencoder setting")
    for key, value in config.items():
        low, high = _CONFIG_LIMITS.get(key, (0, 65536))
        if type(value) is not int or not low <= value <= high:
            raise CheckpointError(f"{path}: config field {key!r} must be an integer from {low} to {high}, "
                                  f"got {repr(value)[:40]}")
    return AutoencoderConfig(**config)


def _model_from(state: dict[str, Any], path: str | Path = "checkpoint"):
    import torch

    from harness.tasks.spa3d.autoencoder import TrackAutoencoder

    path = Path(path)
    cfg = _config_from(state, path)
    weights = state["state_dict"]
    try:
        with torch.device("meta"):  # the layout only: no memory, whatever sizes the config names
            expected = {k: tuple(v.shape) for k, v in TrackAutoencoder(cfg).state_dict().items()}
    except (AssertionError, ValueError, RuntimeError, ZeroDivisionError) as exc:  # e.g. heads not dividing width
        raise CheckpointError(f"{path}: config {cfg.to_dict()} does not describe a model ({exc or type(exc).__name__})"
                              ) from None
    for key, shape in expected.items():
        tensor = weights.get(key)
        if not isinstance(tensor, torch.Tensor):
            raise CheckpointError(f"{path}: state_dict has no tensor {key!r}")
        if tuple(tensor.shape) != shape or not tensor.is_floating_point():
            raise CheckpointError(f"{path}: state_dict tensor {key!r} is {tensor.dtype} {list(tensor.shape)}, "
                                  f"the config needs a float tensor of {list(shape)}")
    extra = sorted(str(k) for k in weights if k not in expected)
    if extra:
        raise CheckpointError(f"{path}: state_dict has tensor {extra[0]!r}, which the model does not have")
    model = TrackAutoencoder(cfg)
    model.load_state_dict(weights)
    return model.eval()


def _calibration_from(state: dict[str, Any], path: str | Path = "checkpoint") -> Calibration | None:
    data = state.get("calibration")
    if not data:
        return None
    try:
        mean, std, videos = (data[k] for k in ("mean", "std", "videos"))
        pairs = [[float(v) for v in pair] for pair in (mean, std)]
        ok = (all(len(p) == 2 and all(math.isfinite(v) for v in p) for p in pairs) and min(pairs[1]) > 0
              and type(videos) is int and videos >= 2)
    except (KeyError, TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise CheckpointError(f"{path}: field 'calibration' must hold 'mean' and 'std' (two finite numbers each, "
                              "std > 0) and 'videos' (an integer >= 2)")
    return Calibration.from_dict(data)


def load_model(path: str | Path):
    """A trained TrackAutoencoder in eval mode, from a checkpoint written by ``train``."""
    return _model_from(_read_checkpoint(path), path)


def load_calibration(path: str | Path) -> Calibration | None:
    """The realistic-video calibration stored with a checkpoint (None for an uncalibrated one)."""
    return _calibration_from(_read_checkpoint(path), path)


def load_checkpoint(path: str | Path) -> tuple[object, Calibration | None]:
    """(model, calibration) from one read of the checkpoint."""
    state = _read_checkpoint(path)
    return _model_from(state, path), _calibration_from(state, path)


def attach_calibration(path: str | Path, calibration: Calibration) -> None:
    """Store a calibration in an existing checkpoint (atomically; the optimiser state is kept)."""
    import torch

    path = Path(path)
    state = _read_checkpoint(path)
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
        state = _read_checkpoint(checkpoint)
        if _config_from(state, Path(checkpoint)) != cfg.model:
            raise CheckpointError(f"{checkpoint}: written for model config {state['config']}, not "
                                  f"{cfg.model.to_dict()} (resume with the same settings or write a new checkpoint)")
        try:
            model.load_state_dict(state["state_dict"])
            if state.get("optimiser"):
                optimiser.load_state_dict(state["optimiser"])
            step, history = int(state["step"]), list(state["history"])
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise CheckpointError(f"{checkpoint}: cannot resume from it ({type(exc).__name__}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    rng = np.random.default_rng(cfg.seed + step)  # a resumed run draws fresh batches
    model.train()
    started = time.perf_counter()
    while step < cfg.steps:
        for group in optimiser.param_groups:
            group["lr"] = float(learning_rate(cfg, step))  # a plain float: checkpoints hold plain data
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
