"""PointLLM as a transformers model: LlamaForCausalLM with Point-BERT and a projector inside ``model``.

The module tree is the released one, so a PointLLM checkpoint folder loads by name with
``from_pretrained``: ``model.embed_tokens``, ``model.layers.*``, ``model.norm``, ``lm_head`` (the
LLM), ``model.point_backbone.*`` (pointbert.PointTransformer) and ``model.point_proj.*``.
:func:`load_strict` refuses any key the checkpoint lacks, any it has that the model does not, and
any shape that differs, in one line (transformers would only warn and initialise them at random).

How point features enter (PointLLM's ``PointLLMLlamaModel.forward``): the prompt holds
``point_token_len`` ``<point_patch>`` tokens (between ``<point_start>`` and ``<point_end>`` when
``mm_use_point_start_end``); their embeddings are replaced, in order, by the projected backbone
features. Here that happens once, before generation (:meth:`PointLLMForCausalLM.embed_prompt`),
and ``generate`` gets ``inputs_embeds``: the same computation as the reference's first step, whose
later steps only see generated tokens.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from pathlib import Path
from typing import Any, ClassVar

import torch
from transformers import LlamaConfig, LlamaForCausalLM, LlamaModel
from transformers.models.llama.modeling_llama import LlamaPreTrainedModel

from harness.tasks.partverse.pointbert import (
    BackboneConfigError,
    PointBertConfig,
    PointTransformer,
    build_projector,
)

PATCH_TOKEN, START_TOKEN, END_TOKEN = "<point_patch>", "<point_start>", "<point_end>"
# buffers that old checkpoints (transformers 4.28, which PointLLM saved with) store although they are
# recomputed from the config: the rotary frequencies. Not weights, so not a mismatch.
_DERIVED_SUFFIXES = ("rotary_emb.inv_freq",)


class PointLLMLoadError(ValueError):
    """A folder that is no loadable PointLLM checkpoint (the message is one line)."""


class PointLLMConfig(LlamaConfig):
    """LlamaConfig plus PointLLM's keys (``point_backbone``, ``point_backbone_config_name``,
    ``use_color``, ``mm_use_point_start_end``, ``DEFAULT_POINT_*_TOKEN``), kept as attributes."""

    model_type = "pointllm"


class PointLLMLlamaModel(LlamaModel):
    config_class = PointLLMConfig

    def __init__(self, config: PointLLMConfig) -> None:
        super().__init__(config)
        self.point_config = PointBertConfig.resolve(config)
        self.point_backbone = PointTransformer(self.point_config)
        self.point_proj = build_projector(self.point_config, config.hidden_size)


class PointLLMForCausalLM(LlamaForCausalLM):
    config_class = PointLLMConfig
    # the module under ``model``: a subclass adds its own parts there (3D-PLOT-LLM's markers)
    inner_model_class: ClassVar[type[PointLLMLlamaModel]] = PointLLMLlamaModel

    def __init__(self, config: PointLLMConfig) -> None:
        # LlamaForCausalLM.__init__ would build a plain LlamaModel first: set up as it does, with ours
        LlamaPreTrainedModel.__init__(self, config)
        self.model = self.inner_model_class(config)
        self.vocab_size = config.vocab_size
        self.lm_head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    @property
    def point_config(self) -> PointBertConfig:
        return self.model.point_config

    def point_features(self, cloud: torch.Tensor, start: torch.Tensor | None) -> torch.Tensor:
        """(N, C) normalised cloud -> (point_token_len, hidden) projected features, in the model's dtype."""
        param = next(self.model.point_backbone.parameters())  # the cloud goes where the backbone is
        points = cloud.to(device=param.device, dtype=param.dtype).unsqueeze(0)
        features = self.model.point_backbone(points, None if start is None else start.view(1))
        return self.model.point_proj(features)[0]

    def embed_prompt(self, input_ids: torch.Tensor, features: torch.Tensor | None, patch_id: int) -> torch.Tensor:
        """(1, L) ids -> (1, L, hidden) embeddings with the point-patch run replaced by ``features``."""
        embeds = self.model.embed_tokens(input_ids)
        positions = (input_ids[0] == patch_id).nonzero().flatten()
        if features is None:
            if len(positions):
                raise ValueError(f"the prompt holds {PATCH_TOKEN} tokens but no point cloud")
            return embeds
        n = features.shape[0]
        if len(positions) != n or (n and int(positions[-1] - positions[0]) != n - 1):
            raise ValueError(f"the prompt must hold one run of {n} {PATCH_TOKEN} tokens, found {len(positions)}")
        first = int(positions[0])
        features = features.to(device=embeds.device, dtype=embeds.dtype).unsqueeze(0)
        return torch.cat([embeds[:, :first], features, embeds[:, first + n:]], dim=1)


