"""Uni3D point-cloud encoder (Zhou et al., ICLR 2024, ``baaivision/Uni3D``), reimplemented in torch
so a released ``model.pt`` loads with strict key matching without timm, DeepSpeed or pointnet2_ops.

Architecture, as Uni3D's ``models/point_encoder.py`` and ``models/uni3d.py``:

* ``Group``: ``num_group`` (512) centres by farthest-point sampling, the ``group_size`` (64) nearest
  points of each centre (kNN), coordinates relative to the centre, concatenated with the colours;
* ``Encoder``: a mini-PointNet per group (1x1 convs 6-128-256, max-pool, concat, 512-512-
  ``pc_encoder_dim``, max-pool) -> one token per group;
* ``encoder2trans`` to the transformer width, a learned CLS token + CLS position, an MLP position
  embedding of the centres (3-128-width), then the blocks of a timm EVA / EVA-02 ViT (``visual``) run
  without rotary embedding (Uni3D calls ``blk(x)``), ``visual.norm`` and ``visual.fc_norm`` on the CLS
  token, and ``trans2embed`` into the 1024-d space of OpenCLIP EVA02-E-14-plus.

Parameter names are timm's (``visual.blocks.N.attn.qkv`` / ``q_proj`` ..., ``mlp.fc1`` / ``fc1_g`` ...),
and the image-only parts of the timm model that Uni3D keeps in its state dict (``patch_embed``,
``pos_embed``, ``cls_token``, ``head``) exist here too, unused, so nothing is dropped on load. The
size is read from the checkpoint's width (:data:`SIZES`); the classifier head's class count, which
depends on the timm pretrained tag the model was initialised from, is taken from the checkpoint.

Two choices differ from the released code, both documented in the README:

* FPS starts at the point farthest from the centroid, not at array index 0 as pointnet2's CUDA op
  does (or at a random index, as 3DCodeBench's torch replacement does), so the embedding is a
  function of the point *set*, independent of sampling order and of any RNG;
* distances are computed as explicit differences (not the ``-2ab + a^2 + b^2`` expansion), so the kNN
  groups do not depend on matmul blocking either.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.errors import UserError

# trimesh's default face colour (102, 102, 102) / 255: what 3DCodeBench's colour lookup returns for
# the GLBs it scores (exported without materials), and Uni3D's own colour for uncoloured clouds
DEFAULT_RGB = 0.4
LN_EPS = 1e-6  # timm's EVA LayerNorm


@dataclass(frozen=True, slots=True)
class Uni3DConfig:
    """One Uni3D size: the timm backbone Uni3D names in ``scripts/inference.sh`` and its settings."""

    name: str
    timm_model: str
    width: int  # pc_feat_dim
    depth: int
    heads: int
    mlp_ratio: float
    mlp: str  # "gelu" (EVA-01 Mlp) | "glu" (packed SwiGLU, GluMlp) | "swiglu" (split SwiGLU + LayerNorm)
    qkv_fused: bool
    img_size: int
    patch_size: int = 14
    embed_dim: int = 1024  # the CLIP space (EVA02-E-14-plus)
    num_group: int = 512
    group_size: int = 64
    encoder_dim: int = 512  # pc_encoder_dim
    num_classes: int = 0  # the unused timm classifier head (read from the checkpoint)

    @property
    def hidden(self) -> int:
        return int(self.width * self.mlp_ratio)  # timm's rounding, e.g. 2730 for large


# inference.sh: giant = eva_giant_patch14_560 (1408), large = eva02_large_patch14_448 (1024),
# base = eva02_base_patch14_448 (768), small = eva02_small_patch14_224 (384), tiny = eva02_tiny_patch14_224 (192);
# the block settings are those timm registers for these names
SIZES: dict[str, Uni3DConfig] = {
    "giant": Uni3DConfig("giant", "eva_giant_patch14_560", 1408, 40, 16, 6144 / 1408, "gelu", True, 560),
    "large": Uni3DConfig("large", "eva02_large_patch14_448", 1024, 24, 16, 4 * 2 / 3, "swiglu", False, 448),
    "base": Uni3DConfig("base", "eva02_base_patch14_448", 768, 12, 12, 4 * 2 / 3, "swiglu", False, 448),
    "small": Uni3DConfig("small", "eva02_small_patch14_224", 384, 12, 6, 4 * 2 / 3, "glu", True, 224),
    "tiny": Uni3DConfig("tiny", "eva02_tiny_patch14_224", 192, 12, 3, 4 * 2 / 3, "glu", True, 224),
}


class Uni3DCheckpointError(UserError):
    """A Uni3D checkpoint that is missing, unreadable or does not fit the architecture."""


# --- grouping --------------------------------------------------------------------------------------
def farthest_point_sample(xyz: torch.Tensor, m: int) -> torch.Tensor:
    """(B, N, 3) -> (B, m) indices. Starts at the point farthest from the centroid (see module doc)."""
    b, n, _ = xyz.shape
    rows = torch.arange(b, device=xyz.device)
    idx = torch.empty(b, m, dtype=torch.long, device=xyz.device)
    far = ((xyz - xyz.mean(dim=1, keepdim=True)) ** 2).sum(-1).argmax(-1)
    dist = torch.full((b, n), float("inf"), dtype=xyz.dtype, device=xyz.device)
    for i in range(m):
        idx[:, i] = far
        d = ((xyz - xyz[rows, far].unsqueeze(1)) ** 2).sum(-1)
        dist = torch.minimum(dist, d)
        far = dist.argmax(-1)
    return idx


def knn(k: int, xyz: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
    """(B, N, 3), (B, G, 3) -> (B, G, k) indices of each centre's k nearest points."""
    d = ((centres.unsqueeze(2) - xyz.unsqueeze(1)) ** 2).sum(-1)  # B G N
    return d.topk(k, dim=-1, largest=False).indices


