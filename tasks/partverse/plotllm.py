"""The ``plotllm:DIR`` backend: 3D-PLOT-LLM (Xue et al., NeurIPS 2026) answering with part-level tokens.

``DIR`` is a 3D-PLOT-LLM checkpoint folder as its training script saves it (the released
``jintangx/3D-PLOT-LLM-7B``): PointLLM's config.json (``model_type: pointllm``) plus the ``bcp_*``
keys of the Stage 2 run (``bcp_part_vocab_token``, ``bcp_part_interleave``, ``bcp_part_marker``,
``bcp_part_no_mean``, ``bcp_marker_context_mode``, ``bcp_num_groups``), the weights (PointLLM's
plus ``model.part_marker(s)``, the MSR modules and scalars: plotllm_model.py) and the tokenizer
with ``<part_0>..<part_{K-1}>``. Loading is strict: a key the checkpoint lacks or has extra, or a
shape that differs, refuses the folder in one line; only parameters the layout never reads (the
unused marker, the vocabulary-side scalars) may be absent. A PointLLM folder, a Stage 1 folder or a
variant with switches the released model leaves off is refused in one line too.

Per request, as the released ``eval_partverse_*.py`` scripts do: the ``points`` part must name its
object's partition pack (``options["pack"]``, set by the tasks' ``packs_dir``); a request without
one fails as ``pack_missing``. The pack gives the region labels, adjacency and statistics
(plotllm_pack.py) and the Point-BERT features; where it has no features, the cloud is read and
checked as PointLLM's (pointllm_cloud.py) and the checkpoint's Point-BERT runs around the pack's
patch centres. The prompt is PointLLM's Vicuna v1.1 prompt (pointllm_prompt.py) with
``point_token_len`` patch tokens (545 for the released model: cls, 16 x (``<part_g>``, marker),
512 patches), which the part-token sequence replaces. Decoding is PointLLM's backend's; the reply
keeps the ``<part_k>`` tokens (the reference decodes with special tokens kept, and C2S is scored
on them), leaving out only ``</s>``-like special tokens and the point tokens.

Settings (``-M``): ``dtype``, ``device``, ``threads``, ``top_k`` as for ``pointllm:``. There is no
``fps_start``: the patch centres come from the pack, so the reply does not depend on a draw.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.modelspec import ModelSpecError, validate_settings
from harness.registry import model
from harness.tasks.partverse.pointllm import SETTINGS as POINTLLM_SETTINGS
from harness.tasks.partverse.pointllm import PointLLMBackend, _Prepared
from harness.types import Request

SETTINGS = {k: v for k, v in POINTLLM_SETTINGS.items() if k != "fps_start"}
_SPEC_KEYS = ("dtype", "top_k", "temperature", "top_p", "max_tokens", "seed", "stop")


class PlotLLMError(ModelSpecError):
    """A ``plotllm:`` spec that cannot be served (one line)."""


@dataclass(frozen=True, slots=True)
class PartInputs:
    pack: Any  # plotllm_pack.PartPack
    cloud: Any  # (N, C) normalised cloud when the pack has no features, else None


@dataclass
class PlotLLMBackend(PointLLMBackend):
    part_ids: tuple[int, ...] = ()

    @property
    def point_tokens(self) -> Any:
        from harness.tasks.partverse.pointllm_prompt import PointTokens

        tokens = super().point_tokens
        return PointTokens(tokens.patch, self.lm.point_token_len, tokens.start, tokens.end)

    def prepare(self, request: Request) -> _Prepared:
        from harness.tasks.partverse.plotllm_pack import read_pack
        from harness.tasks.partverse.pointllm_cloud import CloudInputError, read_cloud
        from harness.tasks.partverse.pointllm_prompt import build_prompt

        prompt, part = build_prompt(request.messages, self.point_tokens)
        if part is None:
            return _Prepared(request.config, prompt, None)
        pack_path = part.options.get("pack")
        if not pack_path:
            raise CloudInputError("pack_missing", f"point cloud {part.path}: no partition pack for it (3D-PLOT-LLM's "
                                                  "part tokens come from <oid>.pack.npz: give -T packs_dir=...)")
        pc = self.lm.point_config
        pack = read_pack(str(pack_path), self.lm.layout.num_groups, pc.num_group, pc.output_dim)
        cloud = None
        if not pack.has_features:
            cloud = read_cloud(part.path or "", bool(getattr(self.lm.config, "use_color", False)),
                               max(pc.num_group, pc.group_size))
        return _Prepared(request.config, prompt, PartInputs(pack, cloud))

    def part_features(self, inputs: PartInputs) -> Any:
        """(point_token_len, hidden) features of one object's pack (and cloud)."""
        import torch

        pack = inputs.pack
        if pack.has_features:
            cls_feat, patch_feat = torch.from_numpy(pack.cls_feat), torch.from_numpy(pack.patch_feat)
        else:
            both = self.lm.backbone_features(torch.from_numpy(inputs.cloud), torch.from_numpy(pack.patch_xyz))
            cls_feat, patch_feat = both[0], both[1:]
        return self.lm.part_features(cls_feat, patch_feat, torch.from_numpy(pack.group_ids),
                                     torch.from_numpy(pack.adjacency), torch.from_numpy(pack.stats),
                                     torch.tensor(self.part_ids, dtype=torch.long))

    def prompt_embeddings(self, prompt: str, cloud: Any, seed: int | None) -> tuple[Any, int]:
        ids = self.tokenizer(prompt, return_tensors="pt").input_ids.to(self.lm.device)
        features = None if cloud is None else self.part_features(cloud)
        patch_id = self.tokenizer.convert_tokens_to_ids(self.point_tokens.patch)
        return self.lm.embed_prompt(ids, features, patch_id), int(ids.shape[1])

    def decode(self, tokens: list[int]) -> str:
        tok = self.tokenizer
        pt = self.point_tokens
        drop = set(tok.all_special_ids) | {tok.convert_tokens_to_ids(n) for n in (pt.patch, pt.start, pt.end) if n}
        drop -= set(self.part_ids)
        return str(tok.decode([t for t in tokens if t not in drop], skip_special_tokens=False))


