"""The single-view lifting model: one 64x128 RGBA render -> the procedural body model's parameters and
the source camera, in the style of HMR-like parametric body regression.

A small CNN (five 3x3 conv layers in three blocks on the person's 64x32 crop, average-pooled to a 4x2
map; the crop's box in the orthographic frame, four numbers, joins those features; then two linear
layers) regresses,
per image (``body_codec.py``):
height, build, leg ratio and head scale; the 9 colours; pattern, sleeves, lower garment and hair
length (classification); hat, backpack and bag (binary); and the source camera as sin/cos of the
azimuth and the elevation. Losses: mean squared error on the body, camera and the colours the image
can show (masked), cross-entropy on the categories, binary cross-entropy on the flags.

It is trained on its own pretraining set (``liftset.py``: ``figures`` fresh procedural figures x
``views`` ground cameras, never the task's identities), with Adam for ``steps`` steps, and checked on
``heldout`` further figures: the held-out attribute accuracy and, from re-renders of the held-out
lifts, the CVCF threshold (``cvcf_calibration.py``). The fit is cached by ``harness.fit_cache`` under
``$HARNESS_CACHE_DIR/reid/fits`` (``lifter-<key>.pkl``, numpy weights read back as data only), keyed on
this config and the pretraining set's content hash.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness import fit_cache
from harness.tasks.reid.backends.net import descend
from harness.tasks.reid.body_codec import N_BODY, N_CAMERA, N_COLOURS, N_FLAGS, decode, encode
from harness.tasks.reid.figures import CATEGORIES
from harness.tasks.reid.images import BACKGROUND, person_box, resize_channels
from harness.tasks.reid.liftset import LiftSetConfig

FRAME_HW = (128, 64)  # the render the lifter takes (height, width)
CROP_HW = (64, 32)  # the person's box, as the network sees it
FITS = "reid/fits"
N_CATS = sum(len(v) for v in CATEGORIES.values())
N_OUT = N_BODY + N_COLOURS + N_CATS + N_FLAGS + N_CAMERA
MIN_STEPS = 20
REGRESSION_WEIGHT = 10.0  # the [0, 1] targets' squared errors are ~0.05 where cross-entropies are ~0.5


@dataclass(frozen=True)
class LifterConfig:
    figures: int = 600
    views: int = 2
    heldout: int = 120
    steps: int = 2000
    batch: int = 32
    lr: float = 3e-3
    weight_decay: float = 1e-4
    width: int = 16
    seed: int = 0
    threads: int = 1
    workers: int = 1  # Blender processes for the pretraining renders

    @classmethod
    def sized(cls, figures: int, steps: int, **rest: Any) -> LifterConfig:
        """The config for ``figures`` pretraining figures: a fifth as many held out, at least 8."""
        return cls(figures=figures, heldout=max(8, figures // 5), steps=steps, **rest)

    def liftset(self) -> LiftSetConfig:
        return LiftSetConfig(figures=self.figures, views=self.views, heldout=self.heldout, seed=self.seed,
                             workers=self.workers)

    def validate(self) -> None:
        # the one-cycle schedule warms up over a tenth of the steps: under MIN_STEPS that is under two
        # steps, and at exactly 10 it is zero, which OneCycleLR divides by
        if self.steps < MIN_STEPS or self.batch < 2:
            raise ValueError(f"the lifting model needs steps >= {MIN_STEPS} and batch >= 2, got {self.steps} "
                             f"and {self.batch}")

    def fitted(self) -> dict[str, Any]:
        """The fields that change the fitted weights (threads and workers do not)."""
        return {k: v for k, v in asdict(self).items() if k not in ("threads", "workers")}


class LiftInputError(ValueError):
    """An image the lifting model cannot take (not a 64x128 RGBA render)."""


def load_input(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(crop [4, 64, 32] uint8: RGB composited on grey, then alpha; box [4] float32) of one render.

    The crop is the alpha bounding box (2 pixels padded) resized to 64x32, as a person detector's crop;
    the box is (top, bottom, left, right) as fractions of the frame. The frame is orthographic at a
    fixed scale and centred on the person, so the box carries the absolute size a crop loses."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            mode, size = im.mode, im.size
            rgba = np.asarray(im.convert("RGBA"), dtype=np.float32) / 255.0
    except OSError as exc:
        raise LiftInputError(f"cannot read {Path(path).name}: {exc}") from None
    if mode != "RGBA" or size != (FRAME_HW[1], FRAME_HW[0]):
        raise LiftInputError(f"the lifting model takes the synthetic set's {FRAME_HW[1]}x{FRAME_HW[0]} RGBA renders "
                             f"(silhouette in alpha); {Path(path).name} is {mode} {size[0]}x{size[1]}")
    if not (rgba[..., 3] > 0.05).any():
        raise LiftInputError(f"{Path(path).name} shows no person (its alpha is empty)")
    y0, y1, x0, x1 = person_box(rgba[..., 3])  # the ReID crop's box: the same detector stand-in
    box = np.asarray([y0 / FRAME_HW[0], y1 / FRAME_HW[0], x0 / FRAME_HW[1], x1 / FRAME_HW[1]], dtype=np.float32)
    crop = rgba[y0:y1, x0:x1]
    a = crop[..., 3:4]
    rgb = crop[..., :3] * a + BACKGROUND * (1.0 - a)
    # quantised to bytes before the resize: the crops are stored and batched as uint8
    arr = np.round(np.concatenate([rgb, a], axis=-1) * 255).astype(np.uint8)
    return np.ascontiguousarray(resize_channels(arr, CROP_HW).transpose(2, 0, 1)), box


def build_lifter(width: int) -> Any:
    import torch
    import torch.nn.functional as F
    from torch import nn

    def conv(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True)]

    w = width

    class Lifter(nn.Module):
        box_mean: torch.Tensor  # buffers, declared for the type checker
        box_std: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            # 64x32 -> 8x4 -> pooled to 4x2: coarse enough not to memorise 1,200 images (flattening the
            # 8x4 map did: 100% train, 61% held-out pattern accuracy), fine enough that a colour keeps its place
            self.body = nn.Sequential(*conv(4, w), nn.MaxPool2d(2), *conv(w, 2 * w), *conv(2 * w, 2 * w),
                                      nn.MaxPool2d(2), *conv(2 * w, 4 * w), *conv(4 * w, 4 * w), nn.MaxPool2d(2),
                                      nn.AdaptiveAvgPool2d((4, 2)), nn.Flatten())
            # the box, standardised with the training set's statistics (set by train_lifter, saved as buffers)
            self.register_buffer("box_mean", torch.zeros(4))
            self.register_buffer("box_std", torch.ones(4))
            # and the crop's own colours, averaged over the person's pixels in each of 8x4 cells: the head
            # reads a garment's shaded colour where it sits instead of relearning it through the convolutions
            # (batch-normalised together, so the few box and colour inputs weigh as much as the many others)
            n_in = 4 * w * 8 + 4 + 4 * 32
            self.head = nn.Sequential(nn.BatchNorm1d(n_in), nn.Linear(n_in, 128), nn.ReLU(True), nn.Dropout(0.2),
                                      nn.Linear(128, N_OUT))

        def forward(self, x: torch.Tensor, box: torch.Tensor) -> torch.Tensor:
            raw = x + 0.5  # back to [0, 1]: RGB on grey, alpha
            alpha = F.avg_pool2d(raw[:, 3:], 8)
            cells = torch.cat([F.avg_pool2d(raw[:, :3] * raw[:, 3:], 8) / alpha.clamp_min(1e-3), alpha], dim=1)
            feats = [self.body(x), (box - self.box_mean) / self.box_std, cells.flatten(1)]
            return self.head(torch.cat(feats, dim=1))

    return Lifter()


def _split(out: Any) -> dict[str, Any]:
    """The network's output columns by head (body_codec's layout)."""
    i = 0
    parts: dict[str, Any] = {}
    for name, n in (("body", N_BODY), ("colours", N_COLOURS), *((f"cat:{k}", len(v)) for k, v in CATEGORIES.items()),
                    ("flags", N_FLAGS), ("camera", N_CAMERA)):
        parts[name] = out[:, i:i + n]
        i += n
    return parts


def targets(labels: list[tuple[dict[str, Any], list[float]]]) -> dict[str, np.ndarray]:
    enc = [encode(p, c) for p, c in labels]
    out = {k: np.stack([e[k] for e in enc]) for k in ("body", "colours", "colour_mask", "flags", "camera")}
    for k in CATEGORIES:
        out[f"cat:{k}"] = np.asarray([e["cats"][k] for e in enc], dtype=np.int64)
    return out


def _as_float(x: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(x.astype(np.float32) / 255.0 - 0.5)


def train_lifter(cfg: LifterConfig, x: np.ndarray, box: np.ndarray, y: dict[str, np.ndarray]
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fit on crops ``x`` [n, 4, 64, 32] uint8 and boxes [n, 4] (:func:`load_input`) with :func:`targets`
    ``y``: (numpy weights, training record)."""
    import torch
    import torch.nn.functional as F

    cfg.validate()
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = np.random.default_rng(cfg.seed)
    net = build_lifter(cfg.width)
    net.box_mean.copy_(torch.from_numpy(box.mean(axis=0)))
    net.box_std.copy_(torch.from_numpy(box.std(axis=0) + 1e-4))
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.1)
    yt = {k: torch.from_numpy(v) for k, v in y.items()}
    t0 = time.perf_counter()
    losses: list[float] = []
    net.train()
    for _ in range(cfg.steps):
        idx = rng.choice(len(x), size=min(cfg.batch, len(x)), replace=False)
        out = _split(net(_as_float(x[idx]), torch.from_numpy(box[idx])))
        t = {k: v[idx] for k, v in yt.items()}
        mask = t["colour_mask"]
        colour = (((out["colours"] - t["colours"]) ** 2) * mask).sum() / mask.sum().clamp_min(1.0)
        regression = F.mse_loss(out["body"], t["body"]) + colour + F.mse_loss(out["camera"], t["camera"])
        loss = REGRESSION_WEIGHT * regression
        loss = loss + F.binary_cross_entropy_with_logits(out["flags"], t["flags"])
        for k in CATEGORIES:
            loss = loss + F.cross_entropy(out[f"cat:{k}"], t[f"cat:{k}"])
        losses.append(descend(loss, opt, sched, "the lifting model's training loss"))
    weights = {k: v.detach().cpu().numpy() for k, v in net.state_dict().items()}
    return weights, {"fit_seconds": round(time.perf_counter() - t0, 2), "steps": cfg.steps, "train_images": len(x),
                     "final_loss": round(float(np.mean(losses[-50:])), 4)}


