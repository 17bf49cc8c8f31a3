"""``spa3d:`` backend: the 3DSPA realism scorer as a model (fit-then-predict or a checkpoint).

- ``spa3d:fit`` trains the track autoencoder on the task's train split (realistic ``.npz`` tracks)
  once before scoring, holding a fifth of them out to calibrate the realism score;
  ``-M steps=...`` / ``seed=`` / ``folds=`` / ``checkpoint=PATH`` (save, resumable) / ``cache=`` tune it.
  Without ``checkpoint`` the fit (weights, calibration, loss history) is cached by ``harness.fit_cache``
  under ``$HARNESS_CACHE_DIR/spa3d/fits``, keyed on the settings, the train tracks' bytes and the seed,
  and read back as tensors and plain data only; with ``checkpoint`` that file is the record (it is the
  user's artefact, resumed by its path), so nothing is cached beside it;
- ``spa3d:/path/model.pt`` loads a checkpoint written by training.
For every request it scores each media part (``points`` = ``.npz`` tracks, ``video`` = a video,
tracked first) and returns ``prediction = {"scores": [metrics dict per part]}``. A file that cannot
be read or extracted makes that request's Output carry the one-line error (never the whole run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any

from pydantic import Field

from harness import fit_cache
from harness.backend_settings import PositiveInt, Setting
from harness.model import Backend
from harness.modelspec import validate_settings
from harness.registry import model
from harness.types import Output, Request, Sample, Usage, stable_hash

FITS = "spa3d/fits"  # harness.fit_cache folder of the spa3d fits
SETTINGS = {
    "steps": Setting(PositiveInt, 1500, "spa3d:fit: training steps"),
    "seed": Setting(int, 0, "training and scoring seed"),
    "folds": Setting(PositiveInt, 5, "support/query folds a realism score averages"),
    "checkpoint": Setting(str | None, None, "spa3d:fit: save (and resume) the training here instead of the fit cache"),
    "max_seconds": Setting(Annotated[float, Field(gt=0)] | None, None, "spa3d:fit: stop training after this long"),
    "cache": Setting(bool, True, "spa3d:fit: reuse a cached fit (not with checkpoint)"),
    "batch_size": Setting(PositiveInt, 16, "requests per call"),
    "concurrency": Setting(PositiveInt, 1, "calls in flight"),
}


@dataclass
class Spa3dModel(Backend):
    path: str
    spec: str = ""
    steps: int = 1500
    seed: int = 0
    folds: int = 5
    checkpoint: str | None = None
    max_seconds: float | None = None
    cache: bool = True
    batch_size: int = 16
    cacheable: bool = False  # a fitted scorer's outputs depend on the fit, not only on the request
    modalities: frozenset[str] = field(default_factory=lambda: frozenset({"text", "points", "video"}))
    scorer: Any = None
    fit_report: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.path != "fit":
            from harness.tasks.spa3d.scorer import RealismScorer

            self.scorer = RealismScorer.from_checkpoint(self.path, seed=self.seed, folds=self.folds)

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        if self.path != "fit":
            return {"fitted": False, "reason": "checkpoint given"}
        from harness.tasks.spa3d.tracks import load_tracks
        from harness.tasks.spa3d.train import TrainConfig, fit_scorer

        paths = [p.path for s in train for m in s.messages for p in m.content if p.type == "points" and p.path]
        videos = [load_tracks(path) for path in paths]
        if not videos:
            raise ValueError("spa3d:fit needs a train split of .npz track files")
        cfg = TrainConfig(steps=self.steps, seed=self.seed, max_seconds=self.max_seconds)
        cfg.model.feature_dim = videos[0].feature_dim
        use_cache = self.checkpoint is None and self.cache
        key = fit_cache.fit_key(backend="spa3d:fit", settings=asdict(cfg), task_hash=fit_cache.samples_hash(train),
                                train=stable_hash(paths), seed=cfg.seed, extra={"v": 1})
        loaded = fit_cache.load(key, kind="fit", folder=FITS, restore=lambda state: _restore(state, cfg)
                                ) if use_cache else None
        if loaded is None:
            # most videos train the autoencoder; a held-out fifth calibrates the realism score
            self.scorer, history = fit_scorer(videos, cfg, checkpoint=self.checkpoint)
            if use_cache:
                fit_cache.save(key, {"config": cfg.model.to_dict(), "state_dict": self.scorer.model.state_dict(),
                                     "calibration": self.scorer.calibration.to_dict(), "history": history},
                               kind="fit", folder=FITS, format="torch")
        else:
            self.scorer, history = loaded
        self.scorer.folds = self.folds
        self.fit_report = {"fitted": True, "videos": len(videos), "steps": len(history),
                           "calibration_videos": self.scorer.calibration.videos,
                           "final_l1": history[-1]["l1"] if history else None, "cached": loaded is not None}
        return self.fit_report

    def _score_request(self, request: Request) -> Output:
        parts = [p for m in request.messages if m.role == "user" for p in m.content if p.type in ("points", "video")]
        if not parts:
            return Output(error="no track file or video in the request")
        scores = []
        for part in parts:
            try:
                scores.append(self.scorer.score_path(part.path))
            except Exception as exc:  # recorded per sample: unreadable file, missing extractor, ...
                msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                return Output(error=f"{type(exc).__name__}: {msg}")
        text = " ".join(f"{s['realism']:.4f}" for s in scores)
        return Output(text=text, prediction={"scores": scores}, usage=Usage(calls=1))

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        if self.scorer is None:
            raise RuntimeError("spa3d:fit was not fitted (the task has no train split)")
        import asyncio

        return await asyncio.to_thread(lambda: [self._score_request(r) for r in requests])


def _restore(state: dict[str, Any], cfg: Any) -> tuple[Any, list[dict[str, Any]]]:
    """(RealismScorer, loss history) from a cached fit, checked as a checkpoint is (config, every
    tensor's shape, the calibration); raises CheckpointError or ValueError otherwise: a cache miss."""
    from pathlib import Path

    from harness.tasks.spa3d.scorer import RealismScorer
    from harness.tasks.spa3d.train import _calibration_from, _config_from, _model_from

    where = Path("fit cache")
    history = state["history"]
    if _config_from(state, where) != cfg.model or not isinstance(history, list) or not all(
            isinstance(h, dict) for h in history):
        raise ValueError("not a fit of this model config")
    calibration = _calibration_from(state, where)
    if calibration is None:
        raise ValueError("no calibration")
    return RealismScorer(_model_from(state, where), seed=cfg.seed, calibration=calibration), history


@model("spa3d", kind="method",
       description="3DSPA realism scorer: spa3d:fit (train on the task's train split) or spa3d:CHECKPOINT",
       settings=SETTINGS, strict=True)
def spa3d(path: str = "fit", **settings: Any) -> Spa3dModel:
    settings = validate_settings("spa3d", settings, SETTINGS)  # a factory called directly is checked too
    # the generation keys every backend takes are the model client's (a scorer samples nothing)
    own = {k: v for k, v in settings.items() if k in SETTINGS}
    return Spa3dModel(path=path or "fit", spec=f"spa3d:{path or 'fit'}", **own)
