"""3D-PLOT-LLM as a transformers model: PointLLM with part markers, Marker-Space Refinement (MSR) and
``<part_k>`` vocabulary tokens, under the released state-dict names.

Written after the released ``pointllm/model/pointllm.py``, ``group_utils.py`` and
``graph_adapter.py`` (jintangxue/3D-PLOT-LLM). The model is PointLLM (pointllm_model.py) plus, in
``model``, the parameters that code creates for the released configuration:

- ``part_marker`` (1, D) and ``part_markers`` (16, D): the shared and the per-part learnable
  markers, in Point-BERT's width D (384), before the projector (both always exist; the layout
  uses one);
- ``marker_stats_scale``, ``marker_graph_scale`` (and the unused ``vocab_graph_scale``,
  ``vocab_stats_scale``): scalars;
- MSR, by ``bcp_marker_context_mode`` (``stats_only`` / ``graph_only`` / ``stats_graph``):
  ``marker_stats_mlp`` (Linear(7, D) - GELU - Linear(D, D), no biases) and
  ``marker_graph_propagator`` (``W_n``, ``W_s`` bias-free D x D, ``mlp`` Linear - GELU - Linear).

The point-token sequence of one object (the reference's offline path, fed by the pack's
``cls_feat``, ``patch_feat``, region labels, adjacency and statistics):

1. markers ``M`` = ``part_markers[:K]`` (or ``part_marker`` for each region); MSR updates them:
   ``M~ = M + s_stats * StatsMLP(stats)``, then ``M' = M~ + s_graph * (G(M~, adj) - M~)`` with
   ``G(M) = M + mlp(W_s M + (adj @ W_n M) / deg)`` (degree 0 counted as 1);
2. in backbone space ``[cls, (M'_0), (mean_0), patches of region 0 (in patch order), (M'_1), ...]``
   (a marker when ``bcp_part_marker`` is not ``none``; the region mean unless ``bcp_part_no_mean``);
3. that sequence through ``point_proj``;
4. the embedding of ``<part_g>`` (the LLM's own row for that token, the one a prompt's
   ``<part_g>`` gets) inserted before region g's block: ``[cls, <part_0>, block_0, <part_1>, ...]``,
   ``1 + K * (marker + mean) + 512 + K`` tokens, 545 for the released model.

These replace the prompt's ``<point_patch>`` run as in PointLLM. Checkpoints whose config asks for
what the released model does not use (the region graph adapter ``bcp_graph_proj_d``, projected
means, vocabulary-side refinement, BFS region order, Stage 1 layouts without ``<part_k>`` tokens)
are refused in one line rather than run differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from harness.tasks.partverse.pointllm_model import (
    PointLLMConfig,
    PointLLMForCausalLM,
    PointLLMLlamaModel,
    PointLLMLoadError,
)

CONTEXT_MODES = ("none", "stats_only", "graph_only", "stats_graph")
MARKER_MODES = ("none", "shared", "per_part")
MARKER_SLOTS = 16  # the reference always allocates 16 per-part markers and uses the first K
STATS_DIM = 7
# scalars the released code creates whatever the layout, read by no path this backend runs
_ALWAYS_UNUSED = ("model.vocab_graph_scale", "model.vocab_stats_scale")
# config switches of variants the released model does not use (with the value that means "off")
_REFUSED: dict[str, Any] = {
    "bcp_graph_proj_d": False, "bcp_part_projected_mean": False, "bcp_global_region_prefix": False,
    "bcp_graph_order_bfs": False, "bcp_vocab_graph_propagation": False,
}


class PlotLLMLoadError(PointLLMLoadError):
    """A folder that is no loadable 3D-PLOT-LLM checkpoint (one line)."""


def context_mode(mode: Any, stats: Any = False, graph: Any = False) -> str:
    """The reference's ``resolve_marker_context_mode``: a mode string wins, else the two legacy flags."""
    if mode is not None:
        m = str(mode).strip().lower()
        if m in ("", "none", "null"):
            return "none"
        if m not in CONTEXT_MODES:
            raise PlotLLMLoadError(f"bcp_marker_context_mode {mode!r} is none of {', '.join(CONTEXT_MODES)}")
        return m
    if stats and graph:
        return "stats_graph"
    return "stats_only" if stats else "graph_only" if graph else "none"


