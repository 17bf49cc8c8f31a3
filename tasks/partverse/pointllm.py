"""The ``pointllm:DIR`` backend: PointLLM (Xu et al., ECCV 2024) answering with a point cloud.

``DIR`` is a PointLLM checkpoint folder as released (``RunsenXu/PointLLM_7B_v1.2``,
``PointLLM_13B_v1.2``, v1.1): config.json with PointLLM's keys, the Llama/Vicuna weights with
``model.point_backbone.*`` and ``model.point_proj.*``, and the tokenizer. It loads strictly
(pointllm_model.py): a key the checkpoint lacks or has extra, or a shape that differs, refuses the
folder in one line.

Per request, as PointLLM's eval scripts do: the ``points`` part's .npy is read and checked, then
``pc_norm`` (pointllm_cloud.py); the prompt is Vicuna v1.1 with the point tokens opening the user
turn (pointllm_prompt.py); the point features replace the patch tokens' embeddings; decoding is the
request's (greedy at temperature 0, else temperature / top-p / top-k sampled with the request's
seed), at most ``max_tokens`` new tokens and no further than the model's context (PointLLM's
``max_length`` of 2048 for prompt and reply), ending at ``</s>`` or a stop string; the reply is
stripped. A bad cloud or conversation fails that sample alone, with its kind (``points_shape``,
``points_nonfinite``, ..., ``input``, ``context_length``).

Settings (``-M``): ``dtype`` (auto: bfloat16 on a GPU that has it, as the reference runs, else
float32), ``device``, ``threads``, ``fps_start`` (where farthest-point sampling starts: ``random``,
the reference's uniformly drawn point, drawn here from the request's seed so a reply is
reproducible; ``farthest``, the point farthest from the centroid, which makes the reply independent
of the order of the points), ``top_k`` (sampling; the tasks' caption configs send 50).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.backend_settings import NonNegativeInt, PositiveInt, Setting
from harness.model import Backend
from harness.modelspec import ModelSpecError, validate_settings
from harness.registry import model
from harness.types import GenerationConfig, Output, Request, Usage

SETTINGS = {
    "dtype": Setting(Literal["auto", "float32", "bfloat16", "float16"], "auto",
                     "auto: bfloat16 on a GPU that has it (the reference's), else float32"),
    "device": Setting(str, "auto", "auto, cpu, cuda or cuda:N"),
    "threads": Setting(PositiveInt | None, None, "CPU threads (default: OMP_NUM_THREADS)"),
    "fps_start": Setting(Literal["random", "farthest"], "random",
                         "first farthest-point-sampling centre: random (drawn from the request's seed, as the "
                         "reference draws it) or farthest (from the centroid: independent of point order)"),
    "top_k": Setting(NonNegativeInt, 0, "sample from the k most likely tokens (0: all)"),
}
# what changes replies goes into the spec, hence into the response-cache key
_SPEC_KEYS = ("dtype", "fps_start", "top_k", "temperature", "top_p", "max_tokens", "seed", "stop")


class PointLLMError(ModelSpecError):
    """A ``pointllm:`` spec that cannot be served (one line)."""


@dataclass(slots=True)
class _Prepared:
    config: GenerationConfig
    prompt: str
    cloud: Any  # np.ndarray (N, C) normalised, or None for a text-only request


@dataclass
class PointLLMBackend(Backend):
    spec: str
    lm: Any  # pointllm_model.PointLLMForCausalLM
    tokenizer: Any
    device: str = "cpu"
    fps_start: str = "random"
    threads: int | None = None
    modalities: frozenset[str] = frozenset({"text", "points"})
    generation_extras: frozenset[str] = frozenset({"top_k"})
    load_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ---- the model's fixed parts -------------------------------------------------------------------
    @property
    def point_tokens(self) -> Any:
        from harness.tasks.partverse.pointllm_model import END_TOKEN, PATCH_TOKEN, START_TOKEN
        from harness.tasks.partverse.pointllm_prompt import PointTokens

        cfg = self.lm.config
        patch = getattr(cfg, "DEFAULT_POINT_PATCH_TOKEN", PATCH_TOKEN)
        n = self.lm.point_config.token_len
        if getattr(cfg, "mm_use_point_start_end", False):
            return PointTokens(patch, n, getattr(cfg, "DEFAULT_POINT_START_TOKEN", START_TOKEN),
                               getattr(cfg, "DEFAULT_POINT_END_TOKEN", END_TOKEN))
        return PointTokens(patch, n)

    @property
    def context_length(self) -> int:
        return int(getattr(self.lm.config, "max_position_embeddings", 2048) or 2048)

    # ---- requests --------------------------------------------------------------------------------
    def prepare(self, request: Request) -> _Prepared:
        from harness.tasks.partverse.pointllm_cloud import read_cloud
        from harness.tasks.partverse.pointllm_prompt import build_prompt

        prompt, part = build_prompt(request.messages, self.point_tokens)
        cloud = None
        if part is not None:
            pc = self.lm.point_config
            cloud = read_cloud(part.path or "", bool(getattr(self.lm.config, "use_color", False)),
                               max(pc.num_group, pc.group_size))
        return _Prepared(request.config, prompt, cloud)

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        from harness.tasks.partverse.pointllm_cloud import CloudInputError
        from harness.tasks.partverse.pointllm_prompt import PromptError

        outputs: list[Output] = []
        for request in requests:
            try:
                prepared = self.prepare(request)
            except CloudInputError as exc:
                outputs.append(Output(error=str(exc), details={"error_kind": exc.kind}))
                continue
            except PromptError as exc:
                outputs.append(Output(error=str(exc), details={"error_kind": "input"}))
                continue
            outputs.append(await asyncio.to_thread(self._generate_locked, prepared))
        return outputs

    def _generate_locked(self, p: _Prepared) -> Output:
        import torch

        with self._lock, torch.inference_mode():
            if self.threads and self.device == "cpu":
                torch.set_num_threads(self.threads)  # per worker thread: OpenMP's count does not carry over
            try:
                return self._generate(p)
            except _ContextError as exc:
                return Output(error=str(exc), details={"error_kind": "context_length"})
            except Exception as exc:  # a failed forward pass (out of memory, ...) fails this request only
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                return Output(error=f"{type(exc).__name__}: {first}", details={"error_kind": "model"})

    def fps_start_index(self, n_points: int, seed: int | None) -> Any:
        """The first FPS centre: the reference draws it uniformly; here from the request's seed."""
        import torch

        if self.fps_start == "farthest":
            return None  # pointbert.farthest_from_centroid
        generator = torch.Generator().manual_seed(int(seed) if seed is not None else 0)
        return torch.randint(0, n_points, (1,), generator=generator)

    def prompt_embeddings(self, prompt: str, cloud: Any, seed: int | None) -> tuple[Any, int]:
        """(1, L, hidden) input embeddings of a prompt with the cloud's features in place, and L."""
        import torch

        ids = self.tokenizer(prompt, return_tensors="pt").input_ids.to(self.lm.device)
        features = None
        if cloud is not None:
            tensor = torch.from_numpy(cloud)
            features = self.lm.point_features(tensor, self.fps_start_index(len(cloud), seed))
        patch_id = self.tokenizer.convert_tokens_to_ids(self.point_tokens.patch)
        return self.lm.embed_prompt(ids, features, patch_id), int(ids.shape[1])

    def _generate(self, p: _Prepared) -> Output:
        import torch
        from transformers import GenerationConfig as HFGenerationConfig
        from transformers import LogitsProcessorList

        from harness.models.hf_sampling import RowSampling, RowSelector

        t0 = time.perf_counter()
        embeds, n_prompt = self.prompt_embeddings(p.prompt, p.cloud, p.config.seed)
        room = self.context_length - n_prompt
        if room <= 0:
            raise _ContextError(f"the prompt is {n_prompt} tokens; the model's context is {self.context_length}")
        max_new = min(int(p.config.max_tokens), room)
        row = RowSampling(temperature=float(p.config.temperature or 0.0), top_p=float(p.config.top_p or 1.0),
                          top_k=int(p.config.extra.get("top_k") or 0), seed=p.config.seed)
        selector = RowSelector([row], record_logprobs=bool(p.config.logprobs))
        eos = self._eos_ids()
        stop = [s for s in p.config.stop if s]
        gen = HFGenerationConfig(max_new_tokens=max_new, do_sample=False, num_beams=1, eos_token_id=eos,
                                 pad_token_id=self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None
                                 else eos[0], stop_strings=stop or None)
        generated = self.lm.generate(
            inputs_embeds=embeds, attention_mask=torch.ones(embeds.shape[:2], dtype=torch.long, device=embeds.device),
            generation_config=gen, logits_processor=LogitsProcessorList([selector]),
            tokenizer=self.tokenizer if stop else None)
        tokens = generated[0].tolist()  # with inputs_embeds alone, generate returns the new tokens only
        # out of tokens: the request's max_tokens, or the model's context when that came first
        finish = "length" if max_new == int(p.config.max_tokens) else "context_length"
        for i, t in enumerate(tokens):
            if t in eos:
                tokens, finish = tokens[: i + 1], "stop"
                break
        text = self.decode(tokens)
        for s in [*stop, "</s>"]:  # the reference's stop keyword is Vicuna's separator "</s>"
            cut = text.find(s)
            if cut >= 0:
                text, finish = text[:cut], "stop"
        seconds = time.perf_counter() - t0
        out = Output(text=text.strip(), usage=Usage(input_tokens=n_prompt, output_tokens=len(tokens), calls=1,
                                                    seconds=seconds),
                     details={"finish_reason": finish, "max_new_tokens": max_new})
        if p.config.logprobs:
            out.logprobs = [{"token": self.tokenizer.decode([int(selector.chosen[i][0])]),
                             "id": int(selector.chosen[i][0]), "logprob": float(selector.logprobs[i][0])}
                            for i in range(min(len(tokens), len(selector.logprobs)))]
        return out

    def decode(self, tokens: list[int]) -> str:
        """The reply's text (special tokens left out)."""
        return str(self.tokenizer.decode(tokens, skip_special_tokens=True))

    def _eos_ids(self) -> list[int]:
        from harness.models.hf_sampling import eos_token_ids

        return eos_token_ids(self.lm, self.tokenizer)

    def close(self) -> None:
        self.lm = self.tokenizer = None


