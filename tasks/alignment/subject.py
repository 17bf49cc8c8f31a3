"""Follow-up turns: the scorer of a multi-turn probe calls the model under test again.

Sycophancy ("are you sure?") and character coherence need more than the one request the runner
sends per sample: the second turn depends on the model's first reply. The design choice here:
the runner sends turn 1 as usual (batched, cached, resumable); the task's async ``score`` builds
turn 2 from ``output.text`` and sends it to the *same* model through :func:`generate`.

Which model is "the same model", in order:
1. ``subject`` (task option ``-T subject=SPEC``): an explicit spec, for scoring outside a run;
2. ``ctx.model`` if the core's ScoreContext carries the runner's live model (proposed core change);
3. the run's own configuration (``model``, ``model_settings`` of the ``runs`` row of ``ctx.run_id``),
   built here with :func:`harness.modelspec.build_model`.
In case 3 the model is a second instance, built on first use and closed when no scorer holds it
(reference counted per event loop): cheap for API backends, a reload for local-weight backends
(hf/vllm), which is why (2) is proposed. Follow-up replies go through the run's response cache under
the same key the runner uses (model spec + request), so a resumed or rescored run never pays twice,
and their usage is added to the sample's usage so its cost covers every turn.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.model import close_model
from harness.task import ScoreContext
from harness.types import Output, Request, Usage, stable_hash

GENERATION_KEYS = ("temperature", "max_tokens", "top_p", "seed", "stop", "logprobs")


class SubjectUnavailable(RuntimeError):
    """No model to send a follow-up turn to (no run, no ``-T subject=SPEC``)."""


@dataclass
class _Held:
    model: Any
    settings: dict[str, Any]
    users: int = 0
    owned: bool = True  # built here (so closed here) rather than handed over by the runner


@dataclass
class _LoopPool:
    """Live subject models of one event loop keyed by (spec, settings), shared by concurrent scorers."""

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


def _run_config(ctx: ScoreContext) -> tuple[str, dict[str, Any], int]:
    if ctx.sessions is None or ctx.run_id is None:
        raise SubjectUnavailable("this probe sends follow-up turns to the model under test: run it with "
                                 "`harness eval`, or pass -T subject=SPEC")
    from harness.store.schema import RunRow

    with ctx.sessions() as s:
        run = s.get(RunRow, ctx.run_id)
        if run is None:
            raise SubjectUnavailable(f"run {ctx.run_id} not found for the follow-up turn")
        cfg = dict(run.config or {})
    return str(cfg["model"]), dict(cfg.get("model_settings") or {}), int(cfg.get("seed") or 0)


def _run_uses_cache(ctx: ScoreContext) -> bool:
    """False when the run was started with --no-cache (follow-ups then skip the cache like turn 1)."""
    if ctx.sessions is None or ctx.run_id is None:
        return True
    from harness.store.schema import RunRow

    with ctx.sessions() as s:
        run = s.get(RunRow, ctx.run_id)
        return bool((run.config or {}).get("use_cache", True)) if run is not None else True


def _resolve(ctx: ScoreContext, subject: str | None) -> tuple[str, dict[str, Any], int, Any]:
    """(spec, settings, run seed, live model or None)."""
    if subject:
        return subject, {}, 0, None
    live = getattr(ctx, "model", None)  # the proposed ScoreContext.model
    if live is not None:
        settings: dict[str, Any] = {}
        seed = 0
        if ctx.sessions is not None and ctx.run_id is not None:
            _, settings, seed = _run_config(ctx)
        return live.spec, settings, seed, live
    spec, settings, seed = _run_config(ctx)
    return spec, settings, seed, None


async def _acquire(spec: str, settings: dict[str, Any], live: Any) -> _Held:
    pool = _pool()
    key = stable_hash([spec, settings])
    async with pool.lock:
        held = pool.held.get(key)
        if held is None:
            if live is not None:
                held = _Held(live, settings, owned=False)
            else:
                from harness.modelspec import build_model

                held = _Held(build_model(spec, settings, {"text"}), settings)
            pool.held[key] = held
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
    if held.owned:
        await close_model(held.model)


def _with_run_settings(request: Request, settings: dict[str, Any], seed: int) -> Request:
    """Apply the run's ``-M`` generation keys the way the runner does for turn 1."""
    overrides = {k: v for k, v in settings.items() if k in GENERATION_KEYS}
    if request.config.seed is None and "seed" not in overrides:
        overrides["seed"] = seed
    if overrides:
        request.config = request.config.merged(overrides)
    return request


async def generate(ctx: ScoreContext, requests: Sequence[Request], *, subject: str | None = None) -> list[Output]:
    """Send follow-up requests to the model under test; one Output per request (errors in ``error``)."""
    spec, settings, seed, live = _resolve(ctx, subject)
    held = await _acquire(spec, settings, live)
    try:
        model = held.model
        reqs = [_with_run_settings(r, settings, seed) for r in requests]
        keys = [stable_hash([model.spec, r.to_dict()]) for r in reqs]
        use_cache = ctx.sessions is not None and getattr(model, "cacheable", True) and _run_uses_cache(ctx)
        outputs: list[Output | None] = [None] * len(reqs)
        if use_cache:
            from harness.store import ops

            with ctx.sessions() as s:
                hits = ops.cache_get(s, keys)
            for i, key in enumerate(keys):
                if key in hits:
                    outputs[i] = Output.from_dict(hits[key])
                    outputs[i].cached = True  # type: ignore[union-attr]
        todo = [i for i, o in enumerate(outputs) if o is None]
        if todo:
            try:
                fresh = await model.generate([reqs[i] for i in todo])
            except Exception as exc:  # a failed batch fails these turns, not the run
                fresh = [Output(error=f"{type(exc).__name__}: {exc}") for _ in todo]
            for i, out in zip(todo, fresh, strict=True):
                outputs[i] = out
            if use_cache:
                from harness.store import ops
                from harness.store.schema import utcnow

                rows = [{"key": keys[i], "model_spec": model.spec, "response": outputs[i].to_dict(),  # type: ignore[union-attr]
                         "created_at": utcnow()} for i in todo if outputs[i].error is None]  # type: ignore[union-attr]
                if rows:
                    with ctx.sessions.begin() as s:
                        ops.cache_put(s, rows)
        return [o for o in outputs if o is not None]
    finally:
        await _release(held)


def add_usage(output: Output, followups: Sequence[Output]) -> None:
    """Count follow-up turns in the sample's usage (so its cost and token counts cover every turn).

    The runner stores ``output.usage`` after scoring and has already cached turn 1 as a copy. Cached
    follow-ups count like the runner counts a cached turn 1: with the usage of the call they replay."""
    total = output.usage
    for f in followups:
        total = total + f.usage
    output.usage = total


def turn_record(request: Request, output: Output) -> dict[str, Any]:
    """What a follow-up turn looks like in ``Score.details`` (shown on the run page)."""
    return {"user": request.messages[-1].text_content, "reply": output.text, "error": output.error,
            "usage": Usage.to_dict(output.usage)}