def predict(cfg: LifterConfig, weights: dict[str, np.ndarray], x: np.ndarray, box: np.ndarray
            ) -> list[tuple[dict[str, Any], list[float]]]:
    """(predicted identity parameters, predicted source camera) per crop of ``x`` with its ``box``."""
    import torch

    torch.set_num_threads(cfg.threads)
    net = build_lifter(cfg.width)
    net.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    net.eval()
    outs = []
    with torch.no_grad():
        for lo in range(0, len(x), 256):
            outs.append(net(_as_float(x[lo:lo + 256]), torch.from_numpy(box[lo:lo + 256])).numpy())
    parts = _split(np.concatenate(outs) if outs else np.zeros((0, N_OUT), np.float32))
    res = []
    for i in range(len(x)):
        cats = {k: int(np.argmax(parts[f"cat:{k}"][i])) for k in CATEGORIES}
        res.append(decode(parts["body"][i], parts["colours"][i], cats, (parts["flags"][i] > 0).astype(np.float32),
                          parts["camera"][i]))
    return res


@dataclass
class Lifter:
    cfg: LifterConfig
    weights: dict[str, np.ndarray]
    record: dict[str, Any]

    def lift(self, paths: list[str]) -> list[tuple[dict[str, Any], list[float]]]:
        """Predictions for render files (LiftInputError, one line, for a file that is not one)."""
        if not paths:
            return []
        crops, boxes = zip(*(load_input(p) for p in paths), strict=True)
        return predict(self.cfg, self.weights, np.stack(crops), np.stack(boxes))