# ---- loading -----------------------------------------------------------------------------------------
def part_token_names(num_groups: int) -> list[str]:
    return [f"<part_{g}>" for g in range(num_groups)]


def add_part_tokens(tokenizer: Any, lm: Any, label: str) -> tuple[int, ...]:
    """The reference's Stage 2 ``<part_g>`` tokens (a no-op when the tokenizer has them), each one id
    within the checkpoint's embedding."""
    names = part_token_names(lm.layout.num_groups)
    tokenizer.add_tokens(names, special_tokens=True)
    rows = lm.get_input_embeddings().weight.shape[0]
    ids = tuple(int(tokenizer.convert_tokens_to_ids(n)) for n in names)
    for name, token_id in zip(names, ids, strict=True):
        if token_id >= rows:
            raise PlotLLMError(f"{label}: the tokenizer gives {name} id {token_id}, beyond the checkpoint's {rows} "
                               "embedding rows (a tokenizer from another model?)")
    if len(set(ids)) != len(ids):
        raise PlotLLMError(f"{label}: the tokenizer maps two <part_k> tokens to one id")
    return ids


def load(path: str, **settings: Any) -> PlotLLMBackend:
    from harness.tasks.partverse.plotllm_model import PartLayout, PlotLLMForCausalLM
    from harness.tasks.partverse.pointllm import PointLLMError, add_point_tokens, load_tokenizer, runtime, spec_with
    from harness.tasks.partverse.pointllm_model import PointLLMLoadError, load_strict, read_config

    label = f"plotllm:{path}"
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise PlotLLMError(f"{label}: no such checkpoint folder (3D-PLOT-LLM's weights are not fetched: download "
                           "jintangx/3D-PLOT-LLM-7B and give its folder)")
    try:
        device, dtype, threads = runtime(settings)
    except PointLLMError as exc:
        raise PlotLLMError(str(exc).replace("pointllm:", "plotllm:", 1)) from None
    t0 = time.perf_counter()
    try:
        config = read_config(folder)
        layout = PartLayout.from_config(config)
        lm = load_strict(folder, dtype, device, model_class=PlotLLMForCausalLM, config=config,
                         optional=layout.unused_keys)
    except PointLLMLoadError as exc:
        message = str(exc).removeprefix(str(folder) + ": ").removeprefix(str(folder / "config.json") + ": ")
        raise PlotLLMError(f"{label}: {message}") from None
    try:
        tokenizer = load_tokenizer(folder, lm, label)
        add_point_tokens(tokenizer, lm, label)
    except PointLLMError as exc:
        raise PlotLLMError(str(exc)) from None
    part_ids = add_part_tokens(tokenizer, lm, label)
    return PlotLLMBackend(spec=spec_with(label, settings, _SPEC_KEYS), lm=lm, tokenizer=tokenizer, device=device,
                          threads=threads, load_seconds=time.perf_counter() - t0, part_ids=part_ids)


@model("plotllm", description="3D-PLOT-LLM on a point cloud and its partition pack: plotllm:DIR (a 3D-PLOT-LLM "
                              "checkpoint folder; <part_k> tokens, markers + MSR, strict loading)",
       settings=SETTINGS, strict=True)
def plotllm(path: str | None = None, **settings: Any) -> PlotLLMBackend:
    if not path:
        raise PlotLLMError("plotllm needs a checkpoint folder: plotllm:DIR (e.g. a download of "
                           "jintangx/3D-PLOT-LLM-7B)")
    settings = validate_settings("plotllm", settings, SETTINGS)
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise PlotLLMError(f"plotllm needs torch and transformers ({exc.name} is missing): "
                           "pip install 'harness[hf]'") from None
    return load(path, **settings)