class _ContextError(Exception):
    pass


# ---- loading -----------------------------------------------------------------------------------------
def _device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise PointLLMError(f"pointllm: device {name!r} asked for but no CUDA GPU is visible")
    if name != "cpu" and not name.startswith("cuda"):
        raise PointLLMError(f"pointllm: device {name!r}: choose auto, cpu, cuda or cuda:N")
    return name


def _dtype(name: str, device: str) -> Any:
    import torch

    if name == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def runtime(settings: dict[str, Any]) -> tuple[str, Any, int | None]:
    """(device, torch dtype, CPU threads) of a point-LLM backend's settings; the threads are set for
    this thread now (on the CPU) and transformers' progress bars turned off."""
    import torch
    import transformers

    device = _device(str(settings.get("device", "auto")))
    dtype = _dtype(str(settings.get("dtype", "auto")), device)
    raw_threads = str(settings.get("threads") or os.environ.get("OMP_NUM_THREADS") or "")
    threads = int(raw_threads) if raw_threads.isdigit() and int(raw_threads) > 0 else None
    if threads and device == "cpu":
        torch.set_num_threads(threads)
    transformers.utils.logging.disable_progress_bar()
    return device, dtype, threads


def add_point_tokens(tokenizer: Any, lm: Any, label: str = "pointllm") -> None:
    """PointLLM's ``initialize_tokenizer_point_backbone_config_wo_embedding``: the point tokens added
    to the tokenizer (a no-op when it has them), which must then index rows of the checkpoint's
    embedding (the released ones have 32003: Vicuna's 32000 plus these three)."""
    from harness.tasks.partverse.pointllm_model import END_TOKEN, PATCH_TOKEN, START_TOKEN

    cfg = lm.config
    names = [getattr(cfg, "DEFAULT_POINT_PATCH_TOKEN", PATCH_TOKEN)]
    if getattr(cfg, "mm_use_point_start_end", False):
        names += [getattr(cfg, "DEFAULT_POINT_START_TOKEN", START_TOKEN),
                  getattr(cfg, "DEFAULT_POINT_END_TOKEN", END_TOKEN)]
    tokenizer.add_tokens(names, special_tokens=True)
    rows = lm.get_input_embeddings().weight.shape[0]
    for name in names:
        token_id = tokenizer.convert_tokens_to_ids(name)
        if token_id is None or token_id >= rows:
            raise PointLLMError(f"{label}: the tokenizer gives {name} id {token_id}, beyond the checkpoint's "
                                f"{rows} embedding rows (a tokenizer from another model?)")


