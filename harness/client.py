"""The one path to a model: settings, response cache, usage, retries' bookkeeping and the judge role.

Every model call the harness makes goes through a :class:`ModelClient`: the runner's calls for
the model under test, a multi-turn scorer's follow-up turns (a video QA dialogue, a code-refinement
loop, a pushback probe), the judge's verdicts and an operator's inner calls. That keeps in one place

- **settings**: the run's ``-M`` keys and an alias card's settings. Generation keys (and the
  backend's declared ``generation_extras``) are applied to each request here, once; the other keys
  went to the backend's factory when it was built. Backends never re-apply them.
- **the response cache**: one key scheme, ``stable_hash([model.spec, request.to_dict()])``, shared
  by every role and run (the ``Model`` protocol's ``spec`` is the cache key's model half, so a
  backend puts every reply-changing setting into it);
- **usage**: every reply's usage (tokens, calls, seconds, cost) is summed per client, and a scorer
  adds its follow-ups to the sample's own usage with :func:`add_usage`;
- **bookkeeping of failures**: a failed call becomes ``Output.error`` (one per request); the
  client counts them;
- **the judge role**: :meth:`ModelClient.judge` re-asks with another seed while a verdict does
  not parse and returns every attempt's record (stored as judgement rows by the runner).

The runner uses the low-level pieces (``prepare``, ``cache_key``, ``lookup``, ``remember``) to keep
its hot path batched; everything else calls :meth:`ModelClient.generate`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from harness.model import Model, close_model, kind_refusal
from harness.types import GenerationConfig, JudgementRecord, Message, Output, Request, Usage, stable_hash

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from harness.streaming import TextStream

T = TypeVar("T")

# request-level settings every backend understands (GenerationConfig's own fields)
GENERATION_KEYS: frozenset[str] = frozenset({"temperature", "max_tokens", "top_p", "seed", "stop", "logprobs"})

CacheSink = Callable[[list[dict[str, Any]]], None]


@dataclass(slots=True)
class Verdict:
    value: Any
    raw: str
    prompt_hash: str
    attempts: int
    records: list[JudgementRecord] = field(default_factory=list)
    error: str | None = None


class ModelClient:
    """A model plus the run's settings, cache and accounting (see the module docstring)."""

    def __init__(self, model: Model, *, role: str = "subject", settings: Mapping[str, Any] | None = None,
                 seed: int | None = 0, sessions: sessionmaker[Session] | None = None, use_cache: bool = True,
                 cache_sink: CacheSink | None = None, label: str | None = None) -> None:
        self.model = model
        self.role = role
        self.seed = seed
        self.sessions = sessions
        self.use_cache = use_cache and sessions is not None and bool(getattr(model, "cacheable", True))
        self.cache_sink = cache_sink
        self.label = label or model.spec  # what records name the model by (e.g. the judge spec as given)
        extras = frozenset(getattr(model, "generation_extras", frozenset()))
        settings = dict(settings or {})
        # split once: request-level keys go onto each request, the rest was the factory's business
        self.overrides = {k: v for k, v in settings.items() if k in GENERATION_KEYS or k in extras}
        self.usage = Usage()
        self.errors: dict[str, int] = {}

    @classmethod
    def build(cls, spec: str, settings: Mapping[str, Any] | None = None, modalities: set[str] | None = None,
              **kwargs: Any) -> ModelClient:
        """Build the model a spec names (alias cards resolved) and wrap it. An alias card's settings
        apply to requests like ``-M`` ones, which win."""
        # deferred to the call: building from a spec needs the registry of backends, which sits above
        # this module (registry -> task -> client), so a module-level import would be a cycle
        from harness.modelspec import alias_settings, build_model

        mods = modalities or {"text"}
        settings = dict(settings or {})
        model = build_model(spec, settings, mods)
        return cls(model, settings={**alias_settings(spec, mods), **settings}, label=kwargs.pop("label", spec),
                   **kwargs)

    @property
    def spec(self) -> str:
        return self.model.spec

    # ---- the pieces ------------------------------------------------------------------------------
    def prepare(self, request: Request, *, epoch: int = 0) -> Request:
        """Apply the run's generation settings (and the default seed, run seed + epoch) to a request.
        A client with ``seed=None`` (the judge) leaves an unset seed unset."""
        overrides = dict(self.overrides)
        if self.seed is not None and request.config.seed is None and "seed" not in overrides:
            overrides["seed"] = self.seed + epoch
        if overrides:
            request.config = request.config.merged(overrides)
        return request

    def cache_key(self, request_dict: dict[str, Any]) -> str:
        return stable_hash([self.model.spec, request_dict])

    def lookup(self, keys: Sequence[str]) -> dict[str, Output]:
        """Cached replies for these keys (one query), marked ``cached``."""
        if not self.use_cache or not keys:
            return {}
        from harness.store import ops

        assert self.sessions is not None
        with self.sessions() as s:
            hits = ops.cache_get(s, list(keys))
        out = {}
        for key, data in hits.items():
            reply = Output.from_dict(data)
            reply.cached = True
            out[key] = reply
        return out

    def remember(self, pairs: Sequence[tuple[str, Output]]) -> None:
        """Put successful replies into the cache: through the runner's group commit when it gave a
        sink, else at once."""
        if not self.use_cache:
            return
        from harness.store.schema import utcnow

        rows = [{"key": key, "model_spec": self.model.spec, "response": out.to_dict(), "created_at": utcnow()}
                for key, out in pairs if out.error is None]
        if not rows:
            return
        if self.cache_sink is not None:
            self.cache_sink(rows)
            return
        from harness.store import ops

        assert self.sessions is not None
        with self.sessions.begin() as s:
            ops.cache_put(s, rows)

    def account(self, outputs: Sequence[Output]) -> None:
        for out in outputs:
            if not out.cached:
                self.usage = self.usage + out.usage
            if out.error is not None:
                kind = out.details.get("error_kind", "model") if isinstance(out.details, dict) else "model"
                self.errors[kind] = self.errors.get(kind, 0) + 1

    async def send(self, requests: Sequence[Request]) -> list[Output]:
        """The backend's ``generate`` as it is (requests already prepared), its replies counted; an
        exception propagates (the runner records it per sample with its kind). A request of a kind
        the backend does not answer never reaches it (a chat backend would answer a scoring request
        with a reply to its first message): it fails alone, with kind ``request_kind``."""
        outs: list[Output | None] = [None] * len(requests)
        todo = []
        for i, r in enumerate(requests):
            refusal = kind_refusal(self.model, r.kind)
            if refusal is None:
                todo.append(i)
            else:
                outs[i] = Output(error=refusal, details={"error_kind": "request_kind"})
        if todo:
            fresh = await self.model.generate([requests[i] for i in todo])
            if len(fresh) != len(todo):
                raise RuntimeError(f"{self.model.spec} returned {len(fresh)} outputs for {len(todo)} requests")
            for i, out in zip(todo, fresh, strict=True):
                outs[i] = out
        done = [o for o in outs if o is not None]
        self.account(done)
        return done

    async def call(self, requests: Sequence[Request]) -> list[Output]:
        """:meth:`send`, with a failed batch turned into one error Output per request (a follow-up
        turn that fails fails its sample, not the run)."""
        try:
            return await self.send(requests)
        except Exception as exc:
            outs = [Output(error=f"{type(exc).__name__}: {exc}") for _ in requests]
            self.account(outs)
            return outs

    # ---- the whole path --------------------------------------------------------------------------
    async def generate(self, requests: Sequence[Request], *, epoch: int = 0, cache: bool = True) -> list[Output]:
        """Settings applied, cache consulted, the rest called in one batch, replies remembered."""
        reqs = [self.prepare(r, epoch=epoch) for r in requests]
        keys = [self.cache_key(r.to_dict()) for r in reqs] if cache and self.use_cache else []
        hits = self.lookup(keys) if keys else {}
        outputs: list[Output | None] = [hits.get(k) for k in keys] if keys else [None] * len(reqs)
        todo = [i for i, o in enumerate(outputs) if o is None]
        if todo:
            fresh = await self.call([reqs[i] for i in todo])
            for i, out in zip(todo, fresh, strict=True):
                outputs[i] = out
            if keys:
                self.remember([(keys[i], fresh_out) for i, fresh_out in zip(todo, fresh, strict=True)])
        return [o for o in outputs if o is not None]

    def stream(self, request: Request, *, epoch: int = 0) -> TextStream:
        """The reply as an async iterator of text deltas, as the backend produces them (settings
        applied, never cached: a live reply is wanted). Backends without ``stream`` yield their whole
        reply once. After the iteration ``.output`` is the reply, counted in this client's usage."""
        from harness.streaming import TextStream, whole_reply

        req = self.prepare(request, epoch=epoch)
        backend = getattr(self.model, "stream", None)
        source = backend(req) if backend is not None else whole_reply(self.model, req)
        return TextStream(source, on_done=lambda out: self.account([out]))

    async def judge(self, messages: list[Message], parse: Callable[[str], T | None], *, retries: int = 2,
                    config: GenerationConfig | None = None) -> Verdict:
        """Ask for a verdict; re-ask (with a different seed) while the reply does not parse. A verdict
        that never parses comes back with ``value=None``: the scorer then returns ``not_scored``."""
        base = config or GenerationConfig(temperature=0.0, max_tokens=1024)
        prompt_hash = stable_hash([m.to_dict() for m in messages])
        records: list[JudgementRecord] = []
        raw, error = "", None
        for attempt in range(retries + 1):
            cfg = base.merged({"seed": attempt}) if attempt else base
            (out,) = await self.generate([Request(messages, cfg)])
            raw = out.text
            value = None if out.error else parse(raw)
            records.append(JudgementRecord(self.label, prompt_hash, raw if out.error is None else f"ERROR: {out.error}",
                                           {"value": value, "attempt": attempt}))
            if value is not None:
                return Verdict(value, raw, prompt_hash, attempt + 1, records)
            error = out.error or "unparseable judge reply"
        return Verdict(None, raw, prompt_hash, retries + 1, records, error)

    async def aclose(self) -> None:
        await close_model(self.model)


def as_client(model: Model | ModelClient | None, **kwargs: Any) -> ModelClient | None:
    """A client for a bare model (tests, tools that score outside a run); clients pass through."""
    if model is None or isinstance(model, ModelClient):
        return model
    return ModelClient(model, **kwargs)


def add_usage(output: Output, followups: Sequence[Output]) -> None:
    """Count follow-up turns in the sample's usage, so its cost and tokens cover every turn. Cached
    follow-ups count like a cached first turn: with the usage of the call they replay."""
    total = output.usage
    for f in followups:
        total = total + f.usage
    output.usage = total
