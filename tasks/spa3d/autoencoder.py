"""The 3DSPA track autoencoder (PyTorch), after TRAJAN's track autoencoder.

Support tracks (3D positions, visibility, optional semantic/depth features per frame) are each
embedded to a token; a Perceiver-style set of learned latents cross-attends to the tokens and
refines itself with self-attention (the bottleneck). A query track is given only by its point at
its query frame (position, frame index, features there); it cross-attends to the latents and the
decoder emits its whole trajectory (positions and visibility logits per frame).

Reconstructed from the paper and TRAJAN's description (sizes are ours, much smaller than the
paper's so that CPU training takes minutes): positions are normalised per video (centre and RMS
scale of the visible support points) so the latent describes motion, not placement; the clip
length is fixed per model (inputs are resampled to it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F

# The paper's loss weights (5000 x L1 on visible positions + 1e-8 x visibility BCE)
POSITION_WEIGHT = 5000.0
VISIBILITY_WEIGHT = 1e-8


@dataclass
class AutoencoderConfig:
    num_frames: int = 32
    feature_dim: int = 0  # per-point feature channels (DINO + depth features); 0 = geometry only
    feature_proj: int = 8  # features are projected to this many channels per frame first
    width: int = 128
    num_latents: int = 16
    heads: int = 4
    latent_layers: int = 1

    def to_dict(self) -> dict:
        return asdict(self)


class _CrossBlock(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm_q, self.norm_kv, self.norm_mlp = nn.LayerNorm(width), nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        kv = self.norm_kv(kv)
        q = q + self.attn(self.norm_q(q), kv, kv, need_weights=False)[0]
        return q + self.mlp(self.norm_mlp(q))


class TrackAutoencoder(nn.Module):
    def __init__(self, cfg: AutoencoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        t, w = cfg.num_frames, cfg.width
        per_frame = 4 + (cfg.feature_proj if cfg.feature_dim else 0)  # xyz*visible, visible, features
        self.feature_in = nn.Linear(cfg.feature_dim, cfg.feature_proj) if cfg.feature_dim else None
        self.track_embed = nn.Sequential(nn.Linear(t * per_frame, 2 * w), nn.GELU(), nn.Linear(2 * w, w))
        self.latents = nn.Parameter(torch.randn(cfg.num_latents, w) * 0.02)
        self.encode_cross = _CrossBlock(w, cfg.heads)
        self.latent_blocks = nn.ModuleList(_CrossBlock(w, cfg.heads) for _ in range(cfg.latent_layers))
        query_in = 3 + (cfg.feature_proj if cfg.feature_dim else 0)
        self.query_embed = nn.Sequential(nn.Linear(query_in, w), nn.GELU(), nn.Linear(w, w))
        self.frame_embed = nn.Embedding(t, w)
        self.decode_cross = _CrossBlock(w, cfg.heads)
        # separate heads: with the paper's 1e-8 visibility weight, a shared output layer would never
        # learn visibility; Adam's per-parameter scaling lets a separate head learn it
        self.position_head = nn.Sequential(nn.Linear(w, 2 * w), nn.GELU(), nn.Linear(2 * w, t * 3))
        self.visibility_head = nn.Sequential(nn.Linear(w, 2 * w), nn.GELU(), nn.Linear(2 * w, t))

    def _features(self, feats: torch.Tensor | None) -> torch.Tensor | None:
        if self.feature_in is None or feats is None:
            return None
        return self.feature_in(feats)

    def encode(self, pos: torch.Tensor, vis: torch.Tensor, feats: torch.Tensor | None = None) -> torch.Tensor:
        """Support [B, S, T, 3] / [B, S, T] / [B, S, T, F] (normalised) -> latents [B, L, W]."""
        v = vis.float().unsqueeze(-1)
        parts = [pos * v, v]
        projected = self._features(feats)
        if projected is not None:
            parts.append(projected * v)
        x = torch.cat(parts, dim=-1).flatten(2)
        tokens = self.track_embed(x)
        latents = self.latents.unsqueeze(0).expand(pos.shape[0], -1, -1)
        latents = self.encode_cross(latents, tokens)
        for block in self.latent_blocks:
            latents = block(latents, latents)
        return latents

    def decode(self, latents: torch.Tensor, query_xyz: torch.Tensor, query_frame: torch.Tensor,
               query_feats: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries [B, Q, 3] at frames [B, Q] -> positions [B, Q, T, 3], visibility logits [B, Q, T]."""
        parts = [query_xyz]
        projected = self._features(query_feats)
        if projected is not None:
            parts.append(projected)
        q = self.query_embed(torch.cat(parts, dim=-1)) + self.frame_embed(query_frame)
        q = self.decode_cross(q, latents)
        b, n = q.shape[:2]
        motion = self.position_head(q).view(b, n, self.cfg.num_frames, 3)
        # our choice: decode motion relative to the query point, anchored so that the track passes
        # exactly through it at its query frame (rigid motion is then shared across an object's points)
        at_query = torch.gather(motion, 2, query_frame[..., None, None].expand(-1, -1, 1, 3))
        positions = query_xyz.unsqueeze(2) + motion - at_query
        return positions, self.visibility_head(q)

    def forward(self, support: dict[str, torch.Tensor],
                query: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        latents = self.encode(support["pos"], support["vis"], support.get("feats"))
        frame = query["frame"]
        idx = frame[..., None, None].expand(-1, -1, 1, 3)
        xyz = torch.gather(query["pos"], 2, idx).squeeze(2)
        qf = None
        if query.get("feats") is not None:
            fidx = frame[..., None, None].expand(-1, -1, 1, query["feats"].shape[-1])
            qf = torch.gather(query["feats"], 2, fidx).squeeze(2)
        return self.decode(latents, xyz, frame, qf)


def paper_loss(pred_pos: torch.Tensor, vis_logits: torch.Tensor, target_pos: torch.Tensor, target_vis: torch.Tensor,
               position_weight: float = POSITION_WEIGHT, visibility_weight: float = VISIBILITY_WEIGHT
               ) -> tuple[torch.Tensor, dict[str, float]]:
    """5000 x L1 over visible target positions (mean per coordinate) + 1e-8 x visibility BCE."""
    mask = target_vis.float().unsqueeze(-1).expand_as(target_pos)
    l1 = (torch.abs(pred_pos - target_pos) * mask).sum() / mask.sum().clamp(min=1.0)
    bce = F.binary_cross_entropy_with_logits(vis_logits, target_vis.float())
    total = position_weight * l1 + visibility_weight * bce
    return total, {"loss": float(total.detach()), "l1": float(l1.detach()), "bce": float(bce.detach())}
