"""Common machinery of the reliability operators: channels, episodes, traced calls, the Output.

An operator wraps one or more *channels* (models; with several, successive samples cycle through
them, the reference code's "spatial diversity") and optionally a *judge* model: ``judge="SPEC"``
(built from the spec alone: ``-M`` settings reach only the spec's leaves), or ``judge=last`` (the
last positional model is the judge, not a channel, and gets the ``-M`` settings like any leaf, e.g.
a ``base_url``); default: the first channel judges its own samples, as in the reference code. Each request is
handled by one :class:`Episode`, which makes every underlying call through :meth:`Episode.call`,
so each call's tokens and cost land in the trace with its role (generator, critic, judge,
synthesis, probe). The final :class:`~harness.types.Output` carries ``usage`` = the sum over calls
and ``details`` = {operator, params, trace, cost split, operator-specific fields}.
"""

from __future__ import annotations

import asyncio
import difflib
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.backend_settings import NonNegativeFloat, PositiveInt, Setting, SettingError, check
from harness.client import ModelClient
from harness.model import Model
from harness.models.operators import prompts
from harness.models.operators.cost import Trace, explicit_rates
from harness.models.operators.extract import get_extractor
from harness.types import GenerationConfig, Message, Output, Request


class OperatorError(ValueError):
    """Bad operator parameters (unknown name, out-of-range value)."""


def check_params(name: str, declared: Mapping[str, Setting], params: Mapping[str, Any]) -> dict[str, Any]:
    """An operator's parameters (``vote(m, n=5)``) checked against its declaration and coerced to the
    declared types. Only the declared keys are taken, the generation keys included: an operator's
    parameters are its own, a ``max_tokens=`` it does not read would be silently dropped."""
    unknown = sorted(set(params) - set(declared))
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(declared), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise OperatorError(f"{name}: unknown parameter(s) {', '.join(unknown)}{hint} "
                            f"(known: {', '.join(sorted(declared))}; see `harness models {name}`)")
    try:
        return check(name, declared, params)
    except SettingError as exc:
        raise OperatorError(str(exc)) from None


