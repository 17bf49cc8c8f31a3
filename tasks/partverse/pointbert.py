"""Point-BERT's point encoder as PointLLM uses it (``PointTransformer``), and PointLLM's projector.

Written from PointLLM's ``pointllm/model/pointbert`` (``point_encoder.py``, ``dvae.py``, ``misc.py``)
so that the released checkpoints load by name: every submodule carries the reference's attribute
name (``encoder.first_conv.1.running_mean``, ``blocks.blocks.3.attn.qkv.weight``, ``point_proj.4``).

- **Grouping**: ``num_group`` centres by farthest-point sampling, each with its ``group_size``
  nearest points (squared distances by the reference's ``-2ab + |a|^2 + |b|^2`` expansion, in the
  cloud's dtype as there), xyz taken relative to the centre, rgb kept as is.
- **Encoder**: a mini-PointNet per group (1x1 convolutions with BatchNorm, max-pooled, the pooled
  feature concatenated back onto each point, again 1x1 convolutions, max-pooled).
- **Transformer**: ``reduce_dim`` to ``trans_dim``, a learned cls token in front, a positional MLP
  on the centres (cls has its own learned position), ``depth`` pre-norm blocks each adding the
  positions to its input, a final LayerNorm: ``num_group + 1`` tokens (or, with ``use_max_pool``,
  cls concatenated with the max over groups: one token of ``2 * trans_dim``).

The farthest-point sampling's first centre is where the reference draws a random index
(``torch.randint`` on the global generator). Here the caller passes the index (``start``): the
backend draws it from the request's seed, so a reply is reproducible, or takes the point farthest
from the centroid, which makes the features independent of the order of the points.

Dropout and drop-path are inference no-ops and are left out (they hold no weights).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import nn

# the Point-BERT configs of PointLLM's repository (pointllm/model/pointbert/*.yaml), by the name its
# config.json gives as ``point_backbone_config_name``; point_dims becomes 6 when ``use_color``
PRESETS: dict[str, dict[str, Any]] = {
    # PointLLM v1.2 (the default when config.json names none)
    "PointTransformer_8192point_2layer": {
        "trans_dim": 384, "depth": 12, "num_heads": 6, "group_size": 32, "num_group": 512,
        "encoder_dims": 256, "point_dims": 3, "projection_hidden_layer": 2,
        "projection_hidden_dim": [1024, 2048], "use_max_pool": False,
    },
    # PointLLM v1.1
    "PointTransformer_base_8192point": {
        "trans_dim": 1152, "depth": 12, "num_heads": 12, "group_size": 48, "num_group": 512,
        "encoder_dims": 512, "point_dims": 3, "projection_hidden_layer": 0,
        "projection_hidden_dim": [], "use_max_pool": False,
    },
}
DEFAULT_PRESET = "PointTransformer_8192point_2layer"
# YAML keys with no effect at inference (classification head size, stochastic depth)
_IGNORED = frozenset({"NAME", "cls_dim", "drop_path_rate", "point_input_dims"})


class BackboneConfigError(ValueError):
    """A Point-BERT configuration that names no preset or holds unusable values (one line)."""


@dataclass(frozen=True, slots=True)
class PointBertConfig:
    trans_dim: int
    depth: int
    num_heads: int
    group_size: int
    num_group: int
    encoder_dims: int
    point_dims: int
    projection_hidden_layer: int = 0
    projection_hidden_dim: tuple[int, ...] = ()
    use_max_pool: bool = False

    @property
    def output_dim(self) -> int:
        return self.trans_dim * 2 if self.use_max_pool else self.trans_dim

    @property
    def token_len(self) -> int:
        """Point tokens per cloud: the groups plus cls, or one pooled token."""
        return 1 if self.use_max_pool else self.num_group + 1

    @staticmethod
    def resolve(model_config: Any) -> PointBertConfig:
        """The backbone of a PointLLM config: an explicit ``point_backbone_config`` mapping (the YAML's
        ``model`` fields; how small test models state theirs), else the preset that
        ``point_backbone_config_name`` names (the released config.json's key)."""
        backbone = getattr(model_config, "point_backbone", "PointBERT")
        if backbone != "PointBERT":
            raise BackboneConfigError(f"point_backbone {backbone!r}: only PointLLM's 'PointBERT' is implemented")
        explicit = getattr(model_config, "point_backbone_config", None)
        if explicit is not None:
            if not isinstance(explicit, Mapping):
                raise BackboneConfigError("point_backbone_config must be a mapping of Point-BERT fields")
            values = dict(explicit)
        else:
            name = getattr(model_config, "point_backbone_config_name", None) or DEFAULT_PRESET
            if name not in PRESETS:
                raise BackboneConfigError(f"point_backbone_config_name {name!r} is none of PointLLM's configs "
                                          f"({', '.join(PRESETS)})")
            values = dict(PRESETS[name])
        if getattr(model_config, "use_color", False):
            values["point_dims"] = 6  # as PointLLM does: the YAML says 3, colour adds rgb
        return PointBertConfig.from_mapping(values)

    @staticmethod
    def from_mapping(values: Mapping[str, Any]) -> PointBertConfig:
        known = {f.name for f in fields(PointBertConfig)}
        unknown = sorted(set(values) - known - _IGNORED)
        if unknown:
            raise BackboneConfigError(f"unknown Point-BERT field(s) {', '.join(unknown)} "
                                      f"(known: {', '.join(sorted(known))})")
        kept = {k: v for k, v in values.items() if k in known}
        kept["projection_hidden_dim"] = tuple(int(d) for d in kept.get("projection_hidden_dim") or ())
        try:
            config = PointBertConfig(**kept)
        except TypeError as exc:
            raise BackboneConfigError(f"Point-BERT config: {exc}") from None
        if config.point_dims not in (3, 6):
            raise BackboneConfigError(f"point_dims must be 3 (xyz) or 6 (xyz+rgb), got {config.point_dims}")
        if config.trans_dim % config.num_heads:
            raise BackboneConfigError(f"trans_dim {config.trans_dim} is not a multiple of num_heads {config.num_heads}")
        if len(config.projection_hidden_dim) < config.projection_hidden_layer:
            raise BackboneConfigError(f"projection_hidden_dim lists {len(config.projection_hidden_dim)} sizes for "
                                      f"{config.projection_hidden_layer} hidden layers")
        return config


# ---- grouping -----------------------------------------------------------------------------------
def square_distance(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """(B, N, M) squared distances, by the reference's expansion (so its rounding in bf16 too)."""
    dist = -2 * torch.matmul(src, dst.transpose(1, 2))
    dist = dist + (src**2).sum(-1).unsqueeze(2)
    return dist + (dst**2).sum(-1).unsqueeze(1)


def farthest_point_indices(xyz: torch.Tensor, count: int, start: torch.Tensor) -> torch.Tensor:
    """(B, count) indices: ``start`` (B,) first, then each time the point farthest from those taken."""
    batch, n, _ = xyz.shape
    rows = torch.arange(batch, device=xyz.device)
    taken = torch.zeros(batch, count, dtype=torch.long, device=xyz.device)
    # float32 running minimum as the reference (torch.ones(B, N) * 1e10 in the default dtype)
    nearest = torch.full((batch, n), 1e10, device=xyz.device)
    farthest = start.to(device=xyz.device, dtype=torch.long)
    for i in range(count):
        taken[:, i] = farthest
        centre = xyz[rows, farthest].unsqueeze(1)
        nearest = torch.minimum(nearest, ((xyz - centre) ** 2).sum(-1))
        farthest = nearest.argmax(-1)
    return taken


def farthest_from_centroid(xyz: torch.Tensor) -> torch.Tensor:
    """(B,) a start index that depends on the points, not their order (ties aside)."""
    centred = xyz.float() - xyz.float().mean(dim=1, keepdim=True)
    return (centred**2).sum(-1).argmax(-1)


class Group(nn.Module):
    """FPS centres and their kNN neighbourhoods (no weights; the reference's ``group_divider``)."""

    def __init__(self, num_group: int, group_size: int) -> None:
        super().__init__()
        self.num_group, self.group_size = num_group, group_size

    def forward(self, points: torch.Tensor, start: torch.Tensor | None,
                centres: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Groups around FPS centres from ``start``, or around given ``centres`` (B, G, 3): the
        centres a 3D-PLOT-LLM partition pack stores, so its patch order is kept."""
        xyz = points[..., :3]
        batch = points.shape[0]
        rows = torch.arange(batch, device=points.device).unsqueeze(1)
        if centres is None:
            if start is None:
                raise ValueError("Group needs a first FPS index or the centres")
            centres = xyz[rows, farthest_point_indices(xyz, self.num_group, start)]  # B G 3
        else:
            centres = centres.to(device=xyz.device, dtype=xyz.dtype)
        # nearest first (the reference leaves them unsorted; the encoder is symmetric in them)
        neighbours = square_distance(centres, xyz).topk(self.group_size, dim=-1, largest=False).indices
        grouped = points[rows.unsqueeze(2), neighbours]  # B G M C
        local = grouped[..., :3] - centres.unsqueeze(2)
        return torch.cat([local, grouped[..., 3:]], dim=-1), centres


# ---- encoder and transformer --------------------------------------------------------------------
class Encoder(nn.Module):
    """Mini-PointNet over each group: (B, G, M, C) -> (B, G, encoder_dims)."""

    def __init__(self, encoder_channel: int, point_input_dims: int) -> None:
        super().__init__()
        self.encoder_channel = encoder_channel
        self.first_conv = nn.Sequential(nn.Conv1d(point_input_dims, 128, 1), nn.BatchNorm1d(128), nn.ReLU(),
                                        nn.Conv1d(128, 256, 1))
        self.second_conv = nn.Sequential(nn.Conv1d(512, 512, 1), nn.BatchNorm1d(512), nn.ReLU(),
                                         nn.Conv1d(512, encoder_channel, 1))

    def forward(self, groups: torch.Tensor) -> torch.Tensor:
        batch, g, m, c = groups.shape
        feature = self.first_conv(groups.reshape(batch * g, m, c).transpose(2, 1))  # BG 256 M
        pooled = feature.max(dim=2, keepdim=True).values
        feature = self.second_conv(torch.cat([pooled.expand(-1, -1, m), feature], dim=1))
        return feature.max(dim=2).values.reshape(batch, g, self.encoder_channel)


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Attention(nn.Module):
    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=False)  # qkv_bias=False in the reference
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, c // self.num_heads).permute(2, 0, 3, 1, 4)
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class Block(nn.Module):
    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TransformerEncoder(nn.Module):
    def __init__(self, dim: int, depth: int, num_heads: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim, num_heads) for _ in range(depth)])

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x + pos)  # positions re-added before every block, as the reference
        return x


class PointTransformer(nn.Module):
    """(B, N, point_dims) normalised cloud -> (B, token_len, output_dim) point features."""

    def __init__(self, config: PointBertConfig) -> None:
        super().__init__()
        self.config = config
        self.group_divider = Group(config.num_group, config.group_size)
        self.encoder = Encoder(config.encoder_dims, config.point_dims)
        self.reduce_dim = nn.Linear(config.encoder_dims, config.trans_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, config.trans_dim))
        self.cls_pos = nn.Parameter(torch.randn(1, 1, config.trans_dim))
        self.pos_embed = nn.Sequential(nn.Linear(3, 128), nn.GELU(), nn.Linear(128, config.trans_dim))
        self.blocks = TransformerEncoder(config.trans_dim, config.depth, config.num_heads)
        self.norm = nn.LayerNorm(config.trans_dim)

    def forward(self, points: torch.Tensor, start: torch.Tensor | None = None,
                centres: torch.Tensor | None = None) -> torch.Tensor:
        if points.shape[-1] != self.config.point_dims:
            raise ValueError(f"the point backbone takes {self.config.point_dims} values per point, "
                             f"got {points.shape[-1]}")
        if start is None and centres is None:
            start = farthest_from_centroid(points[..., :3])
        groups, centres = self.group_divider(points, start, centres)
        tokens = self.reduce_dim(self.encoder(groups))
        batch = tokens.shape[0]
        x = torch.cat([self.cls_token.expand(batch, -1, -1), tokens], dim=1)
        pos = torch.cat([self.cls_pos.expand(batch, -1, -1), self.pos_embed(centres)], dim=1)
        x = self.norm(self.blocks(x, pos))
        if not self.config.use_max_pool:
            return x
        return torch.cat([x[:, 0], x[:, 1:].max(1).values], dim=-1).unsqueeze(1)


def build_projector(config: PointBertConfig, hidden_size: int) -> nn.Module:
    """PointLLM's ``point_proj``: Linear/GELU pairs for the hidden layers then a Linear to the LLM's
    width (Sequential indices 0, 2, 4 ...), or one Linear when there are no hidden layers."""
    if config.projection_hidden_layer <= 0:
        return nn.Linear(config.output_dim, hidden_size)
    layers: list[nn.Module] = []
    last = config.output_dim
    for width in config.projection_hidden_dim[: config.projection_hidden_layer]:
        layers += [nn.Linear(last, width), nn.GELU()]
        last = width
    layers.append(nn.Linear(last, hidden_size))
    return nn.Sequential(*layers)
