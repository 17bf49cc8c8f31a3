"""A small differentiable Gaussian-splatting rasteriser in plain torch (no tiles, no CUDA).

The steps are those of 3D Gaussian Splatting (Kerbl et al. 2023): each Gaussian's mean goes to
camera space (OpenCV convention: x right, y down, z forward) and is projected with the pinhole
model; its 3D covariance R S S^T R^T is carried to the image through the Jacobian of the
projection (EWA splatting) and dilated by 0.3 px^2 (the reference's low-pass filter); Gaussians are
sorted front to back by camera depth and alpha-composited, alpha = min(0.99, o * exp(-d^T S2^-1 d / 2))
with contributions under 1/255 dropped, exactly as the reference's forward pass does. Instead of
16x16 tiles every Gaussian is evaluated at every requested pixel, so memory is N x P: train on
random pixel batches and render full images in chunks. Gradients come from autograd.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
NEAR = 0.05
ALPHA_MAX = 0.99
ALPHA_MIN = 1.0 / 255.0
DILATION = 0.3  # px^2 added to the 2D covariance's diagonal


@dataclass
class TorchCamera:
    """A camera as torch tensors: ``w2c`` 4x4 world-to-camera in the OpenCV convention."""

    w2c: Any
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    @property
    def center(self) -> Any:
        import torch

        return torch.linalg.inv(self.w2c)[:3, 3]


def torch_camera(camera: Any, device: str = "cpu") -> TorchCamera:
    """From a :class:`harness.tasks.nvs.scenes.Camera` (c2w, OpenGL convention: -Z forward, +Y up)."""
    import torch

    c2w = torch.tensor(camera.c2w, dtype=torch.float32, device=device)
    flip = torch.diag(torch.tensor([1.0, -1.0, -1.0, 1.0], device=device))  # OpenGL -> OpenCV axes
    w2c = torch.linalg.inv(c2w @ flip)
    return TorchCamera(w2c, camera.fx, camera.fy, camera.cx, camera.cy, camera.width, camera.height)


def quat_to_rotmat(q: Any) -> Any:
    import torch

    q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    w, x, y, z = q.unbind(-1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], dim=-1).reshape(*q.shape[:-1], 3, 3)  # fmt: skip


def sh_to_rgb(sh: Any, dirs: Any) -> Any:
    """Degree-0/1 spherical harmonics (N, K, 3) with K in {1, 4} evaluated at unit directions (N, 3)."""
    rgb = SH_C0 * sh[:, 0]
    if sh.shape[1] >= 4:
        x, y, z = dirs[:, 0:1], dirs[:, 1:2], dirs[:, 2:3]
        rgb = rgb - SH_C1 * y * sh[:, 1] + SH_C1 * z * sh[:, 2] - SH_C1 * x * sh[:, 3]
    return (rgb + 0.5).clamp_min(0.0)


@dataclass
class Projected:
    uv: Any  # (N, 2) pixel coordinates of the means
    depth: Any  # (N,) camera z
    conic: Any  # (N, 3) inverse 2D covariance (a, b, c): [[a, b], [b, c]]
    valid: Any  # (N,) bool: in front of the near plane with a positive-definite footprint
    radius: Any  # (N,) 3 sigma of the footprint's major axis in pixels (the reference's culling radius)


def project(means: Any, scales: Any, quats: Any, cam: TorchCamera) -> Projected:
    """``scales`` are the standard deviations along the Gaussian's axes (not logs)."""
    import torch

    R, t = cam.w2c[:3, :3], cam.w2c[:3, 3]
    p = means @ R.T + t
    z = p[:, 2]
    zs = z.clamp_min(NEAR)
    # the reference clamps the tangent used in the Jacobian to 1.3x the field of view (stability
    # for Gaussians far outside the frustum)
    lim_x = 1.3 * (0.5 * cam.width / cam.fx)
    lim_y = 1.3 * (0.5 * cam.height / cam.fy)
    tx = (p[:, 0] / zs).clamp(-lim_x, lim_x) * zs
    ty = (p[:, 1] / zs).clamp(-lim_y, lim_y) * zs
    zero = torch.zeros_like(zs)
    J = torch.stack([
        torch.stack([cam.fx / zs, zero, -cam.fx * tx / zs**2], -1),
        torch.stack([zero, cam.fy / zs, -cam.fy * ty / zs**2], -1),
    ], dim=1)  # (N, 2, 3)  # fmt: skip
    M = quat_to_rotmat(quats) * scales[:, None, :]  # R S
    cov3 = M @ M.transpose(1, 2)
    T = J @ R
    cov2 = T @ cov3 @ T.transpose(1, 2)
    a = cov2[:, 0, 0] + DILATION
    b = cov2[:, 0, 1]
    c = cov2[:, 1, 1] + DILATION
    det = a * c - b * b
    valid = (z > NEAR) & (det > 0)
    det = torch.where(valid, det, torch.ones_like(det))
    conic = torch.stack([c / det, -b / det, a / det], -1)
    uv = torch.stack([cam.fx * p[:, 0] / zs + cam.cx, cam.fy * p[:, 1] / zs + cam.cy], -1)
    mid = 0.5 * (a + c)
    radius = 3.0 * torch.sqrt(mid + torch.sqrt((mid * mid - det).clamp_min(0.1)))
    return Projected(uv, z, conic, valid, radius.detach())


