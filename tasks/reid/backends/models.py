"""``reid:VARIANT`` backends: fit on the task's train split (ground views), then embed every image.

Variants: ``baseline`` (the CNN trained on the real training images), ``vital`` (3D-VITAL: each training
image is lifted by the single-view lifting model, ``lifting.py``, the predicted mesh rendered from
elevated viewpoints, CVCF-filtered, attention supervised by VAAS; ``backends/vital.py``),
``vital-no-cvcf`` (every lifted mesh kept) and ``vital-no-vaas`` (no attention supervision).

Settings (``-M``): ``steps`` (500), ``lr`` (3e-3), ``batch_p`` (8 identities) and ``batch_k`` (4 images)
per batch, ``width`` (16 channels in the first block), ``dim`` (64), ``margin`` (0.3), ``vaas_weight`` (1),
``cvcf_tau`` (the lifting model's calibrated threshold), ``novel`` (2 views per lifted image),
``lift_figures`` (600) and ``lift_steps`` (2000) of the lifting model, ``seed`` (0), ``threads`` (1),
``cache`` (true). ``prediction`` is the image's embedding (list of floats); ``details["fit"]`` the training
record (seconds, the lifting model's held-out check, and per lift its prediction, consistency error and
whether CVCF kept it, from which the task scores the filter).
The fitted weights are cached by ``harness.fit_cache`` under ``$HARNESS_CACHE_DIR/reid/fits``, keyed on the
variant, its settings, the train samples with the bytes of every training image and view, the views
chosen and the seed, as plain data and numpy arrays read back as data only (no code runs when a cache file
is read; one that is refused, unreadable or not a fit of this network is refitted and replaced). The
lifting model's fit is cached the same way whatever ``cache`` says: it depends on nothing of the task.
"""

from __future__ import annotations

import difflib
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness import fit_cache
from harness.backend_settings import NonNegativeFloat, PositiveInt, Probability, Setting
from harness.model import Backend
from harness.modelspec import validate_settings
from harness.registry import model
from harness.types import Output, Request, Sample, Usage, stable_hash

VARIANTS = ("baseline", "vital", "vital-no-cvcf", "vital-no-vaas")
# the training keys' defaults are net.TrainConfig's (not read from it: that module imports torch)
SETTINGS = {
    "steps": Setting(PositiveInt, 500, "training steps"),
    "lr": Setting(Annotated[float, Field(gt=0)], 3e-3, "learning rate"),
    "weight_decay": Setting(NonNegativeFloat, 5e-4, "weight decay"),
    "batch_p": Setting(PositiveInt, 8, "identities per batch"),
    "batch_k": Setting(PositiveInt, 4, "images per identity in a batch"),
    "width": Setting(PositiveInt, 16, "channels of the first block"),
    "dim": Setting(PositiveInt, 64, "embedding dimension"),
    "margin": Setting(NonNegativeFloat, 0.3, "triplet margin"),
    "smoothing": Setting(Probability, 0.1, "label smoothing"),
    "vaas_weight": Setting(NonNegativeFloat, 1.0, "weight of the VAAS attention loss (baseline, vital-no-vaas: 0)"),
    "cvcf_tau": Setting(float | None, None, "CVCF threshold on the consistency error (vital variants; default: the "
                        "lifting model's, calibrated on its held-out renders)"),
    "novel": Setting(PositiveInt, 2, "novel elevated views rendered per lifted training image (vital variants)"),
    "lift_figures": Setting(Annotated[int, Field(ge=8)], 600, "figures in the lifting model's pretraining set"),
    "lift_steps": Setting(Annotated[int, Field(ge=20)], 2000, "training steps of the lifting model"),
    "seed": Setting(int, 0, "training seed"),
    "threads": Setting(PositiveInt, 1, "torch threads"),
    "cache": Setting(bool, True, "reuse a cached fit"),
}
# what goes into TrainConfig (cvcf_tau is the view filter's, cache the fit cache's)
_TRAIN = ("steps", "lr", "weight_decay", "batch_p", "batch_k", "width", "dim", "margin", "smoothing", "vaas_weight",
          "seed", "threads")
FITS = "reid/fits"  # harness.fit_cache folder of the reid fits (where they always were)


def image_path(messages: Sequence[Any]) -> str | None:
    for m in messages:
        for p in m.content:
            if p.type == "image" and p.path:
                return str(p.path)
    return None


