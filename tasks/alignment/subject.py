"""Follow-up turns: the scorer of a multi-turn probe calls the model under test again.

Sycophancy ("are you sure?") and character coherence need more than the one request the runner
sends per sample: the second turn depends on the model's first reply. The runner sends turn 1 as
usual (batched, cached, resumable); the task's async ``score`` builds turn 2 from ``output.text``
and sends it through :func:`generate` to the model under test: the run's own
:class:`~harness.client.ModelClient` (``ctx.model``), so the run's settings, seed and response
cache apply exactly as they did to turn 1 and no second copy of the model is built.

``-T subject=SPEC`` names another model explicitly (for scoring outside a run): it is built once
per event loop, shared by concurrent scorers and closed when no scorer holds it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.client import ModelClient, add_usage
from harness.errors import UserError
from harness.task import ScoreContext
from harness.types import Output, Request, Usage

__all__ = ["SubjectUnavailable", "add_usage", "generate", "turn_record"]


class SubjectUnavailable(UserError, RuntimeError):
    """No model to send a follow-up turn to (no run, no ``-T subject=SPEC``)."""


@dataclass
class _Held:
    client: ModelClient
    users: int = 0


@dataclass
class _LoopPool:
    """Explicit subject models of one event loop keyed by spec, shared by concurrent scorers."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    held: dict[str, _Held] = field(default_factory=dict)


# one pool per event loop (each `asyncio.run` of a run gets its own; gone with the loop)
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopPool] = weakref.WeakKeyDictionary()


def _pool() -> _LoopPool:
    loop = asyncio.get_running_loop()
    pool = _POOLS.get(loop)
    if pool is None:
        pool = _POOLS[loop] = _LoopPool()
    return pool


async def _acquire(spec: str) -> _Held:
    pool = _pool()
    async with pool.lock:
        held = pool.held.get(spec)
        if held is None:
            held = pool.held[spec] = _Held(ModelClient.build(spec, {}, {"text"}))
        held.users += 1
        return held


async def _release(held: _Held) -> None:
    pool = _pool()
    async with pool.lock:
        held.users -= 1
        if held.users > 0:
            return
        for key, value in list(pool.held.items()):
            if value is held:
                del pool.held[key]
    await held.client.aclose()


async def generate(ctx: ScoreContext, requests: Sequence[Request], *, subject: str | None = None) -> list[Output]:
    """Send follow-up requests to the model under test; one Output per request (errors in ``error``)."""
    if subject:
        held = await _acquire(subject)
        try:
            return await held.client.generate(requests)
        finally:
            await _release(held)
    if ctx.model is None:
        raise SubjectUnavailable("this probe sends follow-up turns to the model under test: run it with "
                                 "`harness eval`, or pass -T subject=SPEC")
    return await ctx.model.generate(requests)


def turn_record(request: Request, output: Output) -> dict[str, Any]:
    """What a follow-up turn looks like in ``Score.details`` (shown on the run page)."""
    return {"user": request.messages[-1].text_content, "reply": output.text, "error": output.error,
            "usage": Usage.to_dict(output.usage)}