def pixel_grid(width: int, height: int, device: str = "cpu") -> Any:
    """(H*W, 2) pixel-centre coordinates (x, y), row-major."""
    import torch

    ys, xs = torch.meshgrid(torch.arange(height, device=device), torch.arange(width, device=device), indexing="ij")
    return torch.stack([xs.reshape(-1), ys.reshape(-1)], -1).float() + 0.5


def composite(proj: Projected, opacities: Any, colors: Any, pixels: Any, background: float | Any = 1.0) -> tuple:
    """Alpha-composite front to back at ``pixels`` (P, 2). Returns rgb (P, 3), expected depth (P,)
    (sum of weight x z, not normalised) and accumulated alpha (P,)."""
    import torch

    order = torch.argsort(proj.depth.detach())
    uv, conic, z = proj.uv[order], proj.conic[order], proj.depth[order]
    op = (opacities * proj.valid.to(opacities.dtype))[order]
    col = colors[order]
    d = pixels[None, :, :] - uv[:, None, :]  # (N, P, 2)
    power = -0.5 * (conic[:, None, 0] * d[..., 0] ** 2 + conic[:, None, 2] * d[..., 1] ** 2) \
        - conic[:, None, 1] * d[..., 0] * d[..., 1]
    alpha = (op[:, None] * torch.exp(power.clamp_max(0.0))).clamp_max(ALPHA_MAX)
    alpha = torch.where(alpha < ALPHA_MIN, torch.zeros_like(alpha), alpha)
    trans = torch.cumprod(1.0 - alpha, dim=0)
    trans = torch.cat([torch.ones_like(trans[:1]), trans[:-1]], dim=0)  # exclusive: light reaching Gaussian i
    w = trans * alpha
    acc = w.sum(0)
    rgb = w.T @ col + (1.0 - acc)[:, None] * background
    depth = w.T @ z
    return rgb, depth, acc


def _select(proj: Projected, keep: Any) -> Projected:
    return Projected(proj.uv[keep], proj.depth[keep], proj.conic[keep], proj.valid[keep], proj.radius[keep])


def cull(proj: Projected, x0: float, y0: float, x1: float, y1: float) -> Any:
    """Indices of the Gaussians whose 3-sigma square overlaps the pixel rectangle [x0, x1) x [y0, y1)."""
    u, v, r = proj.uv[:, 0].detach(), proj.uv[:, 1].detach(), proj.radius
    hit = proj.valid & (u + r > x0) & (u - r < x1) & (v + r > y0) & (v - r < y1)
    return hit.nonzero().squeeze(1)


def render_rect(proj: Projected, opacities: Any, colors: Any, x0: int, y0: int, x1: int, y1: int,
                background: float = 1.0) -> tuple:
    """Composite the pixels of one rectangle (row-major) from the Gaussians that overlap it."""
    import torch

    ys, xs = torch.meshgrid(torch.arange(y0, y1), torch.arange(x0, x1), indexing="ij")
    pix = torch.stack([xs.reshape(-1), ys.reshape(-1)], -1).float().to(proj.uv.device) + 0.5
    keep = cull(proj, x0, y0, x1, y1)
    if len(keep) == 0:
        n = len(pix)
        return (torch.full((n, 3), background, device=pix.device), torch.zeros(n, device=pix.device),
                torch.zeros(n, device=pix.device))
    return composite(_select(proj, keep), opacities[keep], colors[keep], pix, background)


def render(means: Any, scales: Any, quats: Any, opacities: Any, colors: Any, cam: TorchCamera,
           pixels: Any | None = None, background: float = 1.0, tile: int = 16,
           rect: tuple[int, int, int, int] | None = None) -> dict[str, Any]:
    """Render. ``colors`` is (N, 3), already evaluated for this camera. With ``pixels`` (P, 2): those
    pixels from every Gaussian (no culling). With ``rect`` (x0, y0, x1, y1): that patch from the
    Gaussians overlapping it, flat (P,) arrays. Otherwise the full image tile by tile (``tile`` px
    squares, each from the Gaussians whose 3-sigma footprint overlaps it), as HxW arrays."""
    import torch

    proj = project(means, scales, quats, cam)
    if pixels is not None:
        rgb, depth, acc = composite(proj, opacities, colors, pixels, background)
        return {"rgb": rgb, "depth": depth, "alpha": acc}
    if rect is not None:
        rgb, depth, acc = render_rect(proj, opacities, colors, *rect, background=background)
        return {"rgb": rgb, "depth": depth, "alpha": acc}
    h, w = cam.height, cam.width
    rows = []
    for y0 in range(0, h, tile):
        cols = []
        for x0 in range(0, w, tile):
            x1, y1 = min(x0 + tile, w), min(y0 + tile, h)
            rgb, depth, acc = render_rect(proj, opacities, colors, x0, y0, x1, y1, background)
            cols.append(torch.cat([rgb, depth[:, None], acc[:, None]], 1).reshape(y1 - y0, x1 - x0, 5))
        rows.append(torch.cat(cols, 1))
    img = torch.cat(rows, 0)
    return {"rgb": img[..., :3], "depth": img[..., 3], "alpha": img[..., 4]}