def _restore(blob: dict[str, Any], cfg: LifterConfig) -> Lifter:
    weights, record = blob["weights"], blob["record"]
    if not isinstance(record, dict) or not isinstance(weights, dict) or not all(
            isinstance(v, np.ndarray) for v in weights.values()):
        raise ValueError("not a lifting-model fit (numpy weights and a record)")
    import torch

    build_lifter(cfg.width).load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    if not isinstance(record.get("cvcf_tau"), float):
        raise ValueError("the lifting-model fit has no calibrated CVCF threshold")
    return Lifter(cfg, weights, record)


def load_or_fit(cfg: LifterConfig, cache: bool = True) -> Lifter:
    """The fitted lifting model for ``cfg``: from the fit cache, else pretrained now (renders its set
    with Blender if that is not cached either, trains, checks and calibrates on the held-out figures)."""
    from harness.tasks.reid.cvcf_calibration import calibrate
    from harness.tasks.reid.liftset import build, load_labels

    cfg.validate()
    set_cfg = cfg.liftset()
    set_cfg.validate()
    key = fit_cache.fit_key(backend="reid:lifter", settings=cfg.fitted(), task_hash=set_cfg.key(),
                            train=set_cfg.key(), seed=cfg.seed, extra={"v": 3})
    if cache:
        loaded = fit_cache.load(key, kind="lifter", folder=FITS, restore=lambda blob: _restore(blob, cfg))
        if loaded is not None:
            return loaded
    root = build(set_cfg)
    labels = load_labels(root)
    train = [im for im in labels["images"] if im["split"] == "train"]
    crops, boxes = zip(*(load_input(str(root / im["path"])) for im in train), strict=True)
    y = targets([(labels["figures"][im["figure"]], im["cam"]) for im in train])
    weights, record = train_lifter(cfg, np.stack(crops), np.stack(boxes), y)
    lifter = Lifter(cfg, weights, {**record, "key": key, "pretraining_set": root.name})
    lifter.record.update(calibrate(lifter, root, labels))
    fit_cache.save(key, {"weights": weights, "record": lifter.record}, kind="lifter", folder=FITS)
    return lifter
