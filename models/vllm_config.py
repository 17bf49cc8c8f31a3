"""``-M`` settings of the vLLM backends: which go to the adapter, to sampling, or to the engine.

:data:`SETTINGS` declares them, typed: the adapter's keys, the sampling keys, and the engine
arguments most runs use (``tensor_parallel_size``, ``dtype``, ``max_model_len``,
``gpu_memory_utilization``, ``enforce_eager``, ``limit_mm_per_prompt``, ``quantization``, ...), which go
to ``vllm.LLM(...)`` (and, in server mode, as ``--key-name value`` to the OpenAI server). Any other
engine argument vLLM knows goes in ``-M engine={...}`` (``engine={'swap_space': 8}``): vLLM's list
changes between versions, and an undeclared key at the top level is refused with the closest
declared names, never handed to an engine that may take a minute to say it does not know it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness.backend_settings import NonNegativeFloat, NonNegativeInt, PositiveInt, Probability, Setting
from harness.client import GENERATION_KEYS
from harness.models.vllm_inputs import SAMPLING_EXTRAS

# engine arguments that change speed or memory but not the replies: left out of the model spec so
# cached answers and comparisons carry over between hardware set-ups
RESOURCE_KEYS = (
    "tensor_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization", "enforce_eager",
    "swap_space", "cpu_offload_gb", "max_num_seqs", "max_num_batched_tokens", "distributed_executor_backend",
    "disable_log_stats", "allowed_local_media_path",
)
DEFAULT_ENGINE = {"allowed_local_media_path": "/", "disable_log_stats": True}
DEFAULT_BATCH_SIZE = 100_000  # the runner hands (nearly) everything to one call; vLLM schedules it
PositiveFloat = Annotated[float, Field(gt=0)]

# mode, dp, batch_size, concurrency and max_length keep parse_settings' checks (their wording is matched)
ADAPTER = {
    "mode": Setting(str, "inprocess", "inprocess (vllm.LLM in this process) or server (vLLM's OpenAI server)"),
    "dp": Setting(int, 1, "data-parallel replicas (Ray actors), each with tensor_parallel_size GPUs (>= 1)"),
    "batch_size": Setting(int, DEFAULT_BATCH_SIZE, "requests handed to one engine call (>= 1)"),
    "chat": Setting(bool, True, "false: plain prompts through generate(), for models without a chat template"),
    "chat_template": Setting(str | None, None, "a chat template, or a file holding one (default: the model's)"),
    "chat_template_kwargs": Setting(dict[str, Any] | None, None, "keyword arguments of the chat template"),
    "modalities": Setting(list[str] | str | None, None, "override the inputs read from the model, e.g. [text,image]"),
    "ray_address": Setting(str | None, None, "run the replicas on an existing Ray cluster (default: a local one)"),
    "gpus_per_replica": Setting(NonNegativeFloat | None, None, "Ray GPUs per replica (default: tensor_parallel_size; "
                                "0.5 puts two on one GPU)"),
    "server_timeout": Setting(PositiveFloat, 900.0, "server mode: seconds the server may take to start"),
    "server_python": Setting(str | None, None, "server mode: the interpreter running `vllm serve` (default: this one)"),
    "concurrency": Setting(int | None, None, "calls in flight (>= 1; default 1 in process, 64 in server mode)"),
    "top_logprobs": Setting(NonNegativeInt, 0, "alternatives per token with logprobs=true"),
    "max_length": Setting(int | None, None, "scoring window, as hf:'s (default: max_model_len - 2) and the context of "
                          "raw completions (default: max_model_len)"),
}
# SamplingParams defaults for every request (vllm_inputs.SAMPLING_EXTRAS); None: vLLM's own default
SAMPLING = {
    "top_k": Setting(int | None, None, "sample from the k most likely tokens"),
    "min_p": Setting(Probability | None, None, "least probability relative to the most likely token"),
    "repetition_penalty": Setting(PositiveFloat | None, None, "penalty of tokens already in the prompt or reply"),
    "presence_penalty": Setting(float | None, None, "penalty of tokens already in the reply"),
    "frequency_penalty": Setting(float | None, None, "penalty by how often a token is already in the reply"),
    "min_tokens": Setting(NonNegativeInt | None, None, "fewest tokens before a stop"),
    "ignore_eos": Setting(bool | None, None, "keep generating past the end-of-sequence token"),
    "stop_token_ids": Setting(list[int] | None, None, "token ids that stop generation"),
    "skip_special_tokens": Setting(bool | None, None, "leave special tokens out of the reply"),
    "include_stop_str_in_output": Setting(bool | None, None, "keep the stop string in the reply"),
}
# engine arguments most runs use (vllm.LLM / `vllm serve`); None: vLLM's own default
ENGINE = {
    "tensor_parallel_size": Setting(PositiveInt | None, None, "GPUs each replica shards the model over"),
    "pipeline_parallel_size": Setting(PositiveInt | None, None, "pipeline stages"),
    "dtype": Setting(str | None, None, "weights and activations: auto, half, float16, bfloat16, float32"),
    "max_model_len": Setting(PositiveInt | None, None, "context length (default: the model config's)"),
    "gpu_memory_utilization": Setting(Annotated[float, Field(gt=0, le=1)] | None, None,
                                      "share of GPU memory the engine takes"),
    "enforce_eager": Setting(bool | None, None, "no CUDA graphs"),
    "quantization": Setting(str | None, None, "quantisation method (awq, gptq, fp8, ...)"),
    "kv_cache_dtype": Setting(str | None, None, "KV cache dtype (auto, fp8, ...)"),
    "max_num_seqs": Setting(PositiveInt | None, None, "sequences per scheduler step"),
    "max_num_batched_tokens": Setting(PositiveInt | None, None, "tokens per scheduler step"),
    "swap_space": Setting(NonNegativeFloat | None, None, "CPU swap space per GPU, GiB"),
    "cpu_offload_gb": Setting(NonNegativeFloat | None, None, "weights offloaded to the CPU per GPU, GiB"),
    "enable_prefix_caching": Setting(bool | None, None, "reuse the KV cache of shared prompt prefixes"),
    "enable_chunked_prefill": Setting(bool | None, None, "split long prefills into chunks"),
    "distributed_executor_backend": Setting(str | None, None, "mp, ray or uni"),
    "trust_remote_code": Setting(bool | None, None, "run the model repository's own code"),
    "revision": Setting(str | None, None, "hub revision of the model"),
    "tokenizer": Setting(str | None, None, "another tokenizer (default: the model's)"),
    "tokenizer_mode": Setting(str | None, None, "auto, slow or mistral"),
    "download_dir": Setting(str | None, None, "where weights are downloaded"),
    "load_format": Setting(str | None, None, "weights format (auto, safetensors, gguf, ...)"),
    "max_logprobs": Setting(PositiveInt | None, None, "most logprobs a request may ask"),
    "limit_mm_per_prompt": Setting(dict[str, Any] | None, None, "most media items per prompt, e.g. {'image': 2}"),
    "mm_processor_kwargs": Setting(dict[str, Any] | None, None, "keyword arguments of the multimodal processor"),
    "media_io_kwargs": Setting(dict[str, Any] | None, None, "media loading, e.g. {'video': {'num_frames': 32}}"),
    "hf_overrides": Setting(dict[str, Any] | None, None, "overrides of the model's config"),
    "generation_config": Setting(str | None, None, "where sampling defaults come from (auto, vllm or a folder)"),
    "disable_log_stats": Setting(bool, DEFAULT_ENGINE["disable_log_stats"], "no periodic engine statistics"),
    "allowed_local_media_path": Setting(str, DEFAULT_ENGINE["allowed_local_media_path"],
                                        "where request media files may be read from"),
    "engine": Setting(dict[str, Any], {}, "any other engine argument vLLM knows, by name: {'swap_space': 8}"),
}
SETTINGS = {**ADAPTER, **SAMPLING, **ENGINE}


@dataclass
class VLLMSettings:
    path: str
    mode: str = "inprocess"
    dp: int = 1
    batch_size: int = DEFAULT_BATCH_SIZE
    chat: bool = True
    chat_kwargs: dict[str, Any] = field(default_factory=dict)
    modalities: list[str] | None = None
    ray_address: str | None = None
    gpus_per_replica: float | None = None
    server_timeout: float = 900.0
    server_python: str | None = None
    concurrency: int | None = None  # in-process default 1; server mode default 64
    max_length: int | None = None  # None: the largest window the engine takes (max_model_len - 2)
    sampling_defaults: dict[str, Any] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> str:
        """``vllm:PATH`` plus the settings that can change replies, sorted (the cache key's model part)."""
        keep = {k: v for k, v in {**self.engine, **self.sampling_defaults}.items()
                if k not in RESOURCE_KEYS and k not in DEFAULT_ENGINE}
        if not self.chat:
            keep["chat"] = False
        if self.max_length is not None:  # changes every scoring answer that needs truncating
            keep["max_length"] = self.max_length
        for key in ("chat_template", "chat_template_kwargs"):
            if key in self.chat_kwargs:
                keep[key] = self.chat_kwargs[key]
        query = "&".join(f"{k}={json.dumps(v, sort_keys=True) if not isinstance(v, str) else v}"
                         for k, v in sorted(keep.items()))
        return f"vllm:{self.path}" + (f"?{query}" if query else "")


def parse_settings(path: str | None, settings: dict[str, Any]) -> VLLMSettings:
    """The settings split between the adapter, sampling and the engine. Called directly (not through
    the registry, which refuses undeclared keys) any other key is an engine argument too."""
    if not path:
        raise ValueError("vllm needs a model: vllm:PATH_OR_HUB_ID")
    from harness.modelspec import validate_settings

    settings = validate_settings("vllm", settings, SETTINGS, strict=False)  # the declared keys typed
    out = VLLMSettings(path=path)
    engine = dict(DEFAULT_ENGINE)
    for key, value in settings.items():
        if key in GENERATION_KEYS:
            continue  # the model client puts these on each request
        if key in SAMPLING_EXTRAS:
            if value is not None:
                out.sampling_defaults[key] = value
        elif key == "top_logprobs":
            out.sampling_defaults[key] = value
        elif key == "mode":
            if value not in ("inprocess", "server"):
                raise ValueError(f"vllm: mode must be 'inprocess' or 'server', not {value!r}")
            out.mode = value
        elif key in ("dp", "batch_size", "concurrency"):
            if value is not None and value < 1:
                raise ValueError(f"vllm: {key} must be >= 1, not {value!r}")
            setattr(out, key, value)
        elif key == "chat":
            out.chat = value
        elif key in ("chat_template", "chat_template_kwargs"):
            if value is not None:
                out.chat_kwargs[key] = _read_template(value) if key == "chat_template" else value
        elif key == "modalities":
            out.modalities = [value] if isinstance(value, str) else value
        elif key in ("ray_address", "server_python", "server_timeout", "gpus_per_replica"):
            setattr(out, key, value)
        elif key == "max_length":
            out.max_length = None if value is None else _positive_int(value, key)
        elif key == "engine":
            engine.update(value)
        elif value is not None or key not in ENGINE:  # a declared engine key given as None: vLLM's default
            engine[key] = value
    out.engine = engine
    if out.max_length is not None and "max_model_len" in engine:
        # refused before an engine starts (a minute or more) when both are given
        check_window(out.max_length, _positive_int(engine["max_model_len"], "max_model_len"))
    return out


def _positive_int(value: Any, key: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"vllm: {key} must be a whole number, not {value!r}") from None
    if number < 1 or number != float(value):
        raise ValueError(f"vllm: {key} must be a whole number >= 1, not {value!r}")
    return number


def scoring_window(max_model_len: int, requested: int | None) -> int:
    """The scoring window (``max_length`` of :mod:`harness.loglikelihood`): the most tokens a scored
    position is conditioned on. A scored prompt is the window plus its last token, and vLLM refuses a
    prompt that leaves no room for one generated token, so the window is at most ``max_model_len - 2``
    (lm-eval's vLLM backend feeds the same: ``max_length - 1`` tokens, rolling windows of
    ``max_length - 2``)."""
    if requested is None:
        return check_window(max_model_len - 2, max_model_len)
    return check_window(requested, max_model_len)


def check_window(window: int, max_model_len: int) -> int:
    if window < 1 or window > max_model_len - 2:
        raise ValueError(f"vllm: max_length={window} does not fit max_model_len={max_model_len}: a scored prompt is "
                         f"max_length + 1 tokens plus one generated token, so max_length <= {max_model_len - 2}")
    return window


def _read_template(value: Any) -> str:
    """A chat template given as a file path is read; anything else is the template itself."""
    text = str(value)
    path = Path(text)
    if "{" not in text and path.is_file():
        return path.read_text()
    return text


def modalities_from_config(config: dict[str, Any]) -> set[str]:
    """Best guess of a model's inputs from its HF ``config.json`` (used before/without loading)."""
    found = {"text"}
    keys = set(config)
    thinker = config.get("thinker_config") or {}
    keys |= set(thinker)
    if keys & {"vision_config", "visual", "vision_tower", "mm_vision_tower", "image_token_index",
               "image_token_id"}:
        found |= {"image"}
    if keys & {"video_token_index", "video_token_id"} or "vision_config" in keys and "video" in json.dumps(config):
        found |= {"video"}
    if keys & {"audio_config", "audio_token_index", "audio_token_id"}:
        found |= {"audio"}
    return found


def local_config(path: str) -> dict[str, Any] | None:
    file = Path(path).expanduser() / "config.json"
    if file.is_file():
        return json.loads(file.read_text())
    return None