@dataclass
class ReIDModel(Backend):
    variant: str
    settings: dict[str, Any] = field(default_factory=dict)
    spec: str = ""
    batch_size: int = 512
    cacheable: bool = False  # embeddings come from the fitted weights (cached themselves)
    modalities: frozenset[str] = frozenset({"image"})
    state: dict[str, Any] | None = None
    record: dict[str, Any] = field(default_factory=dict)
    fit_error: str | None = None

    def config(self) -> Any:
        from harness.tasks.reid.backends.net import TrainConfig

        kw: dict[str, Any] = {k: self.settings[k] for k in _TRAIN if k in self.settings}
        if self.variant in ("baseline", "vital-no-vaas"):
            kw["vaas_weight"] = 0.0
        return TrainConfig(**kw)

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        from harness.tasks.reid.blender_jobs import BlenderFailed, BlenderUnavailable

        try:
            self.record = self._fit(list(train))
        except (ValueError, OSError, BlenderUnavailable, BlenderFailed) as exc:
            # (a `!r` inside the f-string would apply to the whole conditional, quoting every message)
            reason = str(exc).splitlines()[0] if str(exc) else repr(exc)
            self.state, self.fit_error = None, f"fit failed: {reason}"
            return {"error": self.fit_error}
        return self.record

    def _fit(self, train: list[Sample]) -> dict[str, Any]:
        if not train:
            raise ValueError("empty train split")
        rows = []
        for s in train:
            path = image_path(s.messages)
            if path is None or s.metadata.get("pid") is None:
                raise ValueError(f"train sample {s.id!r} has no image or identity")
            rows.append({"path": path, "visibility": None, "pid": s.metadata["pid"]})
        record: dict[str, Any] = {"method": self.spec, "real_images": len(rows)}
        scratch: Path | None = None
        try:
            if self.variant != "baseline":
                views, vrec, scratch = self._lift(rows)
                rows += views
                record.update(vrec)
            return {**record, **self._train(train, rows, record.get("cvcf_tau"))}
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)

    def _lift(self, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any], Path | None]:
        """3D-VITAL's synthetic views of the real training rows: lifted from each image's pixels alone
        (the identity is only their ReID label), rendered, filtered by CVCF. Also the folder to delete
        after training when the renders are not cached."""
        from harness.tasks.reid.backends.vital import lift_images, select_views
        from harness.tasks.reid.blender_jobs import cache_root
        from harness.tasks.reid.lifting import LifterConfig, load_or_fit

        get = lambda k: self.settings.get(k, SETTINGS[k].default)  # noqa: E731
        lifter = load_or_fit(LifterConfig.sized(int(get("lift_figures")), int(get("lift_steps")),
                                                threads=int(get("threads"))))
        tau = float(get("cvcf_tau")) if get("cvcf_tau") is not None else float(lifter.record["cvcf_tau"])
        scratch = None
        if not bool(get("cache")):  # renders into a folder of this fit's own, deleted after training
            cache_root().mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix="lifts-nocache-", dir=cache_root()))
        lifts = lift_images([r["path"] for r in rows], lifter, int(get("novel")), int(get("seed")), folder=scratch)
        views, vrec = select_views(lifts, [r["pid"] for r in rows], self.variant != "vital-no-cvcf", tau)
        held = lifter.record.get("heldout", {})
        vrec["lifter"] = {"key": lifter.record.get("key"), "calibrated_tau": lifter.record["cvcf_tau"],
                          "heldout_attribute_accuracy": held.get("attribute_accuracy"),
                          "heldout_failed_share": held.get("failed_share"), "figures": lifter.cfg.figures,
                          "steps": lifter.cfg.steps}
        return views, vrec, scratch

    def _train(self, train: list[Sample], rows: list[dict[str, Any]], tau: float | None) -> dict[str, Any]:
        import numpy as np

        from harness.tasks.reid.backends.net import train as train_net
        from harness.tasks.reid.images import INPUT_HW, crop

        cfg = self.config()
        # the images' and views' bytes are in the key: a dataset rebuilt in place refits
        files = [r[k] for r in rows for k in ("path", "visibility") if r.get(k)]
        key = fit_cache.fit_key(backend=f"reid:{self.variant}", settings={**asdict(cfg), "cvcf_tau": tau},
                                task_hash=fit_cache.samples_hash(train, files=files), train=stable_hash(rows),
                                seed=cfg.seed, extra={"v": 2})
        use_cache = bool(self.settings.get("cache", True))
        loaded = fit_cache.load(key, kind=self.variant, folder=FITS, restore=lambda blob: _restore(blob, cfg)
                                ) if use_cache else None
        cached = loaded is not None
        if loaded is not None:
            state, trec = loaded
        else:
            images = np.zeros((len(rows), 3, *INPUT_HW), dtype=np.float32)
            vis = np.zeros((len(rows), *INPUT_HW), dtype=np.float32)
            supervised = np.zeros(len(rows), dtype=np.float32)
            for i, r in enumerate(rows):
                img, v = crop(r["path"], r["visibility"])
                images[i] = img
                if v is not None:
                    vis[i], supervised[i] = v, 1.0
            labels = np.asarray([r["pid"] for r in rows])
            state, trec = train_net(cfg, images, labels, vis, supervised)
            # weights as numpy arrays: the cache is plain data; atomic, so a concurrent run never reads half
            weights = {k: t.detach().cpu().numpy() for k, t in state["weights"].items()}
            fit_cache.save(key, {"state": {**state, "weights": weights}, "record": trec}, kind=self.variant,
                           folder=FITS)
        self.state = {"state": state, "cfg": cfg}
        return {**trec, "cached": cached}

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        import numpy as np

        from harness.tasks.reid.backends.net import embed
        from harness.tasks.reid.images import INPUT_HW, crop

        if self.state is None:
            reason = self.fit_error or f"{self.spec} has not been fitted (the task needs a train split)"
            return [Output(error=reason) for _ in requests]
        t0 = time.perf_counter()
        outs = [Output() for _ in requests]
        imgs, slots = [], []
        for i, r in enumerate(requests):
            path = image_path(r.messages)
            if path is None:
                outs[i] = Output(error="the request has no image")
                continue
            try:
                imgs.append(crop(path)[0])
            except (OSError, ValueError) as exc:
                outs[i] = Output(error=f"cannot read image {Path(path).name}: {exc}")
                continue
            slots.append(i)
        if imgs:
            emb = embed(self.state["cfg"], self.state["state"], np.stack(imgs).reshape(-1, 3, *INPUT_HW))
            # the per-lift list rides on one output per call (the task reads it once), not on every image
            light = {k: v for k, v in self.record.items() if k != "lifts"}
            for row, i in enumerate(slots):
                outs[i] = Output(prediction=[round(float(v), 6) for v in emb[row]],
                                 details={"fit": self.record if row == 0 else light})
        per = (time.perf_counter() - t0) / max(len(requests), 1)
        for o in outs:
            o.usage = Usage(calls=1, seconds=per)
        return outs


