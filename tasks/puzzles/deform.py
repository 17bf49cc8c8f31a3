"""A deformable 2-D convolution in plain torch (bilinear sampling), for CPU torch builds where
torchvision's ``deform_conv2d`` does not load.

``deform_conv2d(x, offset, weight, bias)`` follows torchvision's conventions: stride 1, zero padding
``k // 2`` (a same-size output), ``offset`` of shape [B, 2*kh*kw, H, W] holding (dy, dx) for each
kernel tap in row-major order, in pixels. Tap k of output pixel (y, x) reads the input at
(y + i_k - kh//2 + dy, x + j_k - kw//2 + dx), bilinearly interpolated, zero outside the image; the
weighted sum over taps and channels is a 1x1 convolution of the stacked samples. At zero offsets
it is exactly ``conv2d(x, weight, bias, padding=k // 2)`` (every tap lands on a pixel centre).
"""

from __future__ import annotations

from typing import Any


def deform_conv2d(x: Any, offset: Any, weight: Any, bias: Any = None) -> Any:
    import torch
    import torch.nn.functional as F

    B, C, H, W = x.shape
    n_out, Cw, kh, kw = weight.shape
    if Cw != C:
        raise ValueError(f"weight expects {Cw} input channels, the input has {C}")
    K = kh * kw
    if offset.shape != (B, 2 * K, H, W):
        raise ValueError(f"offset must be [B, {2 * K}, H, W], got {list(offset.shape)}")
    ti = torch.arange(K, device=x.device) // kw - kh // 2  # tap row offsets, row-major taps
    tj = torch.arange(K, device=x.device) % kw - kw // 2
    off = offset.view(B, K, 2, H, W)
    py = torch.arange(H, dtype=x.dtype, device=x.device).view(1, 1, H, 1) + ti.view(1, K, 1, 1) + off[:, :, 0]
    px = torch.arange(W, dtype=x.dtype, device=x.device).view(1, 1, 1, W) + tj.view(1, K, 1, 1) + off[:, :, 1]
    # grid_sample's align_corners=True maps -1 / +1 to the first / last pixel centres; all taps are
    # sampled in one call by laying them side by side along the width
    gy = 2 * py / max(H - 1, 1) - 1
    gx = 2 * px / max(W - 1, 1) - 1
    grid = torch.stack([gx, gy], dim=-1).permute(0, 2, 1, 3, 4).reshape(B, H, K * W, 2)  # [B, H, K*W, (x, y)]
    sampled = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True)  # [B, C, H, K*W]
    stacked = sampled.view(B, C, H, K, W).permute(0, 1, 3, 2, 4).reshape(B, C * K, H, W)  # channel-major, then tap
    return F.conv2d(stacked, weight.reshape(n_out, C * K, 1, 1), bias)


def deform_module(channels_in: int, channels_out: int, kernel: int = 3) -> Any:
    """A deformable conv layer whose offsets are predicted from its input by a zero-initialised 3x3
    conv (it starts as a plain convolution and learns where to look)."""
    import torch

    class DeformConv(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(channels_out, channels_in, kernel, kernel))
            self.bias = torch.nn.Parameter(torch.zeros(channels_out))
            torch.nn.init.kaiming_uniform_(self.weight, a=5**0.5)
            self.offset = torch.nn.Conv2d(channels_in, 2 * kernel * kernel, 3, padding=1)
            torch.nn.init.zeros_(self.offset.weight)
            assert self.offset.bias is not None  # Conv2d's bias=True
            torch.nn.init.zeros_(self.offset.bias)

        def forward(self, x: Any) -> Any:
            return deform_conv2d(x, self.offset(x), self.weight, self.bias)

    return DeformConv()
