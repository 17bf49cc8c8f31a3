"""Backend ``counter:``: counts the words after the prompt's colon; ``counter:off`` one too many."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness import Output, Request, Usage
from harness.backend_settings import Setting
from harness.model import Backend
from harness.registry import model


@dataclass
class Counter(Backend):
    spec: str  # the response cache's key for the model: it holds every setting that changes replies
    offset: int
    batch_size: int = 64
    cacheable: bool = False

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        return [Output(text=str(len(r.messages[-1].text_content.partition(":")[2].split()) + self.offset),
                       usage=Usage(calls=1)) for r in requests]


@model("counter", description="Counts words (counter:exact) or miscounts by one (counter:off)",
       settings={"offset": Setting(int, 0, "added to every count")}, strict=True)
def counter(path: str | None, offset: int = 0, **generation: Any) -> Counter:
    if path not in (None, "exact", "off"):  # (the generation keys are the model client's to apply)
        raise ValueError(f"counter: mode must be exact or off, not {path!r}")
    return Counter(f"counter:{path or 'exact'}" + (f"?offset={offset}" if offset else ""), offset + (path == "off"))
