"""The reference agents: ``crafter:random`` (uniform over the 17 actions, as Crafter's random
baseline) and ``crafter:scripted`` (the scripted expert). Both read the observation text of the
request (:mod:`harness.tasks.agents.observation`); random draws from the request's seed, the
sample id and the step, so a run is reproducible and two episodes do not share a sequence.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.backend_settings import PositiveInt, Setting
from harness.modelspec import validate_settings
from harness.registry import model
from harness.tasks.agents.env import ACTIONS
from harness.tasks.agents.observation import parse_observation
from harness.types import Output, Request, Usage

KINDS = ("random", "scripted")
SETTINGS = {
    "batch_size": Setting(PositiveInt, 64, "observations answered per call"),
    "concurrency": Setting(PositiveInt, 1, "calls in flight"),
}


def request_text(request: Request) -> str:
    return "\n".join(m.text_content for m in request.messages if m.role == "user")


def request_image(request: Request) -> str | None:
    for m in request.messages:
        for p in m.content:
            if p.type == "image" and p.path:
                return p.path
    return None


@dataclass
class CrafterAgent:
    kind: str
    spec: str
    batch_size: int = 64
    concurrency: int = 1
    cacheable: bool = True  # deterministic given the request (its seed included)
    modalities: frozenset[str] = field(default_factory=lambda: frozenset({"text", "image"}))

    def act(self, request: Request) -> str:
        obs = parse_observation(request_text(request))
        seed = request.config.seed or 0
        if self.kind == "random":
            rng = random.Random(f"{seed}:{zlib.crc32(request.sample_id.encode())}:{obs.step}")
            return ACTIONS[rng.randrange(len(ACTIONS))]
        from harness.tasks.agents.expert import expert_action

        return expert_action(obs, seed + zlib.crc32(request.sample_id.encode()))[0]

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        out = []
        for r in requests:
            t0 = time.perf_counter()
            text = self.act(r)
            out.append(Output(text=text, usage=Usage(calls=1, seconds=time.perf_counter() - t0)))
        return out


@model("crafter", kind="agent",
       description="Crafter reference agents: crafter:random (uniform actions), crafter:scripted (expert)",
       settings=SETTINGS, strict=True)
def crafter_agent(path: str | None, **settings: Any) -> CrafterAgent:
    kind = path or "random"
    if kind not in KINDS:
        raise ValueError(f"unknown crafter agent {kind!r}; choose one of {', '.join(KINDS)}")
    settings = validate_settings("crafter", settings, SETTINGS)  # a factory called directly is checked too
    return CrafterAgent(kind, f"crafter:{kind}", batch_size=settings.get("batch_size", SETTINGS["batch_size"].default),
                        concurrency=settings.get("concurrency", SETTINGS["concurrency"].default))
