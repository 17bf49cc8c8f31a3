"""Instant built-in models for smoke tests and overhead benchmarks (no weights, no network).

- ``builtin:echo``     replies with the last user message's text;
- ``builtin:constant`` replies with ``-M text=...`` (default empty);
- ``builtin:number``   replies ``#### N`` with the last number of the last user message.
They answer a whole batch in one call and are not cached (a cache lookup would cost more than them).
Settings: ``batch_size``, ``concurrency``, ``delay`` (seconds slept per call: a stand-in for a slow
backend in crash/resume tests), ``cacheable`` (cache them anyway, to test the cache).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.backend_settings import Setting
from harness.model import Backend
from harness.registry import model
from harness.types import Output, Request, Usage

_NUM = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass
class BuiltinModel(Backend):
    kind: str
    text: str = ""
    spec: str = ""
    batch_size: int = 1024
    concurrency: int = 1  # a -M setting
    cacheable: bool = False
    delay: float = 0.0
    modalities: frozenset[str] = field(default_factory=lambda: frozenset(
        {"text", "image", "video", "audio", "points", "mesh"}))

    def reply(self, request: Request) -> str:
        last = next((m for m in reversed(request.messages) if m.role == "user"), None)
        text = last.text_content if last else ""
        if self.kind == "echo":
            return text
        if self.kind == "number":
            nums = _NUM.findall(text)
            return f"#### {nums[-1]}" if nums else "#### 0"
        return self.text

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        if self.delay:
            await asyncio.sleep(self.delay)
        out = []
        for r in requests:
            text = self.reply(r)
            n_in = sum(len(m.text_content.split()) for m in r.messages)
            out.append(Output(text=text, usage=Usage(input_tokens=n_in, output_tokens=len(text.split()), calls=1)))
        return out


KINDS = ("echo", "constant", "number")
MAX_DELAY_S = 3600.0
SETTINGS = {
    "text": Setting(str, "", "builtin:constant's reply"),
    "batch_size": Setting(int, 1024, "requests per call (>= 1)"),
    "concurrency": Setting(int, 1, "calls in flight (>= 1)"),
    "cacheable": Setting(bool, False, "keep replies in the response cache"),
    "delay": Setting(float, 0.0, "seconds each call waits (a slow model for tests)",
                     expect=f"between 0 and {MAX_DELAY_S:g} seconds"),
}


def _validated(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings with their defaults (the registry checked their names and types), the delay's range."""
    from harness.modelspec import ModelSpecError, validate_settings

    settings = validate_settings("builtin", settings, SETTINGS)  # a factory called directly checks too
    values = {k: settings.get(k, SETTINGS[k].default) for k in ("batch_size", "concurrency", "cacheable", "delay")}
    if not 0.0 <= values["delay"] <= MAX_DELAY_S:  # NaN fails too; 1e30 s would hang the run
        raise ModelSpecError(f"builtin: delay must be between 0 and {MAX_DELAY_S:g} seconds, got {values['delay']!r}")
    return values


@model("builtin", kind="stub", description="Instant offline models: builtin:echo, builtin:constant, builtin:number",
       settings=SETTINGS, strict=True)
def builtin(path: str | None, **settings: Any) -> BuiltinModel:
    kind = path or "echo"
    if kind not in KINDS:
        from harness.modelspec import ModelSpecError

        raise ModelSpecError(f"unknown builtin model {kind!r}; choose one of {', '.join(KINDS)}")
    values = _validated(settings)
    text = str(settings.get("text", ""))
    spec = f"builtin:{kind}" + (f"?text={text}" if text else "")
    if values["batch_size"] < 1 or values["concurrency"] < 1:
        from harness.modelspec import ModelSpecError

        raise ModelSpecError("builtin: batch_size and concurrency must be >= 1")
    return BuiltinModel(kind, text, spec, **values)