def group(xyz: torch.Tensor, rgb: torch.Tensor, num_group: int, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Centres (B, G, 3) and per-group features (B, G, M, 6): xyz relative to the centre, then rgb."""
    b = xyz.shape[0]
    centre_idx = farthest_point_sample(xyz, num_group)
    rows = torch.arange(b, device=xyz.device).view(b, 1)
    centres = xyz[rows, centre_idx]
    nb = knn(group_size, xyz, centres)
    rows3 = rows.view(b, 1, 1)
    local = xyz[rows3, nb] - centres.unsqueeze(2)
    return centres, torch.cat((local, rgb[rows3, nb]), dim=-1)


# --- modules (Uni3D's and timm's parameter names) -----------------------------------------------------
class _PatchEncoder(nn.Module):
    """Uni3D's ``Encoder``: mini-PointNet over each group, max-pooled."""

    def __init__(self, out_dim: int) -> None:
        super().__init__()
        self.first_conv = nn.Sequential(nn.Conv1d(6, 128, 1), nn.BatchNorm1d(128), nn.ReLU(inplace=True),
                                        nn.Conv1d(128, 256, 1))  # fmt: skip
        self.second_conv = nn.Sequential(nn.Conv1d(512, 512, 1), nn.BatchNorm1d(512), nn.ReLU(inplace=True),
                                         nn.Conv1d(512, out_dim, 1))  # fmt: skip
        self.out_dim = out_dim

    def forward(self, groups: torch.Tensor) -> torch.Tensor:
        b, g, n, c = groups.shape
        x = self.first_conv(groups.reshape(b * g, n, c).transpose(2, 1))
        x = torch.cat([x.max(dim=2, keepdim=True)[0].expand(-1, -1, n), x], dim=1)
        x = self.second_conv(x).max(dim=2)[0]
        return x.reshape(b, g, self.out_dim)


class _Attention(nn.Module):
    """timm ``EvaAttention`` without rotary embedding: fused qkv with q/v biases (no k bias), or
    separate ``q_proj`` / ``k_proj`` (no bias) / ``v_proj``."""

    def __init__(self, dim: int, heads: int, fused: bool) -> None:
        super().__init__()
        self.heads, self.fused = heads, fused
        if fused:
            self.qkv = nn.Linear(dim, dim * 3, bias=False)
            self.q_bias = nn.Parameter(torch.zeros(dim))
            self.v_bias = nn.Parameter(torch.zeros(dim))
        else:
            self.q_proj = nn.Linear(dim, dim)
            self.k_proj = nn.Linear(dim, dim, bias=False)
            self.v_proj = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        if self.fused:
            bias = torch.cat((self.q_bias, torch.zeros_like(self.q_bias), self.v_bias))
            q, k, v = F.linear(x, self.qkv.weight, bias).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        else:
            projections = (self.q_proj, self.k_proj, self.v_proj)
            q, k, v = (p(x).reshape(b, n, self.heads, -1).transpose(1, 2) for p in projections)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


class _Mlp(nn.Module):
    """timm ``Mlp`` (GELU), ``GluMlp`` (SiLU gate on the first half, packed) or ``SwiGLU`` (split,
    LayerNorm before ``fc2``), by ``kind``."""

    def __init__(self, dim: int, hidden: int, kind: str) -> None:
        super().__init__()
        self.kind = kind
        if kind == "gelu":
            self.fc1 = nn.Linear(dim, hidden)
            self.fc2 = nn.Linear(hidden, dim)
        elif kind == "glu":
            self.fc1 = nn.Linear(dim, hidden * 2)
            self.fc2 = nn.Linear(hidden, dim)
        elif kind == "swiglu":
            self.fc1_g = nn.Linear(dim, hidden)
            self.fc1_x = nn.Linear(dim, hidden)
            self.norm = nn.LayerNorm(hidden, eps=LN_EPS)
            self.fc2 = nn.Linear(hidden, dim)
        else:
            raise ValueError(f"unknown mlp kind {kind!r}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "gelu":
            return self.fc2(F.gelu(self.fc1(x)))
        if self.kind == "glu":
            gate, value = self.fc1(x).chunk(2, dim=-1)
            return self.fc2(F.silu(gate) * value)
        return self.fc2(self.norm(F.silu(self.fc1_g(x)) * self.fc1_x(x)))


class _Block(nn.Module):
    def __init__(self, cfg: Uni3DConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.width, eps=LN_EPS)
        self.attn = _Attention(cfg.width, cfg.heads, cfg.qkv_fused)
        self.norm2 = nn.LayerNorm(cfg.width, eps=LN_EPS)
        self.mlp = _Mlp(cfg.width, cfg.hidden, cfg.mlp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class _PatchEmbed(nn.Module):  # timm's image patch embedding: in the checkpoint, unused for points
    def __init__(self, cfg: Uni3DConfig) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, cfg.width, kernel_size=cfg.patch_size, stride=cfg.patch_size)


class _Visual(nn.Module):
    """The timm EVA model as Uni3D holds it. timm's default global pool ('avg') makes ``norm`` an
    identity and ``fc_norm`` a LayerNorm; Uni3D applies both to the CLS token."""

    def __init__(self, cfg: Uni3DConfig) -> None:
        super().__init__()
        n_patches = (cfg.img_size // cfg.patch_size) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.width))
        self.pos_embed = nn.Parameter(torch.zeros(1, n_patches + 1, cfg.width))
        self.patch_embed = _PatchEmbed(cfg)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.depth))
        self.norm = nn.Identity()
        self.fc_norm = nn.LayerNorm(cfg.width, eps=LN_EPS)
        self.head = nn.Linear(cfg.width, cfg.num_classes) if cfg.num_classes else nn.Identity()


class PointcloudEncoder(nn.Module):
    def __init__(self, cfg: Uni3DConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = _PatchEncoder(cfg.encoder_dim)
        self.encoder2trans = nn.Linear(cfg.encoder_dim, cfg.width)
        self.trans2embed = nn.Linear(cfg.width, cfg.embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.width))
        self.cls_pos = nn.Parameter(torch.randn(1, 1, cfg.width))
        self.pos_embed = nn.Sequential(nn.Linear(3, 128), nn.GELU(), nn.Linear(128, cfg.width))
        self.visual = _Visual(cfg)

    def forward(self, xyz: torch.Tensor, rgb: torch.Tensor) -> torch.Tensor:
        centres, features = group(xyz, rgb, self.cfg.num_group, self.cfg.group_size)
        tokens = self.encoder2trans(self.encoder(features))
        b = tokens.shape[0]
        x = torch.cat((self.cls_token.expand(b, -1, -1), tokens), dim=1)
        x = x + torch.cat((self.cls_pos.expand(b, -1, -1), self.pos_embed(centres)), dim=1)
        for blk in self.visual.blocks:
            x = blk(x)
        x = self.visual.fc_norm(self.visual.norm(x[:, 0, :]))
        return self.trans2embed(x)


class Uni3D(nn.Module):
    """Uni3D's wrapper (``logit_scale`` is in the checkpoint); ``encode_pc`` takes (B, N, 6) xyz+rgb."""

    def __init__(self, cfg: Uni3DConfig) -> None:
        super().__init__()
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))
        self.point_encoder = PointcloudEncoder(cfg)

    def encode_pc(self, pc: torch.Tensor) -> torch.Tensor:
        return self.point_encoder(pc[:, :, :3].contiguous(), pc[:, :, 3:].contiguous())