def _restore(blob: dict[str, Any], cfg: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(state with torch weights, training record) from a cached fit; raises (KeyError, ValueError,
    RuntimeError, ...) for one that is not a fit of this network, which is a cache miss."""
    import numpy as np
    import torch

    from harness.tasks.reid.backends.net import build_net

    state, record = blob["state"], blob["record"]
    weights = state["weights"]
    if not isinstance(record, dict) or not isinstance(weights, dict) or not all(
            isinstance(v, np.ndarray) for v in (*weights.values(), state["mean"], state["std"])):
        raise ValueError("not a reid fit (record, numpy weights, mean and std)")
    if weights["cls.weight"].shape != (state["n_classes"], cfg.dim):  # a class count the file's bytes back
        raise ValueError("the classifier does not match the class count")
    tensors = {k: torch.from_numpy(v) for k, v in weights.items()}
    build_net(cfg, int(state["n_classes"])).load_state_dict(tensors)  # the layout this config builds
    return {**state, "weights": tensors}, record


@model("reid", kind="method",
       description="ReID embedding backends fitted on the train split: reid:baseline | reid:vital | "
                   "reid:vital-no-cvcf | reid:vital-no-vaas", settings=SETTINGS, strict=True)
def reid_backend(path: str | None, **settings: Any) -> ReIDModel:
    variant = path or "baseline"
    if variant not in VARIANTS:
        close = difflib.get_close_matches(variant, VARIANTS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown reid variant {variant!r}{hint}; choose one of {', '.join(VARIANTS)}")
    settings = validate_settings("reid", settings, SETTINGS)  # a factory called directly is checked too
    shown = {k: v for k, v in sorted(settings.items()) if k in SETTINGS and k not in ("cache", "threads")}
    spec = f"reid:{variant}" + ("?" + "&".join(f"{k}={v}" for k, v in shown.items()) if shown else "")
    return ReIDModel(variant, dict(settings), spec)
