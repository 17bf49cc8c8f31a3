"""Backend ``counter:``: answers by splitting the last user message on whitespace (``counter:exact``)
or one too many (``counter:off``), so a run has a known score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.registry import model
from harness.types import Output, Request, Usage


@dataclass
class Counter:
    mode: str
    spec: str = ""
    batch_size: int = 64
    concurrency: int = 1
    modalities: frozenset[str] = frozenset({"text"})
    cacheable: bool = False

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        out = []
        for r in requests:
            text = r.messages[-1].text_content.split(":", 1)[-1]
            n = len(text.split()) + (1 if self.mode == "off" else 0)
            out.append(Output(text=str(n), usage=Usage(calls=1)))
        return out


@model("counter", description="Counts words (counter:exact) or miscounts by one (counter:off)")
def counter(path: str | None, **settings: object) -> Counter:
    if settings:
        raise ValueError(f"counter: no settings (got {', '.join(sorted(settings))})")
    mode = path or "exact"
    if mode not in ("exact", "off"):
        raise ValueError(f"counter: mode must be exact or off, not {mode!r}")
    return Counter(mode, spec=f"counter:{mode}")
