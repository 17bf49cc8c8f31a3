"""``-M`` settings of the vLLM backends: which go to the adapter, to sampling, or to the engine.

Everything not listed here as an adapter or sampling key is passed to ``vllm.LLM(...)`` (and, in
server mode, as ``--key-name value`` to the OpenAI server), so any engine argument vLLM knows
(``tensor_parallel_size``, ``dtype``, ``max_model_len``, ``gpu_memory_utilization``,
``enforce_eager``, ``limit_mm_per_prompt``, ``quantization``, ...) works without a change here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.client import GENERATION_KEYS
from harness.models.vllm_inputs import SAMPLING_EXTRAS

ADAPTER_KEYS = (
    "mode",  # "inprocess" (default) or "server"
    "dp",  # data-parallel replicas (Ray actors), each with tensor_parallel_size devices
    "batch_size",  # requests handed to one engine call by the runner
    "chat",  # False: plain-text prompts through generate() for models without a chat template
    "chat_template", "chat_template_kwargs",
    "modalities",  # override what the model is declared to take
    "ray_address",  # join an existing Ray cluster (multi-node); default: start a local one
    "gpus_per_replica",  # Ray GPUs per replica (default tensor_parallel_size; 0.5 packs two on one GPU)
    "server_timeout", "server_python", "concurrency",  # managed-server mode
    "top_logprobs",
    "max_length",  # the scoring window (tokens a scored position sees), as hf:'s; default max_model_len - 2
)
# engine arguments that change speed or memory but not the replies: left out of the model spec so
# cached answers and comparisons carry over between hardware set-ups
RESOURCE_KEYS = (
    "tensor_parallel_size", "pipeline_parallel_size", "gpu_memory_utilization", "enforce_eager",
    "swap_space", "cpu_offload_gb", "max_num_seqs", "max_num_batched_tokens", "distributed_executor_backend",
    "disable_log_stats", "allowed_local_media_path",
)
DEFAULT_ENGINE = {"allowed_local_media_path": "/", "disable_log_stats": True}
DEFAULT_BATCH_SIZE = 100_000  # the runner hands (nearly) everything to one call; vLLM schedules it


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
    if not path:
        raise ValueError("vllm needs a model: vllm:PATH_OR_HUB_ID")
    out = VLLMSettings(path=path)
    engine = dict(DEFAULT_ENGINE)
    for key, value in settings.items():
        if key in GENERATION_KEYS:
            continue  # the model client puts these on each request
        if key in SAMPLING_EXTRAS:
            out.sampling_defaults[key] = value
        elif key == "top_logprobs":
            out.sampling_defaults[key] = int(value)
        elif key == "mode":
            if value not in ("inprocess", "server"):
                raise ValueError(f"vllm: mode must be 'inprocess' or 'server', not {value!r}")
            out.mode = value
        elif key in ("dp", "batch_size", "concurrency"):
            if int(value) < 1:
                raise ValueError(f"vllm: {key} must be >= 1, not {value!r}")
            setattr(out, key, int(value))
        elif key == "chat":
            out.chat = bool(value)
        elif key in ("chat_template", "chat_template_kwargs"):
            out.chat_kwargs[key] = _read_template(value) if key == "chat_template" else dict(value)
        elif key == "modalities":
            out.modalities = [value] if isinstance(value, str) else list(value)
        elif key in ("ray_address", "server_python"):
            setattr(out, key, str(value))
        elif key == "server_timeout":
            out.server_timeout = float(value)
        elif key == "gpus_per_replica":
            out.gpus_per_replica = float(value)
        elif key == "max_length":
            out.max_length = _positive_int(value, key)
        else:
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
