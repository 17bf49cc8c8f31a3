"""The LLM-as-judge role: pinned judge model, cached verdicts, retries, 'unscored' on failure.

A scorer calls :func:`judge` with the judge prompt and a parser; it gets a :class:`Verdict`. Every
attempt's raw reply is kept: the caller puts ``verdict.records`` into ``Score.details["_judgements"]``
(or uses :func:`attach`), and the runner stores them as rows of ``judgements`` (judge spec, prompt
hash, raw reply, parsed verdict). Replies are cached in the response cache under the judge's spec,
so rescoring or rerunning never pays twice. A verdict that still does not parse after the retries
is returned with ``value=None``: the scorer must then return ``Score.not_scored(...)``, never 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.task import ScoreContext
from harness.types import GenerationConfig, Message, Output, Request, Score, stable_hash

T = TypeVar("T")


class JudgeUnavailable(RuntimeError):
    """The task needs a judge and none was configured (pass --judge SPEC)."""


@dataclass(slots=True)
class Verdict:
    value: Any
    raw: str
    prompt_hash: str
    attempts: int
    records: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


async def _call(ctx: ScoreContext, request: Request) -> Output:
    assert ctx.judge is not None
    key = stable_hash(["judge", ctx.judge.spec, request.to_dict()])
    if ctx.sessions is not None and getattr(ctx.judge, "cacheable", True):
        from harness.store import ops

        with ctx.sessions() as s:
            hit = ops.cache_get(s, [key]).get(key)
        if hit is not None:
            out = Output.from_dict(hit)
            out.cached = True
            return out
    out = (await ctx.judge.generate([request]))[0]
    if out.error is None and ctx.sessions is not None and getattr(ctx.judge, "cacheable", True):
        from harness.store import ops
        from harness.store.schema import utcnow

        with ctx.sessions.begin() as s:
            ops.cache_put(s, [{"key": key, "model_spec": ctx.judge.spec, "response": out.to_dict(),
                               "created_at": utcnow()}])
    return out


async def judge(
    ctx: ScoreContext,
    messages: list[Message],
    parse: Callable[[str], T | None],
    *,
    retries: int = 2,
    config: GenerationConfig | None = None,
) -> Verdict:
    """Ask the judge; re-ask (with a different seed) while the reply does not parse."""
    if ctx.judge is None:
        raise JudgeUnavailable("this task grades with an LLM judge: pass --judge SPEC")
    base = config or GenerationConfig(temperature=0.0, max_tokens=1024)
    prompt_hash = stable_hash([m.to_dict() for m in messages])
    records: list[dict[str, Any]] = []
    raw, error = "", None
    for attempt in range(retries + 1):
        cfg = base.merged({"seed": attempt}) if attempt else base
        out = await _call(ctx, Request(messages, cfg))
        raw = out.text
        value = None if out.error else parse(raw)
        records.append({"judge_spec": ctx.judge_spec or ctx.judge.spec, "prompt_hash": prompt_hash,
                        "raw": raw if out.error is None else f"ERROR: {out.error}",
                        "verdict": {"value": value, "attempt": attempt}})
        if value is not None:
            return Verdict(value, raw, prompt_hash, attempt + 1, records)
        error = out.error or "unparseable judge reply"
    return Verdict(None, raw, prompt_hash, retries + 1, records, error)


def attach(score: Score, *verdicts: Verdict) -> Score:
    """Move verdict records into the score so the runner stores them as judgement rows."""
    bucket = score.details.setdefault("_judgements", [])
    for v in verdicts:
        bucket.extend(v.records)
    return score
