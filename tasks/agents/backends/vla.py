"""VLA method backends, fitted on the task's demonstrations (its train split), then played through the
same loop as any model. Every variant sees the same observation: the frame, the instruction, the
inventory / facing / achievements vector and the one-hot 9x7 semantic map
(:mod:`harness.tasks.agents.backends.abstractions`).

- ``vla:bc``: behaviour cloning on that observation (action cross-entropy).
- ``vla:3a`` (3A-VLA): the same policy plus two learned abstraction heads (the next achievement,
  and the tile acted on next, both from hindsight labels of the replayed demonstrations), fed to
  the policy as inputs, and AAR: loss weights from the agreement of each demonstrated action with
  those abstractions (:mod:`harness.tasks.agents.backends.vla_core`).
- ``vla:3a-no-aar``: ``vla:3a`` with every demonstration step weighted 1.

Nothing here reads the scripted expert (it only recorded the demonstrations): the labels come from
the environment's replay. Settings (``-M``): ``epochs``, ``lr``, ``hidden``, ``seed``, ``warmup``
(training), ``greedy`` (argmax instead of sampling the policy with the request's seed),
``batch_size``. The request gives the frame (the image part's path; a text-only task gives a blank
frame) and the observation text.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any

from pydantic import Field

from harness.backend_settings import PositiveInt, Setting
from harness.modelspec import validate_settings
from harness.registry import model
from harness.tasks.agents.backends.builtin import request_image, request_text
from harness.types import Output, Request, Sample, Usage

VARIANTS = ("bc", "3a", "3a-no-aar")
# the training keys' defaults are vla_core.TrainConfig's (not read from it: that module imports torch)
SETTINGS = {
    "epochs": Setting(PositiveInt, 20, "training epochs over the demonstrations"),
    "lr": Setting(Annotated[float, Field(gt=0)], 1e-3, "Adam learning rate"),
    "hidden": Setting(PositiveInt, 128, "hidden units of the policy"),
    "seed": Setting(int, 0, "training seed"),
    "warmup": Setting(Annotated[int, Field(ge=0)], 5, "epochs before AAR reweights (3a), at most epochs - 1"),
    "greedy": Setting(bool, False, "play the most likely action instead of sampling the policy"),
    "batch_size": Setting(PositiveInt, 64, "observations answered per call"),
}
TRAINING = ("epochs", "lr", "hidden", "seed", "warmup")


def _frame(path: str | None) -> Any:
    import numpy as np

    if not path:
        return np.zeros((64, 64, 3), np.uint8)
    from PIL import Image

    with Image.open(path) as im:
        arr = np.asarray(im.convert("RGB").resize((64, 64)))
    return arr


def features(frame: Any, text: str) -> tuple[dict[str, Any], int]:
    """One step's inputs (the same for every variant) and its step number."""
    from harness.tasks.agents.backends.abstractions import state_vector, tile_indices
    from harness.tasks.agents.backends.vla_core import embed_text
    from harness.tasks.agents.observation import parse_observation

    obs = parse_observation(text)
    row = {"frame": frame, "text": embed_text(obs.goal), "state": state_vector(obs), "tiles": tile_indices(obs)}
    return row, obs.step