@dataclass(frozen=True, slots=True)
class PartLayout:
    """How a checkpoint lays out its part tokens (from its config.json's ``bcp_*`` keys)."""

    num_groups: int
    marker: str  # none | shared | per_part
    mean: bool  # a region-mean token after the marker (bcp_part_no_mean false)
    context: str  # MSR on the markers: none | stats_only | graph_only | stats_graph
    modules: str  # the MSR modules the checkpoint holds (the config's mode, even where the layout uses none)

    @staticmethod
    def from_config(config: PointLLMConfig) -> PartLayout:
        def get(key: str, default: Any = None) -> Any:
            return getattr(config, key, default)

        if not get("bcp_part_vocab_token", False):
            what = ("a Stage 1 3D-PLOT-LLM checkpoint (markers, no <part_k> tokens)" if get("bcp_part_interleave")
                    else "a PointLLM checkpoint (use pointllm:DIR)")
            raise PlotLLMLoadError(f"config.json has no bcp_part_vocab_token: true: {what}, not a 3D-PLOT-LLM "
                                   "model with <part_k> tokens")
        on = [k for k, off in _REFUSED.items() if get(k, off) not in (off, None)]
        vocab_mode = context_mode(get("bcp_vocab_context_mode"))
        if vocab_mode != "none":
            on.append(f"bcp_vocab_context_mode={vocab_mode}")
        if on:
            raise PlotLLMLoadError(f"config.json turns on {', '.join(on)}: a 3D-PLOT-LLM variant this backend does "
                                   "not run (the released model has them off)")
        k = get("bcp_num_groups", 16)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MARKER_SLOTS:
            raise PlotLLMLoadError(f"bcp_num_groups {k!r} must be an integer in 1..{MARKER_SLOTS}")
        modules = context_mode(get("bcp_marker_context_mode"), get("bcp_marker_context_stats", False),
                               get("bcp_marker_context_graph", False))
        if not get("bcp_part_interleave", False):
            # the reference's vocabulary-only path: [cls, <part_g>, patches of g ...], no markers, no MSR
            return PartLayout(k, "none", False, "none", modules)
        marker = get("bcp_part_marker", "none") or "none"
        if marker not in MARKER_MODES:
            raise PlotLLMLoadError(f"bcp_part_marker {marker!r} is none of {', '.join(MARKER_MODES)}")
        # the reference refines markers only; without one MSR has nothing to act on
        return PartLayout(k, marker, not get("bcp_part_no_mean", False), modules if marker != "none" else "none",
                          modules)

    def token_len(self, num_patches: int) -> int:
        per_region = (self.marker != "none") + self.mean + 1  # + the <part_g> token
        return 1 + num_patches + self.num_groups * per_region

    @property
    def unused_keys(self) -> frozenset[str]:
        """Parameters this layout never reads: their absence from a checkpoint is no mismatch."""
        unused = set(_ALWAYS_UNUSED)
        if self.marker != "shared":
            unused.add("model.part_marker")
        if self.marker != "per_part":
            unused.add("model.part_markers")
        return frozenset(unused)


