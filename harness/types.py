"""Core value types shared by tasks, models, the runner and the store.

Everything here is a plain dataclass that round-trips through JSON (``to_dict``/``from_dict``),
because every one of these objects ends up in a database row or a cache entry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

PartType = Literal["text", "image", "video", "audio", "points", "mesh"]
MEDIA_TYPES: tuple[str, ...] = ("image", "video", "audio", "points", "mesh")


@dataclass(slots=True)
class Part:
    """One piece of a message: text, or a media file (image, video, audio, point cloud, mesh).

    ``path`` is a local file path (or URL for API backends that accept one); ``options`` carries
    per-part hints such as ``{"fps": 1, "max_frames": 32}`` for video.
    """

    type: PartType
    text: str | None = None
    path: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.text is not None:
            out["text"] = self.text
        if self.path is not None:
            out["path"] = self.path
        if self.options:
            out["options"] = self.options
        return out

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Part:
        return Part(d["type"], d.get("text"), d.get("path"), dict(d.get("options") or {}))


@dataclass(slots=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: list[Part]

    @staticmethod
    def text(role: Literal["system", "user", "assistant"], text: str) -> Message:
        return Message(role, [Part("text", text)])

    @property
    def text_content(self) -> str:
        return "".join(p.text or "" for p in self.content if p.type == "text")

    @property
    def modalities(self) -> set[str]:
        return {p.type for p in self.content}

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": [p.to_dict() for p in self.content]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Message:
        content = d["content"]
        if isinstance(content, str):  # accept the common OpenAI shorthand
            return Message(d["role"], [Part("text", content)])
        return Message(d["role"], [Part.from_dict(p) for p in content])


@dataclass(slots=True)
class Sample:
    """One evaluation item. ``id`` is stable across runs: resume and paired comparison key on it."""

    id: str
    messages: list[Message]
    target: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def modalities(self) -> set[str]:
        out: set[str] = set()
        for m in self.messages:
            out |= m.modalities
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "messages": [m.to_dict() for m in self.messages],
            "target": self.target,
            "metadata": self.metadata,
        }


@dataclass(slots=True)
class GenerationConfig:
    """Sampling settings; ``extra`` passes backend-specific keys through untouched."""

    temperature: float = 0.0
    max_tokens: int = 256
    top_p: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    logprobs: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def merged(self, overrides: dict[str, Any]) -> GenerationConfig:
        """A copy with known keys replaced and unknown keys moved into ``extra``."""
        known = {k: v for k, v in overrides.items() if k in _GEN_FIELDS and k != "extra"}
        unknown = {k: v for k, v in overrides.items() if k not in _GEN_FIELDS}
        # dataclasses.replace, not asdict: asdict deep-copies every field and dominated the runner's
        # per-request cost
        stop = known.pop("stop", self.stop)
        return replace(self, **known, extra={**self.extra, **unknown} if unknown else dict(self.extra),
                       stop=[stop] if isinstance(stop, str) else list(stop or []))

    def to_dict(self) -> dict[str, Any]:
        if self.extra:  # arbitrary values: asdict's deep conversion
            return asdict(self)
        # by hand otherwise: asdict deep-copies field by field, most of a request's hashing cost
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "top_p": self.top_p,
                "seed": self.seed, "stop": list(self.stop), "logprobs": self.logprobs, "extra": {}}


_GEN_FIELDS = set(GenerationConfig.__dataclass_fields__)


# What a request asks. ``chat``: a reply to the conversation (the backend applies its chat template);
# ``completion``: a continuation of ``prompt`` taken as raw text (no template: lm-eval's generate_until
# on a base-model prompt); ``loglikelihood``: for each (context, continuation) of ``pairs``, the summed
# log-probability of the continuation's tokens after the context and whether greedy decoding would have
# produced exactly them; ``loglikelihood_rolling``: for each of ``texts``, the log-probability of the
# whole text (perplexity), scored in disjoint windows of the model's context length.
RequestKind = Literal["chat", "completion", "loglikelihood", "loglikelihood_rolling"]
REQUEST_KINDS: tuple[str, ...] = ("chat", "completion", "loglikelihood", "loglikelihood_rolling")
SCORING_KINDS: frozenset[str] = frozenset({"loglikelihood", "loglikelihood_rolling"})


@dataclass(slots=True)
class Request:
    """What a model is asked: a conversation plus generation settings (``kind`` ``chat``, the default),
    a raw prompt to continue (``completion``), or text to score (``loglikelihood`` pairs,
    ``loglikelihood_rolling`` texts); see :data:`RequestKind`."""

    messages: list[Message]
    config: GenerationConfig = field(default_factory=GenerationConfig)
    sample_id: str = ""
    epoch: int = 0
    kind: RequestKind = "chat"
    prompt: str = ""
    pairs: list[tuple[str, str]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    @staticmethod
    def completion(prompt: str, config: GenerationConfig | None = None) -> Request:
        return Request([Message.text("user", prompt)], config or GenerationConfig(), kind="completion",
                       prompt=prompt)

    @staticmethod
    def loglikelihood(pairs: Sequence[tuple[str, str]]) -> Request:
        """One request for all of a sample's (context, continuation) pairs (a question's choices), so
        the sample is one row and the backend batches the pairs of many samples together."""
        if not pairs:
            raise ValueError("a loglikelihood request needs at least one (context, continuation) pair")
        pairs = [(str(c), str(x)) for c, x in pairs]
        if any(not x for _c, x in pairs):
            raise ValueError("a loglikelihood continuation is empty: there is nothing to score")
        return Request([Message.text("user", pairs[0][0])], kind="loglikelihood", pairs=pairs)

    @staticmethod
    def rolling(texts: Sequence[str]) -> Request:
        if not texts:
            raise ValueError("a rolling loglikelihood request needs at least one text")
        texts = [str(t) for t in texts]
        return Request([Message.text("user", texts[0])], kind="loglikelihood_rolling", texts=texts)

    def to_dict(self) -> dict[str, Any]:
        if self.kind == "chat":  # the shape every cache key of a chat request has always had
            return {"messages": [m.to_dict() for m in self.messages], "config": self.config.to_dict()}
        if self.kind == "completion":
            return {"kind": self.kind, "prompt": self.prompt, "config": self.config.to_dict()}
        # scoring requests: no sampling settings (a seed or temperature changes nothing), so the same
        # text scored in another run or epoch is one cache entry
        if self.kind == "loglikelihood":
            return {"kind": self.kind, "pairs": [[c, x] for c, x in self.pairs]}
        return {"kind": self.kind, "texts": list(self.texts)}

    def fingerprint(self) -> str:
        """Hash of what determines the reply (not the sample id): the cache and input-hash key."""
        return stable_hash(self.to_dict())


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    seconds: float = 0.0
    cost: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.calls + other.calls,
            self.seconds + other.seconds,
            self.cost + other.cost,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any] | None) -> Usage:
        return Usage(**d) if d else Usage()


@dataclass(frozen=True, slots=True)
class Loglikelihood:
    """One scored continuation: the summed log-probability (natural log) of its tokens, whether greedy
    decoding reproduces every one of them, and how many tokens were scored."""

    logprob: float
    greedy: bool
    tokens: int

    def to_list(self) -> list[Any]:
        return [self.logprob, self.greedy, self.tokens]

    @staticmethod
    def from_any(value: Any) -> Loglikelihood:
        if isinstance(value, Loglikelihood):
            return value
        if isinstance(value, dict):
            return Loglikelihood(float(value["logprob"]), bool(value["greedy"]), int(value["tokens"]))
        logprob, greedy, tokens = value
        return Loglikelihood(float(logprob), bool(greedy), int(tokens))


@dataclass(slots=True)
class Output:
    """A model's reply. ``error`` set means the call failed; the sample is stored with it."""

    text: str = ""
    prediction: Any = None  # structured prediction (scene graph, class id, mesh path, ...)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    logprobs: list[dict[str, Any]] | None = None
    cached: bool = False
    details: dict[str, Any] = field(default_factory=dict)  # e.g. operator traces, raw replies
    # a scoring request's answer: one per pair (loglikelihood) or text (rolling), in order
    loglikelihoods: list[Loglikelihood] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "text": self.text,
            "prediction": self.prediction,
            "usage": self.usage.to_dict(),
            "error": self.error,
            "logprobs": self.logprobs,
            "details": self.details,
        }
        if self.loglikelihoods is not None:
            out["loglikelihoods"] = [ll.to_list() for ll in self.loglikelihoods]
        return out

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Output:
        return Output(
            text=d.get("text", ""),
            prediction=d.get("prediction"),
            usage=Usage.from_dict(d.get("usage")),
            error=d.get("error"),
            logprobs=d.get("logprobs"),
            details=d.get("details") or {},
            loglikelihoods=[Loglikelihood.from_any(v) for v in d["loglikelihoods"]]
            if d.get("loglikelihoods") is not None else None,
        )