# --- checkpoint ------------------------------------------------------------------------------------------
def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The model weights in a Uni3D checkpoint: DeepSpeed's ``{"module": ...}`` (the released
    ``model.pt``), ``{"state_dict": ...}`` or a bare state dict, ``module.`` prefixes removed."""
    p = Path(path)
    if not p.is_file():
        raise Uni3DCheckpointError(f"Uni3D checkpoint {str(p)!r} is not a file (expected a Uni3D model.pt)")
    from harness.safeload import SafeLoadError, load_torch

    try:  # tensors, plain containers and numpy scalars only: a checkpoint never runs code here
        obj = load_torch(p)
    except SafeLoadError as exc:
        raise Uni3DCheckpointError(f"Uni3D checkpoint {str(p)!r} is not a readable torch file of weights: "
                                   f"{_first_line(exc)}") from None
    for key in ("module", "state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
            break
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise Uni3DCheckpointError(f"Uni3D checkpoint {str(p)!r} holds no state dict of tensors")
    return {k.removeprefix("module."): v for k, v in obj.items()}



def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def config_for(state: dict[str, torch.Tensor]) -> Uni3DConfig:
    """The Uni3D size whose width the checkpoint has, with its head's class count."""
    width_key = "point_encoder.visual.blocks.0.norm1.weight"
    if width_key not in state:
        raise Uni3DCheckpointError(f"not a Uni3D checkpoint: no {width_key!r} "
                                   f"(first keys: {', '.join(list(state)[:3])})")  # fmt: skip
    width = int(state[width_key].shape[0])
    cfg = next((c for c in SIZES.values() if c.width == width), None)
    if cfg is None:
        known = ", ".join(f"{c.name} {c.width}" for c in SIZES.values())
        raise Uni3DCheckpointError(f"Uni3D checkpoint has width {width}; the released sizes are {known}")
    head = state.get("point_encoder.visual.head.weight")
    return replace(cfg, num_classes=int(head.shape[0]) if head is not None else 0)