class MarkerGraphPropagator(nn.Module):
    """One message-passing step over the region graph: ``M + mlp(W_s M + mean of W_n M over neighbours)``."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.W_n = nn.Linear(width, width, bias=False)  # noqa: N815 -- the released state-dict names
        self.W_s = nn.Linear(width, width, bias=False)  # noqa: N815
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width))

    def forward(self, markers: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        degree = adj.sum(dim=-1, keepdim=True)
        degree = torch.where(degree == 0, torch.ones_like(degree), degree)  # an isolated region: no message
        message = (adj @ self.W_n(markers)) / degree
        return markers + self.mlp(self.W_s(markers) + message)


class PlotLLMLlamaModel(PointLLMLlamaModel):
    def __init__(self, config: PointLLMConfig) -> None:
        super().__init__(config)
        width = self.point_config.output_dim
        self.part_marker = nn.Parameter(torch.zeros(1, width))
        self.part_markers = nn.Parameter(torch.zeros(MARKER_SLOTS, width))
        self.vocab_graph_scale = nn.Parameter(torch.tensor(0.05))
        self.marker_stats_scale = nn.Parameter(torch.tensor(0.05))
        self.marker_graph_scale = nn.Parameter(torch.tensor(0.05))
        self.vocab_stats_scale = nn.Parameter(torch.tensor(0.05))
        modules = PartLayout.from_config(config).modules
        self.marker_stats_mlp: nn.Module | None = None
        self.marker_graph_propagator: MarkerGraphPropagator | None = None
        if modules in ("stats_only", "stats_graph"):
            self.marker_stats_mlp = nn.Sequential(nn.Linear(STATS_DIM, width, bias=False), nn.GELU(),
                                                  nn.Linear(width, width, bias=False))
        if modules in ("graph_only", "stats_graph"):
            self.marker_graph_propagator = MarkerGraphPropagator(width)


class PlotLLMForCausalLM(PointLLMForCausalLM):
    inner_model_class = PlotLLMLlamaModel

    def __init__(self, config: PointLLMConfig) -> None:
        super().__init__(config)
        self.layout = PartLayout.from_config(config)

    @property
    def num_patches(self) -> int:
        return self.point_config.num_group

    @property
    def point_token_len(self) -> int:
        return self.layout.token_len(self.num_patches)

    def backbone_features(self, cloud: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
        """(N, C) normalised cloud, (P, 3) centres -> (P + 1, D) Point-BERT outputs (cls first), unprojected:
        what a pack's ``cls_feat`` and ``patch_feat`` hold."""
        param = next(self.model.point_backbone.parameters())
        points = cloud.to(device=param.device, dtype=param.dtype).unsqueeze(0)
        return self.model.point_backbone(points, None, centres.to(param.device).unsqueeze(0))[0]

    def refined_markers(self, adjacency: torch.Tensor, stats: torch.Tensor) -> torch.Tensor | None:
        """(K, D) markers after MSR (None for a layout without markers)."""
        layout, inner = self.layout, self.model
        k = layout.num_groups
        if layout.marker == "none":
            return None
        base = inner.part_marker.expand(k, -1) if layout.marker == "shared" else inner.part_markers[:k]
        markers = base
        dtype = base.dtype
        if layout.context in ("stats_only", "stats_graph"):
            assert inner.marker_stats_mlp is not None
            markers = markers + inner.marker_stats_scale * inner.marker_stats_mlp(stats.to(base.device, dtype))
        if layout.context in ("graph_only", "stats_graph"):
            assert inner.marker_graph_propagator is not None
            updated = inner.marker_graph_propagator(markers, adjacency.to(base.device, dtype))
            # the reference scales the difference, so the marker keeps its identity at a small scale
            markers = markers + inner.marker_graph_scale * (updated - markers)
        return markers

    def part_features(self, cls_feat: torch.Tensor, patch_feat: torch.Tensor, group_ids: torch.Tensor,
                      adjacency: torch.Tensor, stats: torch.Tensor, part_ids: torch.Tensor) -> torch.Tensor:
        """The (point_token_len, hidden) sequence that replaces the prompt's point-patch run."""
        layout = self.layout
        embed = self.model.embed_tokens
        device, dtype = embed.weight.device, embed.weight.dtype
        cls_feat = cls_feat.to(device, dtype)
        patch_feat = patch_feat.to(device, dtype)
        group_ids = group_ids.to(device)
        markers = self.refined_markers(adjacency, stats)
        pieces, blocks = [cls_feat.unsqueeze(0)], []
        for g in range(layout.num_groups):
            tokens = patch_feat[(group_ids == g).nonzero().flatten()]  # the region's patches in patch order
            if not len(tokens):
                raise ValueError(f"region {g} holds no patch")
            block = ([markers[g:g + 1]] if markers is not None else []) + (
                [tokens.mean(dim=0, keepdim=True)] if layout.mean else []) + [tokens]
            pieces += block
            blocks.append(sum(len(b) for b in block))
        projected = self.model.point_proj(torch.cat(pieces, dim=0))
        parts = embed(part_ids.to(device))
        out, cursor = [projected[:1]], 1
        for g, n in enumerate(blocks):
            out += [parts[g:g + 1], projected[cursor:cursor + n]]
            cursor += n
        return torch.cat(out, dim=0)