@dataclass(slots=True)
class JudgementRecord:
    """One judge attempt: stored as a row of ``judgements`` and shown on the sample's page."""

    judge_spec: str
    prompt_hash: str
    raw: str
    verdict: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"judge_spec": self.judge_spec, "prompt_hash": self.prompt_hash, "raw": self.raw,
                "verdict": self.verdict}


@dataclass(slots=True)
class Score:
    """Named values for one sample. ``unscored`` (with a reason) is not the same as 0: the sample
    is left out of the metric's mean and counted separately."""

    values: dict[str, float] = field(default_factory=dict)
    explanation: str = ""
    answer: str | None = None  # the extracted answer the values were computed on
    unscored: str | None = None
    details: dict[str, Any] = field(default_factory=dict)  # per-criterion marks, scorer traces
    judgements: list[JudgementRecord] = field(default_factory=list)  # every judge attempt (harness.judge.attach)

    @staticmethod
    def not_scored(reason: str, **details: Any) -> Score:
        return Score(unscored=reason, details=dict(details))


Direction = Literal["higher", "lower"]
Scale = Literal["fraction", "percent", "raw"]


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """What a task declares about one metric, so nothing downstream guesses from its name.

    ``direction``: ``"higher"`` or ``"lower"`` is better, ``None`` when neither (a count, a cost
    reported for information): such a metric is shown but never ranked. ``scale``: ``"fraction"``
    (0..1), ``"percent"`` (0..100) or ``"raw"`` (unbounded); charts take their axes from it and
    cross-task aggregates never mix scales. ``display``: the human name on pages and tables."""

    direction: Direction | None = "higher"
    scale: Scale = "fraction"
    display: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"direction": self.direction, "scale": self.scale, "display": self.display}

    @staticmethod
    def from_dict(d: dict[str, Any] | None) -> MetricInfo:
        d = d or {}
        return MetricInfo(d.get("direction"), d.get("scale", "raw"), d.get("display", ""))