def build_model(state: dict[str, torch.Tensor], cfg: Uni3DConfig | None = None) -> Uni3D:
    """Uni3D with ``state`` loaded strictly (every key present, none left over, shapes equal)."""
    cfg = cfg or config_for(state)
    with torch.device("meta"):  # no memory for the random init; the checkpoint's tensors are assigned
        model = Uni3D(cfg)
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        parts = [f"{len(missing)} missing (e.g. {missing[0]})" if missing else "",
                 f"{len(unexpected)} unexpected (e.g. {unexpected[0]})" if unexpected else ""]  # fmt: skip
        raise Uni3DCheckpointError(f"Uni3D checkpoint does not match Uni3D-{cfg.name} ({cfg.timm_model}): "
                                   + ", ".join(p for p in parts if p))  # fmt: skip
    bad = [k for k, v in expected.items() if tuple(state[k].shape) != tuple(v.shape)]
    if bad:
        k = bad[0]
        raise Uni3DCheckpointError(f"Uni3D checkpoint does not match Uni3D-{cfg.name}: {k} has shape "
                                   f"{tuple(state[k].shape)}, expected {tuple(expected[k].shape)}")  # fmt: skip
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()},
                          strict=True, assign=True)  # fmt: skip
    return model.eval()


def uni3d_input(points: np.ndarray) -> np.ndarray:
    """(N, 3) surface samples -> (N, 6) float32: centred, unit max radius (3DCodeBench's
    ``normalize_points`` and Uni3D's ``pc_norm``), colour 0.4 (see :data:`DEFAULT_RGB`)."""
    from harness.tasks.code3d.geometry import normalise_cloud

    xyz = normalise_cloud(points)
    rgb = np.full_like(xyz, DEFAULT_RGB)
    return np.concatenate([xyz, rgb], axis=1).astype(np.float32)


class Uni3DScorer:
    """A loaded Uni3D: unit embeddings of point clouds and their cosines. Thread-safe (one forward at a time)."""

    def __init__(self, path: str | Path, device: str | None = None) -> None:
        self.path = str(path)
        state = read_state_dict(path)
        self.cfg = config_for(state)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = build_model(state, self.cfg).to(self.device)
        self._lock = threading.Lock()

    def embed(self, points: np.ndarray) -> np.ndarray:
        """(N, 3) surface samples -> (1024,) unit vector."""
        need = max(self.cfg.num_group, self.cfg.group_size)
        if len(points) < need:
            raise ValueError(f"Uni3D-{self.cfg.name} needs at least {need} points, got {len(points)}")
        pc = torch.from_numpy(uni3d_input(points)).unsqueeze(0).to(self.device)
        with self._lock, torch.inference_mode():
            emb = self.model.encode_pc(pc)[0].float()
        return (emb / emb.norm().clamp_min(1e-8)).cpu().numpy()

    def shape_similarity(self, pred: np.ndarray, ref: np.ndarray) -> float:
        """Cosine of the two clouds' embeddings (3DCodeBench's ``cos_3d_3d``)."""
        return float(self.embed(pred) @ self.embed(ref))
