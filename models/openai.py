"""OpenAI-compatible API backend: ``openai:MODEL`` against OpenAI, vLLM's server, llama.cpp, ...

    harness eval --task gsm8k --model openai:gpt-4o-mini
    harness eval --task gsm8k --model openai:smollm2 -M base_url=http://127.0.0.1:8000/v1 -M concurrency=64

Settings (``-M key=value``):
  base_url          server root including ``/v1`` (default $OPENAI_BASE_URL, else OpenAI's)
  api_key_env       environment variable holding the key (default OPENAI_API_KEY; optional for
                    non-OpenAI servers). Keys are never taken as settings: settings are stored in the DB.
                    $OPENAI_ORG_ID and $OPENAI_PROJECT_ID are sent as the organisation and project
                    headers, as the ``openai`` SDK does.
  concurrency       most requests in flight (default 32). The runner's --concurrency sets how many
                    workers call the model; above this setting it is capped by it, so raise both.
  timeout           seconds per attempt (default 120)
  max_retries       retries after the first attempt on 408/409/429/5xx, time-outs, dropped
                    connections and unparseable bodies (default 5); back-off ``retry_base * 2**n``
                    capped at ``retry_max`` with jitter in [50%, 100%]; ``Retry-After`` /
                    ``retry-after-ms`` is honoured (capped at ``retry_after_max``).
  mode              ``chat`` (default) or ``completions``: where chat requests go (``completions``: a
                    text-only prompt rendered for non-chat servers)
  endpoint          ``chat`` (default): the server is asked chat requests only, and a task of another
                    request kind (loglikelihood, rolling, raw completion) is refused up front in one
                    line; ``completions``: the server also has ``/completions``, which then answers raw
                    completion requests (the prompt as written, no template) and loglikelihood and
                    rolling loglikelihood requests (echoed prompt logprobs, lm-eval's local-completions
                    protocol: models/openai_scoring.py says how and with which limits)
  tokenizer         scoring's token boundary: ``auto`` (default: the server's tokenize endpoint if it
                    has one, else text offsets), ``server``, ``hf:PATH`` (a local transformers
                    tokenizer, as the hf backend reads it) or ``none`` (text offsets)
  max_length        scoring's context length, as lm-eval's max_length (default: what the server
                    reports, else 2048); prefix_token (the token id an empty context and a rolling text
                    start from, when the tokenizer does not say); score_prompt ``text`` (default) or
                    ``tokens`` (send token ids). These need endpoint=completions.
  video_mode        ``frames`` (default: JPEG frames as image parts) or ``native`` (``video_url``)
  video_fps, video_max_frames, frame_max_side   frame sampling (defaults 1.0, 32, 768); a video part's
                    ``options`` (``fps``, ``max_frames``, ``max_side``) override them per part
  top_logprobs      alternatives per token when the request asks for logprobs (default 0)
  max_tokens_field  ``max_tokens`` (default) or ``max_completion_tokens`` (OpenAI reasoning models)
  price_in, price_out   $ per 1M input/output tokens (default: models/prices.yaml)
  modalities        what the server takes, e.g. ``[text,image]`` (default text, image, video, audio)
  headers           extra HTTP headers (dict)
  extra_body        more fields of the request body (dict), e.g. ``extra_body={'guided_choice': ['a', 'b']}``
Generation keys (temperature, max_tokens, ...) reach requests through the runner; the sampling keys
many servers take besides the API's own (``top_k``, ``min_p``, ``repetition_penalty``, ...,
``chat_template_kwargs``; ``harness models openai`` lists them) are sent in the request body (e.g.
``-M top_k=20`` for vLLM). Any other key is refused, naming the closest: a typo would otherwise be
sent to a server that may silently ignore it.

Transport, measured (bench/api_throughput.py: server sleeping 100 ms, 2 shared cores): the ``openai``
client on its default httpx transport spends 2.8-4.6 ms of client CPU per request and on its optional
aiohttp transport still ~1.9 ms (the SDK's own request machinery), which caps a 2-core machine at a
few hundred requests/s. So requests go out through one shared ``aiohttp`` session per event loop
(0.25-0.3 ms CPU per request, within 0.1 ms of a bare aiohttp loop; at 256 in flight 97% of that
loop's rate and 13.7x the SDK default), while the payloads are the SDK's typed params, replies are
validated into its ``ChatCompletion``/``Completion`` types and failures are its exception classes
(RateLimitError, APITimeoutError, ...), whose one-line text is what a failed sample stores.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from harness.backend_settings import NonNegativeFloat, NonNegativeInt, PositiveInt, Probability, Setting
from harness.client import GENERATION_KEYS
from harness.models import media
from harness.models.openai_errors import (  # noqa: F401 (re-exported: the stream and scoring paths use them)
    _httpx,
    _one_line,
    _proxy_for,
    error_kind,
    retry_after,
    status_error,
)
from harness.models.openai_reply import BadReply as _BadReply
from harness.models.openai_reply import chat_logprobs, completion_logprobs, parse_reply  # noqa: F401 (re-exported)
from harness.models.openai_request import (  # noqa: F401 (re-exported)
    _text_only,
    chat_messages,
    completion_prompt,
    reply_mode,
    request_body,
)
from harness.modelspec import ModelSpecError, validate_settings
from harness.registry import model
from harness.store import jsoncol
from harness.types import REQUEST_KINDS, SCORING_KINDS, Output, Request, Usage

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PRICES = Path(__file__).with_name("prices.yaml")
RETRY_STATUS = frozenset({408, 409, 429})
# settings of the scoring path (models/openai_scoring.py): they need endpoint=completions
SCORING_KEYS = ("tokenizer", "max_length", "prefix_token", "score_prompt")
ALL_MODALITIES = frozenset({"text", "image", "video", "audio"})


@dataclass
class OpenAISettings:
    model: str
    base_url: str = DEFAULT_BASE_URL
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 32
    timeout: float = 120.0
    max_retries: int = 5
    retry_base: float = 0.5
    retry_max: float = 30.0
    retry_after_max: float = 300.0
    mode: str = "chat"
    video_mode: str = "frames"
    video_fps: float | None = 1.0
    video_max_frames: int = 32
    frame_max_side: int | None = 768
    top_logprobs: int = 0
    max_tokens_field: str = "max_tokens"
    price_in: float | None = None
    price_out: float | None = None
    modalities: frozenset[str] = ALL_MODALITIES
    headers: dict[str, str] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)
    endpoint: str = "chat"
    tokenizer: str = "auto"
    max_length: int | None = None
    prefix_token: int | None = None
    score_prompt: str = "text"

    # settings that change what the server is sent, and so belong in the spec (the cache key); endpoint
    # does not (it only lets completion and scoring requests through), the scoring settings do
    REPLY_KEYS = ("mode", "video_mode", "video_fps", "video_max_frames", "frame_max_side", "top_logprobs",
                  "extra_body", *SCORING_KEYS)

    @staticmethod
    def parse(name: str, settings: dict[str, Any]) -> OpenAISettings:
        known = set(OpenAISettings.__dataclass_fields__) - {"model"}
        kwargs: dict[str, Any] = {}
        extra = dict(settings.get("extra_body") or {})
        for key, value in settings.items():
            if key in ("extra_body",) or key in GENERATION_KEYS:
                continue  # generation keys reach each request through the model client
            if key in ("api_key", "key"):
                raise ModelSpecError("openai: pass API keys through the environment (-M api_key_env=NAME), "
                                     "not as settings (settings are stored with the run)")
            if key in known:
                kwargs[key] = value
            elif value is not None:  # a server key given as None: the server's default
                extra[key] = value
        # the openai SDK's own conventions: $OPENAI_BASE_URL when no base_url is given (a run with
        # only that set must call that server, not api.openai.com), $OPENAI_ORG_ID / $OPENAI_PROJECT_ID
        # as the organisation and project headers unless headers already name them
        if "base_url" not in kwargs and os.environ.get("OPENAI_BASE_URL", "").strip():
            kwargs["base_url"] = os.environ["OPENAI_BASE_URL"].strip()
        headers = dict(kwargs.get("headers") or {})
        for env, header in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
            if os.environ.get(env, "").strip() and header.lower() not in {h.lower() for h in headers}:
                headers[header] = os.environ[env].strip()
        if headers:
            kwargs["headers"] = headers
        s = OpenAISettings(model=name, extra_body=extra, **kwargs)
        s.base_url = str(s.base_url).rstrip("/")
        if not s.base_url.startswith(("http://", "https://")):
            raise ModelSpecError(f"openai: base_url must start with http:// or https://, got {s.base_url!r}")
        s._check_scoring(kwargs)
        if isinstance(s.modalities, str):
            s.modalities = s.modalities.strip("[]").split(",")
        s.modalities = frozenset(str(m).strip() for m in s.modalities) | {"text"}
        if s.mode == "completions":
            s.modalities = frozenset({"text"})
        return s

    def _check_scoring(self, given: dict[str, Any]) -> None:
        """The endpoint and scoring settings, each refused in one line when it cannot work."""
        if self.endpoint not in ("chat", "completions"):
            raise ModelSpecError(f"openai: endpoint must be 'chat' or 'completions', not {self.endpoint!r}")
        misplaced = [k for k in SCORING_KEYS if k in given]
        if self.endpoint == "chat" and misplaced:
            raise ModelSpecError(f"openai: {misplaced[0]} is a setting of scoring requests, which need "
                                 "-M endpoint=completions")
        self.tokenizer = str(self.tokenizer).strip()
        if self.tokenizer not in ("auto", "server", "none") and not (self.tokenizer.startswith("hf:")
                                                                      and len(self.tokenizer) > 3):
            raise ModelSpecError(f"openai: tokenizer must be auto, server, none or hf:PATH, not {self.tokenizer!r}")
        if self.tokenizer.startswith("hf:") and self.tokenizer[3:].startswith((".", "/", "~")) \
                and not Path(self.tokenizer[3:]).expanduser().exists():
            raise ModelSpecError(f"openai: tokenizer={self.tokenizer}: no such directory")
        for key, low in (("max_length", 3), ("prefix_token", 0)):
            value = getattr(self, key)
            if value is None:
                continue
            try:
                number = int(value)
            except (TypeError, ValueError):
                number = low - 1
            if isinstance(value, bool) or number < low or str(number) != str(value).strip():
                raise ModelSpecError(f"openai: {key} must be an integer >= {low}, not {value!r}")
            setattr(self, key, number)
        if self.score_prompt not in ("text", "tokens"):
            raise ModelSpecError(f"openai: score_prompt must be 'text' or 'tokens', not {self.score_prompt!r}")
        if self.tokenizer == "none" and (self.score_prompt == "tokens" or self.prefix_token is not None):
            raise ModelSpecError("openai: score_prompt=tokens and prefix_token need token ids; tokenizer=none "
                                 "has none")

    def spec(self) -> str:
        out = f"openai:{self.model}"
        if self.base_url != DEFAULT_BASE_URL:
            out += f"@{self.base_url}"
        defaults = OpenAISettings(model=self.model)
        changed = [f"{k}={json.dumps(getattr(self, k), sort_keys=True)}" for k in self.REPLY_KEYS
                   if getattr(self, k) != getattr(defaults, k)]
        return out + ("?" + "&".join(changed) if changed else "")


# ---- prices ----------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def price_table() -> dict[str, tuple[float, float]]:
    import yaml

    data = yaml.safe_load(PRICES.read_text()) or {}
    return {str(k): (float(v["input"]), float(v["output"])) for k, v in (data.get("models") or {}).items()}


def lookup_price(model_name: str) -> tuple[float, float] | None:
    """$ per 1M (input, output) tokens: the exact name, else the longest listed prefix of it
    (so a dated snapshot ``gpt-4o-mini-2024-07-18`` takes ``gpt-4o-mini``'s price)."""
    table = price_table()
    if model_name in table:
        return table[model_name]
    prefixes = [k for k in table if model_name.startswith(k)]
    return table[max(prefixes, key=len)] if prefixes else None



# ---- the model -------------------------------------------------------------------------------------
@dataclass(slots=True)
class Posted:
    """What one POST with retries came to: the decoded 200 body, or the last failure and its status
    (0 when no HTTP answer came)."""

    data: Any = None
    error: Exception | None = None
    status: int = 0
    attempts: int = 0


class OpenAIModel:
    """Per-request API model; one shared aiohttp session and semaphore per event loop."""

    batch_size = 1
    cacheable = True

    def __init__(self, settings: OpenAISettings, api_key: str | None) -> None:
        self.settings = settings
        self.spec = settings.spec()
        # a chat server answers chat requests only: the runner then refuses a completion or scoring
        # task up front, in one line, instead of sending a chat reply where a loglikelihood is wanted
        self.request_kinds = frozenset(REQUEST_KINDS) if settings.endpoint == "completions" else frozenset({"chat"})
        self._scoring: Any = None
        self.concurrency = settings.concurrency
        self.modalities = frozenset(settings.modalities)
        price = (lookup_price(settings.model) if settings.price_in is None or settings.price_out is None
                 else None) or (0.0, 0.0)
        self.price_in = float(settings.price_in if settings.price_in is not None else price[0])
        self.price_out = float(settings.price_out if settings.price_out is not None else price[1])
        self._headers = {"Content-Type": "application/json", **settings.headers}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # import the HTTP stack and the SDK's types now, not inside the first timed request
        import aiohttp  # noqa: F401
        import openai  # noqa: F401
        from openai.types import Completion  # noqa: F401
        from openai.types.chat import ChatCompletion  # noqa: F401

        self._http: Any = None
        self._proxy: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limit: asyncio.Semaphore | None = None

    def _session(self) -> tuple[Any, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop or self._http.closed:
            import aiohttp

            connector = aiohttp.TCPConnector(limit=self.concurrency, ttl_dns_cache=300, keepalive_timeout=60)
            # trust_env=False: aiohttp would then look up proxies and netrc in a thread on every
            # request (two thread hops, ~0.1 ms); the proxy is resolved once instead (_proxy_for)
            self._http = aiohttp.ClientSession(
                connector=connector, headers=self._headers, trust_env=False,
                timeout=aiohttp.ClientTimeout(total=self.settings.timeout))
            self._proxy = _proxy_for(self.settings.base_url)
            self._loop = loop
            self._limit = asyncio.Semaphore(self.concurrency)
        assert self._limit is not None
        return self._http, self._limit

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        if len(requests) == 1:  # the runner's usual call: no task to spawn
            return [await self._generate_one(requests[0])]
        return list(await asyncio.gather(*(self._generate_one(r) for r in requests)))

    async def _body(self, request: Request) -> tuple[str, dict[str, Any]]:
        """The endpoint path and JSON body; frame decoding and base64 are CPU work, so a request with
        media is built off the event loop."""
        if any(not _text_only(m) for m in request.messages):
            return await asyncio.to_thread(request_body, request, self.settings)
        return request_body(request, self.settings)

    async def _generate_one(self, request: Request) -> Output:
        http, limit = self._session()
        if request.kind in SCORING_KINDS:
            if self._scoring is None:
                from harness.models.openai_scoring import Scoring

                self._scoring = Scoring(self)
            return await self._scoring.score(request, http, limit)  # it takes the limit per HTTP call
        async with limit:
            started = time.perf_counter()
            try:
                path, body = await self._body(request)
            except (media.MediaError, ValueError) as exc:
                return Output(error=f"input: {exc}", details={"error_kind": "input"})
            try:
                return await self._post_with_retries(http, path, body, started, reply_mode(request, self.settings))
            except Exception as exc:  # never fail the other requests of a batch over one
                return Output(error=_one_line(exc), usage=Usage(seconds=time.perf_counter() - started),
                              details={"error_kind": error_kind(exc)})

    async def _post_with_retries(self, http: Any, path: str, body: dict[str, Any], started: float,
                                 mode: str | None = None) -> Output:
        posted = await self.post_json(http, path, body)
        if posted.error is None:
            return self._output(posted.data, started, posted.attempts, mode or self.settings.mode)
        return Output(error=_one_line(posted.error), usage=Usage(seconds=time.perf_counter() - started),
                      details={"attempts": posted.attempts, "error_kind": error_kind(posted.error)})

    async def post_json(self, http: Any, path: str, body: dict[str, Any],
                        give_up: Callable[[int, Exception], bool] | None = None) -> Posted:
        """POST ``body`` with the retry policy (module docstring): the decoded 200 body, or the last
        failure. ``give_up(status, error)`` true stops retrying a status that would be retried (a 500
        that says what the server cannot do is not transient)."""
        import aiohttp
        import openai

        url = self.settings.base_url + path
        payload = jsoncol.dumps_utf8(body)
        error: Exception | None = None
        status = 0
        attempts = 0
        for attempt in range(self.settings.max_retries + 1):
            attempts = attempt + 1
            wait_hint: float | None = None
            status = 0
            try:
                async with http.post(url, data=payload, proxy=self._proxy) as resp:
                    status, raw = resp.status, await resp.read()
                    headers = resp.headers
            except TimeoutError:
                error, retryable = openai.APITimeoutError(request=_httpx().Request("POST", url)), True
            except aiohttp.ClientError as exc:
                error = openai.APIConnectionError(message=f"Connection error: {_one_line(exc)}",
                                                  request=_httpx().Request("POST", url))
                retryable = True
            else:
                if status == 200:
                    try:
                        data = jsoncol.loads(raw)
                    except ValueError:
                        error = openai.APIResponseValidationError(
                            _httpx().Response(200, content=raw, request=_httpx().Request("POST", url)), None,
                            message=f"reply is not valid JSON: {raw[:80]!r}")
                        retryable = True  # truncated bodies from proxies are usually transient
                    else:
                        return Posted(data=data, status=200, attempts=attempts)
                else:
                    error = status_error(url, status, dict(headers), raw)
                    retryable = status in RETRY_STATUS or status >= 500
                    if retryable and give_up is not None and give_up(status, error):
                        retryable = False
                    wait_hint = retry_after(headers)
            if not retryable or attempt == self.settings.max_retries:
                break
            await asyncio.sleep(self._backoff(attempt, wait_hint))
        assert error is not None
        return Posted(error=error, status=status, attempts=attempts)

    def _backoff(self, attempt: int, server_hint: float | None) -> float:
        if server_hint is not None:
            # honour the server, plus a little jitter so waiting clients do not return in lockstep
            return min(server_hint, self.settings.retry_after_max) * random.uniform(1.0, 1.1)
        cap = min(self.settings.retry_max, self.settings.retry_base * 2**attempt)
        return cap * random.uniform(0.5, 1.0)

    def _output(self, data: Any, started: float, attempts: int, mode: str) -> Output:
        seconds = time.perf_counter() - started
        try:
            text, logprobs, n_in, n_out, details = parse_reply(data, mode)
        except _BadReply as exc:
            return Output(error=f"APIResponseValidationError: {exc}", usage=Usage(seconds=seconds),
                          details={"attempts": attempts, "error_kind": "bad_response"})
        if attempts > 1:
            details["attempts"] = attempts
        cost = (n_in * self.price_in + n_out * self.price_out) / 1_000_000
        return Output(text=text, logprobs=logprobs, details=details,
                      usage=Usage(input_tokens=n_in, output_tokens=n_out, calls=1, seconds=seconds, cost=cost))

    # ---- streaming (the live arena) -----------------------------------------------------------------
    async def stream(self, request: Request) -> AsyncIterator[str | Output]:
        """The reply as server-sent events (``"stream": true``): text deltas as they arrive, then one
        Output with usage and cost (``stream_options.include_usage``; servers that ignore it leave
        the usage unreported). Retries as ``generate`` does, but only before the first delta: a
        reply cut off mid-way ends with an error Output, never a silently restarted text. A request
        of another kind than chat comes back whole (its text, if any, then its Output)."""
        if request.kind != "chat":
            (whole,) = await self.generate([request])
            if whole.text:
                yield whole.text
            yield whole
            return
        http, limit = self._session()
        async with limit:
            started = time.perf_counter()
            try:
                path, body = await self._body(request)
            except (media.MediaError, ValueError) as exc:
                yield Output(error=f"input: {exc}", details={"error_kind": "input"})
                return
            body = {**body, "stream": True, "stream_options": {"include_usage": True}}
            from harness.models.openai_stream import stream_with_retries

            try:
                async for item in stream_with_retries(self, http, path, body, started):
                    yield item
            except Exception as exc:
                yield Output(error=_one_line(exc), usage=Usage(seconds=time.perf_counter() - started),
                             details={"error_kind": error_kind(exc)})

    async def aclose(self) -> None:
        if self._http is not None and not self._http.closed:
            try:
                await self._http.close()
            except RuntimeError:  # session of a loop that is gone
                pass
        self._http = None


PositiveFloat = Annotated[float, Field(gt=0)]
# OpenAISettings' fields, typed. endpoint, tokenizer, score_prompt and prefix_token keep OpenAISettings'
# own checks too (their refusals' wording is matched; a call from Python bypasses the core's)
ADAPTER = {
    "base_url": Setting(str, DEFAULT_BASE_URL, "server root including /v1 (default: $OPENAI_BASE_URL, else OpenAI's)"),
    "api_key_env": Setting(str, "OPENAI_API_KEY", "environment variable holding the key (empty: none)"),
    "concurrency": Setting(PositiveInt, 32, "most requests in flight"),
    "timeout": Setting(PositiveFloat, 120.0, "seconds per attempt"),
    "max_retries": Setting(NonNegativeInt, 5, "retries after the first attempt (429/5xx, time-outs, bad bodies)"),
    "retry_base": Setting(NonNegativeFloat, 0.5, "back-off retry_base * 2**n seconds, with jitter"),
    "retry_max": Setting(NonNegativeFloat, 30.0, "longest back-off, seconds"),
    "retry_after_max": Setting(NonNegativeFloat, 300.0, "longest Retry-After honoured, seconds"),
    "mode": Setting(Literal["chat", "completions"], "chat", "where chat requests go (completions: a text-only "
                    "prompt rendered for non-chat servers)"),
    "video_mode": Setting(Literal["frames", "native"], "frames", "frames: JPEG frames as image parts; native: "
                          "video_url"),
    "video_fps": Setting(PositiveFloat | None, 1.0, "frames sampled per second of video"),
    "video_max_frames": Setting(PositiveInt, 32, "most frames per video"),
    "frame_max_side": Setting(PositiveInt | None, 768, "longest side of a frame, px"),
    "top_logprobs": Setting(NonNegativeInt, 0, "alternatives per token when a request asks for logprobs"),
    "max_tokens_field": Setting(Literal["max_tokens", "max_completion_tokens"], "max_tokens",
                                "the body field of the token limit (max_completion_tokens: OpenAI reasoning models)"),
    "price_in": Setting(NonNegativeFloat | None, None, "$ per 1M input tokens (default: models/prices.yaml)"),
    "price_out": Setting(NonNegativeFloat | None, None, "$ per 1M output tokens (default: models/prices.yaml)"),
    "modalities": Setting(list[str] | str, sorted(ALL_MODALITIES), "what the server takes, e.g. [text,image]"),
    "headers": Setting(dict[str, str], {}, "extra HTTP headers"),
    "extra_body": Setting(dict[str, Any], {}, "more fields of the request body"),
    "endpoint": Setting(str, "chat", "chat, or completions: the server also answers raw completions and "
                        "loglikelihood scoring through /completions"),
    "tokenizer": Setting(str, "auto", "scoring's token boundary: auto, server, none or hf:PATH"),
    "max_length": Setting(Annotated[int, Field(ge=3)] | None, None, "scoring's context length (default: the server's, "
                          "else 2048)"),
    "prefix_token": Setting(int | None, None, "token id an empty context and a rolling text start from (>= 0)"),
    "score_prompt": Setting(str, "text", "text or tokens (send token ids)"),
    # declared so that they are refused with the reason (keys are secrets; settings are stored with runs)
    "api_key": Setting(str | None, None, "refused: pass keys through the environment (api_key_env)"),
    "key": Setting(str | None, None, "refused: pass keys through the environment (api_key_env)"),
}
# sampling keys many OpenAI-compatible servers accept besides the API's own (sent in the body)
SERVER_SAMPLING = {
    "top_k": Setting(int | None, None, "sample from the k most likely tokens"),
    "min_p": Setting(Probability | None, None, "least probability relative to the most likely token"),
    "repetition_penalty": Setting(PositiveFloat | None, None, "penalty of tokens already in the prompt or reply"),
    "presence_penalty": Setting(float | None, None, "penalty of tokens already in the reply"),
    "frequency_penalty": Setting(float | None, None, "penalty by how often a token is already in the reply"),
    "logit_bias": Setting(dict[str, float] | None, None, "token id -> bias"),
    "response_format": Setting(dict[str, Any] | None, None, "e.g. {'type': 'json_object'}"),
    "min_tokens": Setting(NonNegativeInt | None, None, "fewest tokens before a stop"),
    "n": Setting(PositiveInt | None, None, "replies per request (the first is scored)"),
    "chat_template_kwargs": Setting(dict[str, Any] | None, None, "vLLM's server: chat template arguments, e.g. "
                                    "{'enable_thinking': False}"),
}
SERVER_SAMPLING_KEYS = tuple(SERVER_SAMPLING)
SETTINGS = {**ADAPTER, **SERVER_SAMPLING}


@model("openai", description="OpenAI-compatible chat/completions API: openai:MODEL -M base_url=... (any server; "
                             "-M endpoint=completions adds raw completions and loglikelihood scoring)",
       settings=SETTINGS, strict=True)
def openai_backend(path: str | None, **settings: Any) -> OpenAIModel:
    if not path:
        raise ModelSpecError("the openai backend needs a model name: openai:MODEL")
    settings = validate_settings("openai", settings, SETTINGS)  # a factory called directly is checked too
    s = OpenAISettings.parse(path, settings)
    key = os.environ.get(s.api_key_env) if s.api_key_env else None
    if not key and s.base_url == DEFAULT_BASE_URL:
        raise ModelSpecError(f"openai:{path} needs an API key in ${s.api_key_env} (or -M base_url=... for "
                         "a server without keys)")
    return OpenAIModel(s, key)