def read_config(folder: Path) -> PointLLMConfig:
    path = folder / "config.json"
    if not path.is_file():
        raise PointLLMLoadError(f"{folder}: no config.json (a PointLLM checkpoint folder has one)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PointLLMLoadError(f"{path}: not a JSON file ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise PointLLMLoadError(f"{path}: not a JSON object")
    if raw.get("model_type") != "pointllm":
        raise PointLLMLoadError(f"{path}: model_type {raw.get('model_type')!r} is not PointLLM's 'pointllm'")
    if "point_backbone" not in raw:
        raise PointLLMLoadError(f"{path}: no 'point_backbone' key: a Llama checkpoint without PointLLM's point encoder")
    raw = {k: v for k, v in raw.items() if k != "model_type"}
    try:
        config = PointLLMConfig(**raw)
        PointBertConfig.resolve(config)
    except (BackboneConfigError, TypeError, ValueError) as exc:
        raise PointLLMLoadError(f"{path}: {exc}") from None
    return config


def load_strict(folder: Path, dtype: torch.dtype, device: str, *,
                model_class: type[PointLLMForCausalLM] = PointLLMForCausalLM, config: PointLLMConfig | None = None,
                optional: Collection[str] = ()) -> PointLLMForCausalLM:
    """The checkpoint in ``folder`` with every key and shape matching the model built from its config
    (``config``: one already read and checked; ``optional``: keys whose absence is no mismatch)."""
    config = read_config(folder) if config is None else config
    quiet = logging.getLogger("transformers.modeling_utils")
    # its load report would print a table of keys; our refusal says it in one line. A filter, not a
    # level: a level of WARNING or above makes from_pretrained check a tensor-parallel plan and warn.
    hush = _BelowError()
    quiet.addFilter(hush)
    placement: dict[str, Any] = {"device_map": device} if device.startswith("cuda") else {}
    try:
        # with output_loading_info, from_pretrained returns (model, info)
        loaded: Any = model_class.from_pretrained(
            str(folder), config=config, dtype=dtype, output_loading_info=True, ignore_mismatched_sizes=True,
            **placement)
        model, info = loaded
    except (OSError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PointLLMLoadError(f"{folder}: cannot load the checkpoint ({first})") from None
    finally:
        quiet.removeFilter(hush)
    problems = _key_problems(info, frozenset(optional))
    if problems:
        raise PointLLMLoadError(f"{folder}: the checkpoint does not match its config.json: {problems}")
    if not device.startswith("cuda"):
        model = model.to(device)
    return model.eval()


class _BelowError(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


def _key_problems(info: dict[str, Any], optional: frozenset[str] = frozenset()) -> str:
    def listed(keys: list[str]) -> str:
        return ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")

    missing = sorted(k for k in info.get("missing_keys") or () if k not in optional)
    unexpected = sorted(k for k in info.get("unexpected_keys") or () if not k.endswith(_DERIVED_SUFFIXES))
    mismatched = sorted(info.get("mismatched_keys") or ())
    out = []
    if missing:
        out.append(f"{len(missing)} missing ({listed(missing)})")
    if unexpected:
        out.append(f"{len(unexpected)} unexpected ({listed(unexpected)})")
    if mismatched:
        out.append(f"{len(mismatched)} of another shape (" + listed(
            [f"{k} {tuple(a)} in the file vs {tuple(b)}" for k, a, b in mismatched]) + ")")
    return "; ".join(out)