def _stack(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {k: [r[k] for r in rows] for k in rows[0]} if rows else {}


@dataclass
class VLAModel:
    variant: str
    spec: str
    settings: dict[str, Any]
    batch_size: int = 64
    concurrency: int = 1
    cacheable: bool = False  # replies depend on the fitted demonstrations, which the spec does not name
    modalities: frozenset[str] = field(default_factory=lambda: frozenset({"text", "image"}))
    net: Any = None
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def abstractions(self) -> bool:
        return self.variant != "bc"

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        from harness.tasks.agents.backends.abstractions import affordance_labels, intention_labels
        from harness.tasks.agents.backends.vla_core import TrainConfig
        from harness.tasks.agents.backends.vla_core import train as train_net
        from harness.tasks.agents.demos import DemoError, replay_steps

        t0 = time.perf_counter()
        rows, actions, corrupted = [], [], []
        labels: dict[str, list[int]] = {"ia": [], "esa": []}
        for s in train:
            demo = s.metadata.get("demo")
            if not isinstance(demo, dict):
                raise DemoError(f"train sample {s.id!r} holds no demonstration")
            marks = list(demo.get("corrupted") or [])
            steps = list(replay_steps(demo))
            labels["ia"] += intention_labels(steps)
            labels["esa"] += affordance_labels(steps)
            for k, step in enumerate(steps):
                rows.append(features(step.frame, step.text)[0])
                actions.append(step.action)
                corrupted.append(int(marks[k]) if k < len(marks) else 0)  # diagnostics only
        if not rows:
            raise DemoError("the demonstrations hold no steps")
        cfg = TrainConfig(**{k: v for k, v in self.settings.items() if k in TRAINING})
        self.net, out = train_net(_stack(rows), actions, labels if self.abstractions else None,
                                  self.variant == "3a", cfg)
        losses = out["losses"]
        self.record = {"method": self.spec, "steps": len(rows), "episodes": len(train), "corrupted": sum(corrupted),
                       "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4), "config": asdict(cfg),
                       "seconds": round(time.perf_counter() - t0, 2)}  # fmt: skip
        for key in ("ia_accuracy", "esa_accuracy"):
            if key in out:
                self.record[key] = round(out[key], 3)
        if "agreement" in out and any(corrupted) and not all(corrupted):
            # diagnostic only (training never reads the marks): do the learned abstractions tell bad steps apart?
            for name, values in (("agreement", out["agreement"]), ("weight", out["weights"])):
                clean = [a for a, c in zip(values, corrupted, strict=True) if not c]
                bad = [a for a, c in zip(values, corrupted, strict=True) if c]
                self.record[f"{name}_clean"] = round(sum(clean) / len(clean), 3)
                self.record[f"{name}_corrupted"] = round(sum(bad) / len(bad), 3)
        return self.record

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        from harness.tasks.agents.backends.abstractions import IA_CLASSES, NOWHERE
        from harness.tasks.agents.backends.vla_core import predict
        from harness.tasks.agents.env import ACTIONS, VIEW_W

        if self.net is None:
            return [Output(error=f"{self.spec} has not been fitted (the task needs a train split of demonstrations)")
                    for _ in requests]
        t0 = time.perf_counter()
        outs: list[Output | None] = [None] * len(requests)
        rows, slots, steps = [], [], []
        for i, r in enumerate(requests):
            try:
                row, step = features(_frame(request_image(r)), request_text(r))
            except (OSError, ValueError) as exc:
                outs[i] = Output(error=f"bad request: {type(exc).__name__}: {exc}")
                continue
            rows.append(row)
            slots.append(i)
            steps.append(step)
        if rows:
            pred = predict(self.net, _stack(rows))
            probs = pred["probs"]
            for j, i in enumerate(slots):
                r = requests[i]
                p = probs[j]
                if self.settings.get("greedy", False):
                    a = int(p.argmax())
                else:
                    rng = random.Random(f"{r.config.seed or 0}:{zlib.crc32(r.sample_id.encode())}:{steps[j]}")
                    a = rng.choices(range(len(ACTIONS)), weights=p.tolist())[0]
                shown: dict[str, Any] = {"action": ACTIONS[a], "p": round(float(p[a]), 4)}
                if "intention" in pred:  # what the abstraction heads predicted for this step
                    tile = int(pred["affordance"][j])
                    shown["intention"] = IA_CLASSES[int(pred["intention"][j])]
                    shown["affordance"] = "nowhere" if tile == NOWHERE else [tile % VIEW_W, tile // VIEW_W]
                outs[i] = Output(text=ACTIONS[a], prediction=shown)
        per = (time.perf_counter() - t0) / max(len(requests), 1)
        done = []
        for o in outs:
            assert o is not None
            o.usage = Usage(calls=1, seconds=per)
            done.append(o)
        return done


def _build(variant: str | None, settings: dict[str, Any]) -> VLAModel:
    name = variant or "3a"
    if name not in VARIANTS:
        raise ValueError(f"unknown vla variant {name!r}; choose one of {', '.join(VARIANTS)}")
    settings = validate_settings("vla", settings, SETTINGS)  # a factory called directly is checked too
    shown = {k: v for k, v in sorted(settings.items()) if k in (*TRAINING, "greedy")}
    spec = f"vla:{name}" + ("?" + "&".join(f"{k}={v}" for k, v in shown.items()) if shown else "")
    return VLAModel(name, spec, dict(settings), batch_size=settings.get("batch_size", SETTINGS["batch_size"].default))


@model("vla", kind="agent",
       description="VLA backends fitted on demonstrations: vla:bc | vla:3a (3A-VLA) | vla:3a-no-aar",
       settings=SETTINGS, strict=True)
def vla_backend(path: str | None, **settings: Any) -> VLAModel:
    return _build(path, settings)
