"""VLA method backends, fitted on the task's demonstrations (its train split), then played through the
same loop as any model: ``vla:bc`` (behaviour cloning: frame CNN + instruction embedding),
``vla:3a`` (3A-VLA: also the intention and environment-semantics abstractions, AAR-weighted loss)
and ``vla:3a-no-aar`` (the same policy, every demonstration step weighted 1).

Settings (``-M``): ``epochs``, ``lr``, ``hidden``, ``seed`` (training), ``greedy`` (argmax instead
of sampling the policy with the request's seed), ``batch_size``. The request gives the frame (the
image part's path; a text-only task gives a blank frame) and the observation text.
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
    "greedy": Setting(bool, False, "play the most likely action instead of sampling the policy"),
    "batch_size": Setting(PositiveInt, 64, "observations answered per call"),
}
TRAINING = ("epochs", "lr", "hidden", "seed")


def _frame(path: str | None) -> Any:
    import numpy as np

    if not path:
        return np.zeros((64, 64, 3), np.uint8)
    from PIL import Image

    with Image.open(path) as im:
        arr = np.asarray(im.convert("RGB").resize((64, 64)))
    return arr


def features(frame: Any, text: str, abstractions: bool) -> tuple[dict[str, Any], Any]:
    """One step's inputs (and the intention primitive, for AAR)."""
    from harness.tasks.agents.backends.abstractions import esa_map, ia_vector, intention, inventory_vector
    from harness.tasks.agents.backends.vla_core import embed_text
    from harness.tasks.agents.observation import parse_observation

    obs = parse_observation(text)
    row: dict[str, Any] = {"frame": frame, "text": embed_text(obs.goal)}
    prim = None
    if abstractions:
        prim = intention(obs)
        row.update(esa=esa_map(obs, prim), ia=ia_vector(prim), inv=inventory_vector(obs))
    return row, (obs, prim)


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
        from harness.tasks.agents.backends.abstractions import aar_weights, alignment
        from harness.tasks.agents.backends.vla_core import TrainConfig
        from harness.tasks.agents.backends.vla_core import train as train_net
        from harness.tasks.agents.demos import DemoError, replay

        t0 = time.perf_counter()
        rows, actions, aligned, corrupted = [], [], [], []
        for s in train:
            demo = s.metadata.get("demo")
            if not isinstance(demo, dict):
                raise DemoError(f"train sample {s.id!r} holds no demonstration")
            marks = list(demo.get("corrupted") or [])
            for k, (frame, text, action) in enumerate(replay(demo)):
                row, (obs, prim) = features(frame, text, self.abstractions)
                rows.append(row)
                actions.append(action)
                corrupted.append(int(marks[k]) if k < len(marks) else 0)
                if prim is not None:
                    aligned.append(alignment(obs, prim, action))
        if not rows:
            raise DemoError("the demonstrations hold no steps")
        weights = aar_weights(aligned) if self.variant == "3a" else [1.0] * len(rows)
        cfg = TrainConfig(**{k: v for k, v in self.settings.items() if k in TRAINING})
        self.net, losses = train_net(_stack(rows), actions, weights, self.abstractions, cfg)
        self.record = {"method": self.spec, "steps": len(rows), "episodes": len(train), "corrupted": sum(corrupted),
                       "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4), "config": asdict(cfg),
                       "seconds": round(time.perf_counter() - t0, 2)}  # fmt: skip
        if aligned and any(corrupted) and not all(corrupted):
            # diagnostic only (training never reads the marks): does AAR's signal tell bad steps apart?
            clean = [a for a, c in zip(aligned, corrupted, strict=True) if not c]
            bad = [a for a, c in zip(aligned, corrupted, strict=True) if c]
            self.record["alignment_clean"] = round(sum(clean) / len(clean), 3)
            self.record["alignment_corrupted"] = round(sum(bad) / len(bad), 3)
        return self.record

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        from harness.tasks.agents.backends.vla_core import probabilities
        from harness.tasks.agents.env import ACTIONS

        if self.net is None:
            return [Output(error=f"{self.spec} has not been fitted (the task needs a train split of demonstrations)")
                    for _ in requests]
        t0 = time.perf_counter()
        outs: list[Output | None] = [None] * len(requests)
        rows, slots, steps = [], [], []
        for i, r in enumerate(requests):
            try:
                row, (obs, _prim) = features(_frame(request_image(r)), request_text(r), self.abstractions)
            except (OSError, ValueError) as exc:
                outs[i] = Output(error=f"bad request: {type(exc).__name__}: {exc}")
                continue
            rows.append(row)
            slots.append(i)
            steps.append(obs.step)
        if rows:
            probs = probabilities(self.net, _stack(rows))
            for j, i in enumerate(slots):
                r = requests[i]
                p = probs[j]
                if self.settings.get("greedy", False):
                    a = int(p.argmax())
                else:
                    rng = random.Random(f"{r.config.seed or 0}:{zlib.crc32(r.sample_id.encode())}:{steps[j]}")
                    a = rng.choices(range(len(ACTIONS)), weights=p.tolist())[0]
                outs[i] = Output(text=ACTIONS[a], prediction={"action": ACTIONS[a], "p": round(float(p[a]), 4)})
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