def higher(display: str = "", scale: Scale = "fraction") -> MetricInfo:
    return MetricInfo("higher", scale, display)


def lower(display: str = "", scale: Scale = "raw") -> MetricInfo:
    return MetricInfo("lower", scale, display)


def neutral(display: str = "", scale: Scale = "raw") -> MetricInfo:
    return MetricInfo(None, scale, display)


@dataclass(slots=True)
class Metric:
    """One aggregate number with its uncertainty; breakdown rows carry a key and value."""

    name: str
    value: float
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    breakdown_key: str = ""
    breakdown_value: str = ""


@dataclass(slots=True)
class SampleRecord:
    """A finished sample as the aggregator sees it (also rebuilt from stored rows). A value type here,
    below both the task protocol (whose ``aggregate`` takes them) and the store (which rebuilds them),
    so that neither imports the other for it; :mod:`harness.task` re-exports it."""

    sample_id: str
    epoch: int
    scores: dict[str, float]
    unscored: str | None
    error: str | None
    metadata: dict[str, Any]
    cost: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


# json.dumps with these options builds an encoder per call; one built once encodes the same text
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def options_part(messages: Sequence[Message], key: str, what: str) -> dict[str, Any]:
    """The options of the first content part that carries ``key``: how method tasks hand a structured
    problem (a stream, a decision problem, a feature vector) to their backends. ``what`` names it in
    the error when no part carries one."""
    for m in messages:
        for part in m.content:
            if part.options and key in part.options:
                return part.options
    raise ValueError(f"{what} (options[{key!r}])")


def stable_hash(obj: Any) -> str:
    """sha256 of canonical JSON; dict order never changes the key."""
    data = _CANONICAL.encode(obj)
    # surrogatepass: a lone surrogate in a reply or input must hash (deterministically), not raise
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()