def load_tokenizer(folder: Path, lm: Any, label: str) -> Any:
    """The checkpoint folder's tokenizer (PointLLMError naming ``label``); the point tokens are not added yet."""
    from transformers import AutoTokenizer

    try:
        # config given: else AutoTokenizer looks the unknown model type "pointllm" up and warns
        tokenizer = AutoTokenizer.from_pretrained(str(folder), config=lm.config)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PointLLMError(f"{label}: cannot load the tokenizer ({first})") from None
    return tokenizer


def spec_with(label: str, settings: dict[str, Any], keys: tuple[str, ...]) -> str:
    """``label`` plus the ``keys`` settings that change the replies, as the stored model spec."""
    keyed = [f"{k}={settings[k]}" for k in keys if k in settings and settings[k] is not None]
    return label + (f"?{'&'.join(keyed)}" if keyed else "")


def load(path: str, **settings: Any) -> PointLLMBackend:
    from harness.tasks.partverse.pointllm_model import PointLLMLoadError, load_strict

    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise PointLLMError(f"pointllm:{path}: no such checkpoint folder (PointLLM's weights are not fetched: "
                            "download e.g. RunsenXu/PointLLM_7B_v1.2 and give its folder)")
    device, dtype, threads = runtime(settings)
    t0 = time.perf_counter()
    try:
        lm = load_strict(folder, dtype, device)
    except PointLLMLoadError as exc:
        raise PointLLMError(f"pointllm:{path}: {str(exc).removeprefix(str(folder) + ': ')}") from None
    label = f"pointllm:{path}"
    tokenizer = load_tokenizer(folder, lm, label)
    add_point_tokens(tokenizer, lm)
    return PointLLMBackend(
        spec=spec_with(label, settings, _SPEC_KEYS), lm=lm, tokenizer=tokenizer, device=device,
        fps_start=str(settings.get("fps_start", "random")), threads=threads, load_seconds=time.perf_counter() - t0)


@model("pointllm", description="PointLLM on a point cloud: pointllm:DIR (a PointLLM checkpoint folder; "
                               "Point-BERT + projector + Vicuna, strict loading)", settings=SETTINGS, strict=True)
def pointllm(path: str | None = None, **settings: Any) -> PointLLMBackend:
    if not path:
        raise PointLLMError("pointllm needs a checkpoint folder: pointllm:DIR (e.g. a download of "
                            "RunsenXu/PointLLM_7B_v1.2)")
    settings = validate_settings("pointllm", settings, SETTINGS)  # a factory called directly is checked too
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise PointLLMError(f"pointllm needs torch and transformers ({exc.name} is missing): "
                            "pip install 'harness[hf]'") from None
    return load(path, **settings)