def _spec_value(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


class Operator:
    """Base class: subclasses set ``name`` and ``parameters`` (typed, with the reference code's
    defaults) and implement :meth:`run`; :meth:`validate` checks the ranges."""

    name: str = ""
    parameters: dict[str, Setting] = {}
    uses_judge: bool = False
    # params every operator accepts
    common: dict[str, Setting] = {
        "extract": Setting(str, "auto", "answer extractor: auto, gsm8k, mcq, code or text"),
        "judge": Setting(str | None, None, "judge model spec, or 'last' (the last model judges; default: the "
                         "first channel judges its own samples)"),
        "price_in": Setting(NonNegativeFloat | None, None, "$ per 1M input tokens of every inner model"),
        "price_out": Setting(NonNegativeFloat | None, None, "$ per 1M output tokens of every inner model"),
        "judge_max_tokens": Setting(PositiveInt, 32, "most tokens of a judge's verdict"),
    }

    @classmethod
    def declared(cls) -> dict[str, Setting]:
        """Every parameter this operator takes (what ``@model(settings=...)`` is told)."""
        return {**cls.common, **cls.parameters}

    def __init__(self, *channels: Model, **params: Any) -> None:
        if not channels:
            raise OperatorError(f"{self.name}: needs at least one model")
        allowed = self.declared()
        checked = check_params(self.name, allowed, params)
        self.channels = list(channels)
        self.params = {**{k: s.default for k, s in allowed.items()}, **checked}
        if self.params["judge"] == "last":  # the last positional model judges (and gets the -M settings)
            if len(self.channels) < 2:
                raise OperatorError(f"{self.name}: judge='last' needs a generator model and a judge model")
            self._judge_leaf: Model | None = self.channels.pop()
        else:
            self._judge_leaf = None
        self.extract = get_extractor(str(self.params["extract"]))
        self.judge_model = self._build_judge(self.params["judge"])
        self.validate()
        shown = {k: v for k, v in self.params.items() if v is not None}
        if self.params["judge"] is not None:
            shown["judge"] = self.judge_model.spec
        inner = ", ".join(c.spec for c in self.channels)
        settings = ", ".join(f"{k}={_spec_value(v)}" for k, v in sorted(shown.items()))
        self.spec = f"{self.name}({inner}, {settings})"
        self.batch_size = 8
        self.concurrency = max(int(getattr(c, "concurrency", 1) or 1) for c in self.channels)
        mods = [frozenset(getattr(c, "modalities", {"text"})) for c in self.channels]
        self.modalities = frozenset.intersection(*mods)
        self.cacheable = all(getattr(c, "cacheable", True) for c in self.channels)
        explicit = self.params["price_in"] is not None or self.params["price_out"] is not None
        self.prices = {c.spec: explicit_rates(c.spec, self.params["price_in"], self.params["price_out"])
                       for c in [*self.channels, self.judge_model]} if explicit else {}

    def _build_judge(self, spec: Any) -> Model:
        if self._judge_leaf is not None:
            return self._judge_leaf
        if spec is None:
            return self.channels[0]
        from harness.modelspec import build_model

        return build_model(str(spec), {}, {"text"})

    def client(self, model: Model) -> ModelClient:
        """The client of an inner model (one per model, kept for the operator's life)."""
        clients: dict[int, ModelClient] = self.__dict__.setdefault("_clients", {})
        found = clients.get(id(model))
        if found is None:
            found = clients[id(model)] = ModelClient(model, seed=None, use_cache=False)
        return found

    def validate(self) -> None:
        """Subclasses check their parameter ranges here (raise OperatorError)."""

    # ranges (the declared types made the values ints and floats already); the refusals' wording
    # ("n must be an integer in [1, 64]") is kept, which the core's "n=0 must be ..." would change
    def check_int(self, key: str, low: int, high: int | None = None) -> int:
        value: int = self.params[key]
        if value < low or (high is not None and value > high):
            rng = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise OperatorError(f"{self.name}: {key} must be an integer {rng}, got {value!r}")
        return value

    def check_float(self, key: str, low: float, high: float) -> float:
        value: float = self.params[key]
        if not low <= value <= high:
            raise OperatorError(f"{self.name}: {key} must be a number in [{low}, {high}], got {value!r}")
        return value

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    async def _one(self, request: Request) -> Output:
        ep = Episode(self, request)
        t0 = time.perf_counter()
        try:
            text = await self.run(ep)
            error = None
        except Exception as exc:  # a failed inner call fails this sample, not the run
            text, error = "", f"{self.name}: {type(exc).__name__}: {exc}"
        return ep.output(text, error, time.perf_counter() - t0)

    async def run(self, ep: Episode) -> str:
        raise NotImplementedError

    async def aclose(self) -> None:
        from harness.model import close_model

        seen: set[int] = set()
        for m in [*self.channels, self.judge_model]:
            if id(m) not in seen:
                seen.add(id(m))
                await close_model(m)


@dataclass
class Candidate:
    text: str
    answer: str | None = None
    quality: float | None = None
    index: int = 0

    def q(self, default: float = 0.0) -> float:
        return default if self.quality is None else self.quality


@dataclass
class Episode:
    """One operator invocation on one request."""

    op: Operator
    request: Request
    trace: Trace = field(init=False)
    info: dict[str, Any] = field(default_factory=dict)  # operator-specific details
    _seed: int = 0
    _sampled: int = 0

    def __post_init__(self) -> None:
        self.trace = Trace(prices=self.op.prices)
        base = self.request.config.seed
        self._seed = (base if base is not None else 0) * 100_003

    @property
    def question(self) -> str:
        last = next((m for m in reversed(self.request.messages) if m.role == "user"), None)
        return last.text_content if last else ""

    def next_seed(self) -> int:
        self._seed += 1
        return self._seed

    async def call(self, role: str, model: Model, requests: list[Request], note: str = "") -> list[Output]:
        # through the model's client (usage and failures counted in one place); the operator's own
        # reply is what the run caches, so inner calls are not cached again
        outs = await self.op.client(model).send(requests)
        for out in outs:
            self.trace.add(role, model.spec, out, note)
        return outs

    async def sample(self, n: int, temperature: float | Sequence[float], note: str = "",
                     channel: int | None = None) -> list[Candidate]:
        """n generator samples of the task request, cycling over channels (or all from ``channel``),
        one batch per channel."""
        temps = [temperature] * n if isinstance(temperature, int | float) else list(temperature)
        by_channel: dict[int, list[tuple[int, Request]]] = {}
        for i in range(n):
            k = (self._sampled + i) % len(self.op.channels) if channel is None else channel
            cfg = self.request.config.merged({"temperature": float(temps[i]), "seed": self.next_seed()})
            by_channel.setdefault(k, []).append((i, Request(self.request.messages, cfg, self.request.sample_id,
                                                            self.request.epoch)))
        if channel is None:
            self._sampled += n
        texts: dict[int, Output] = {}
        groups = list(by_channel.items())  # channels answer concurrently
        results = await asyncio.gather(*(self.call("generator", self.op.channels[k], [r for _, r in items], note)
                                         for k, items in groups))
        for (_, items), outs in zip(groups, results, strict=True):
            for (i, _), out in zip(items, outs, strict=True):
                texts[i] = out
        result: list[Candidate] = []
        for i in range(n):
            out = texts[i]
            if out.error:
                raise RuntimeError(f"generator call failed: {out.error}")
            result.append(Candidate(out.text, self.op.extract(out.text), index=len(result)))
        return result

    async def ask(self, role: str, prompt: str, *, temperature: float = 0.0, max_tokens: int | None = None,
                  model: Model | None = None, note: str = "") -> str:
        """One auxiliary call with a fresh single-turn prompt."""
        cfg = GenerationConfig(temperature=temperature,
                               max_tokens=max_tokens or self.request.config.max_tokens, seed=self.next_seed())
        req = Request([Message.text("user", prompt)], cfg, self.request.sample_id, self.request.epoch)
        out = (await self.call(role, model or self.op.channels[0], [req], note))[0]
        if out.error:
            raise RuntimeError(f"{role} call failed: {out.error}")
        return out.text

    async def rewrite(self, prompt: str, *, temperature: float, note: str = "") -> Candidate:
        """A generator-role call that produces a new candidate (correction, parity, synthesis input)."""
        text = await self.ask("generator", prompt, temperature=temperature, note=note)
        return Candidate(text, self.op.extract(text))

    async def judge(self, cands: Sequence[Candidate], note: str = "") -> None:
        """Set ``quality`` on each candidate with one judge call each (batched)."""
        todo = [c for c in cands if c.quality is None]
        if not todo:
            return
        reqs = []
        for c in todo:
            cfg = GenerationConfig(temperature=0.0, max_tokens=int(self.op.params["judge_max_tokens"]),
                                   seed=self.next_seed())
            msg = prompts.JUDGE.format(question=self.question, response=c.text)
            reqs.append(Request([Message.text("user", msg)], cfg, self.request.sample_id, self.request.epoch))
        outs = await self.call("judge", self.op.judge_model, reqs, note)
        unparsed = 0
        calls = self.trace.calls[-len(todo):]
        for c, out, call in zip(todo, outs, calls, strict=True):
            c.quality = None if out.error else prompts.parse_judge(out.text)
            if c.quality is None:
                unparsed += 1
            call.note = f"{note} q={c.quality}".strip()
        if unparsed:
            self.info["judge_unparsed"] = self.info.get("judge_unparsed", 0) + unparsed

    async def synthesize(self, cands: Sequence[Candidate], weighted: bool, temperature: float) -> Candidate:
        ranked = sorted(cands, key=lambda c: c.q(), reverse=True) if weighted else list(cands)
        blocks = []
        for i, c in enumerate(ranked):
            label = (f"[{'BEST' if i == 0 else f'ALT-{i}'}] quality {c.q():.2f}" if weighted
                     else f"Response {i + 1}")
            blocks.append(f"### {label}\n{c.text}")
        template = prompts.SYNTHESIS_WEIGHTED if weighted else prompts.SYNTHESIS_EQUAL
        text = await self.ask("synthesis", template.format(question=self.question,
                                                           candidates="\n\n---\n\n".join(blocks)),
                              temperature=temperature, note="weighted" if weighted else "equal")
        return Candidate(text, self.op.extract(text))

    def output(self, text: str, error: str | None, seconds: float) -> Output:
        usage = self.trace.usage()
        usage.seconds = seconds
        details = {
            "operator": self.op.name,
            "operator_params": {k: v for k, v in self.op.params.items() if v is not None},
            "cost": self.trace.split(),
            "trace": [c.to_dict() for c in self.trace.calls],
            **self.info,
        }
        return Output(text=text, usage=usage, error=error, details=details)


def plurality(answers: Sequence[str | None], weights: Sequence[float] | None = None) -> tuple[str | None, dict]:
    """(winning answer, tally) over extracted answers; None answers do not vote. Ties go to the
    answer that reached the top weight first in sample order (deterministic, documented choice)."""
    tally: dict[str, float] = {}
    first_seen: dict[str, int] = {}
    for i, a in enumerate(answers):
        if a is None:
            continue
        tally[a] = tally.get(a, 0.0) + (1.0 if weights is None else float(weights[i]))
        first_seen.setdefault(a, i)
    if not tally:
        return None, {}
    best = max(tally, key=lambda a: (tally[a], -first_seen[a]))
    return best, tally


def counts(answers: Sequence[str | None]) -> Counter[str]:
    return Counter(a for a in answers if a is not None)
