"""A tiny randomly initialised 3D-PLOT-LLM checkpoint folder, built offline, for the plotllm: backend tests.

Laid out as the released one (the Stage 2 training script's output): PointLLM's config.json with
the ``bcp_*`` keys that script writes (per-part markers, no region means, ``<part_k>`` tokens, MSR
``stats_graph``, K=16), one safetensors file with ``model.part_marker(s)``, the MSR modules and
scalars next to PointLLM's weights, and a tokenizer that already holds the point tokens and
``<part_0>..<part_15>`` (the training script saves it after adding them). Sizes: tests/pointllm_tiny.py's
Llama (hidden 64, 2 layers, context 1024 here for the 545 point tokens) and Point-BERT width 32 with
the released 512 groups (of 8 points), so the fixture's 512-patch packs fit. Markers, MSR weights
and scales get random values (the reference starts them at zero), so each visibly matters.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from tests.pointllm_tiny import BACKBONE as POINTLLM_BACKBONE
from tests.pointllm_tiny import config as pointllm_config
from tests.pointllm_tiny import randomise_batchnorm, save_tiny
from tests.pointllm_tiny import tokenizer as pointllm_tokenizer

BACKBONE = {**POINTLLM_BACKBONE, "num_group": 512, "group_size": 8}
# the bcp_* keys of the released Stage 2 config.json (scripts/train_stage2.sh via train.py)
RELEASED_LAYOUT: dict[str, Any] = {
    "bcp_part_interleave": True, "bcp_part_marker": "per_part", "bcp_part_no_mean": True,
    "bcp_part_vocab_token": True, "bcp_marker_context_mode": "stats_graph", "bcp_marker_context_stats": True,
    "bcp_marker_context_graph": True, "bcp_num_groups": 16, "bcp_part_projected_mean": False,
    "bcp_graph_proj_d": False, "bcp_vocab_context_mode": "none", "bcp_graph_order_bfs": False,
    "bcp_vocab_graph_propagation": False,
}
POINT_TOKENS = ["<point_patch>", "<point_start>", "<point_end>"]
PART_TOKENS = [f"<part_{g}>" for g in range(16)]
MARKER = "tiny-plotllm.v1"


def tokenizer() -> Any:
    tok = pointllm_tokenizer()
    tok.add_tokens(POINT_TOKENS, special_tokens=True)  # Stage 1 adds these, Stage 2 the part tokens
    tok.add_tokens(PART_TOKENS, special_tokens=True)
    return tok


@functools.cache
def build_tiny_plotllm(path: str | Path, seed: int = 0, **layout: Any) -> Path:
    """Write the tiny 3D-PLOT-LLM folder to ``path`` (unless complete there already); return the path.
    ``layout`` overrides the released ``bcp_*`` keys (for the other layouts)."""
    out = Path(path)
    if (out / MARKER).exists():
        return out
    import torch

    from harness.tasks.partverse.plotllm_model import PlotLLMForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tok = tokenizer()
    torch.manual_seed(seed)
    cfg = pointllm_config(len(tok), max_position_embeddings=1024, point_backbone_config=dict(BACKBONE),
                          **{**RELEASED_LAYOUT, **layout})
    model = PlotLLMForCausalLM(cfg).to(torch.float32)
    inner = model.model
    randomise_batchnorm(inner.point_backbone)
    with torch.no_grad():
        inner.part_marker.normal_(0.0, 1.0)
        inner.part_markers.normal_(0.0, 1.0)
        for scale in (inner.marker_stats_scale, inner.marker_graph_scale, inner.vocab_graph_scale,
                      inner.vocab_stats_scale):
            scale.fill_(0.5)
        for sub in (inner.marker_stats_mlp, inner.marker_graph_propagator):
            for p in (sub.parameters() if sub is not None else ()):
                p.normal_(0.0, 0.3)
    return save_tiny(model, tok, out)
