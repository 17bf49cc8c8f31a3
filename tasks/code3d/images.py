"""Image similarity between a candidate's four renders and the reference views.

The reference scores cosine similarity of SigLIP-2 / DINOv2-L / DINOv3-L embeddings. No such model
can be loaded here (no hub access, and no PyPI package ships those weights), so this module computes
a documented, model-free fallback on small RGBA thumbnails (64 px, made by the Blender worker):

* ``silhouette_iou``: IoU of the alpha masks (alpha > 0.5): shape and pose agreement per view;
* ``ssim``: mean SSIM (Wang et al. 2004; 7x7 uniform window, K1=0.01, K2=0.03, data range 1) of the
  luminance composited over white.

With ``-T image_encoder=DIR`` (a local transformers SigLIP-2 / DINOv2 / DINOv3 directory) the
reference's embedding cosine is computed as well (``img_emb_paired`` / ``img_emb_matched``, see
``ImageEncoder``); the shipped tests use a tiny randomly initialised DINOv2 for the code path.

The pixel metrics are reported view-paired (view i with view i, as the reference's "paired" mean) and
Hungarian-matched over the 4x4 view grid (the reference's second variant, which forgives a yaw
offset). Failed samples score 0 in the penalised means. These numbers are NOT comparable with the
paper's embedding similarities; they are named ``img_iou_*`` and ``img_ssim_*`` to say so.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.ndimage import uniform_filter
from scipy.optimize import linear_sum_assignment

_K1, _K2, _WIN = 0.01, 0.03, 7


def _luminance_on_white(rgba: np.ndarray) -> np.ndarray:
    img = rgba.astype(np.float64) / 255.0
    alpha = img[..., 3:4]
    rgb = img[..., :3] * alpha + (1 - alpha)
    return rgb @ np.array([0.299, 0.587, 0.114])


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two grey images in [0, 1] (equal shape)."""
    c1, c2 = _K1**2, _K2**2
    mu_a, mu_b = uniform_filter(a, _WIN), uniform_filter(b, _WIN)
    var_a = uniform_filter(a * a, _WIN) - mu_a**2
    var_b = uniform_filter(b * b, _WIN) - mu_b**2
    cov = uniform_filter(a * b, _WIN) - mu_a * mu_b
    num = (2 * mu_a * mu_b + c1) * (2 * cov + c2)
    den = (mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2)
    return float(np.mean(num / den))


def silhouette_iou(a: np.ndarray, b: np.ndarray) -> float:
    ma, mb = a[..., 3] > 127, b[..., 3] > 127
    union = np.logical_or(ma, mb).sum()
    return float(np.logical_and(ma, mb).sum() / union) if union else 1.0


def view_similarity(pred: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """pred, ref: (V, S, S, 4) uint8 thumbnails (same S). Paired and Hungarian-matched means."""
    if pred.shape != ref.shape or pred.ndim != 4 or pred.shape[-1] != 4:
        raise ValueError(f"thumbnail shapes differ or are not (V, S, S, 4): {pred.shape} vs {ref.shape}")
    n = len(pred)
    grey_p = [_luminance_on_white(v) for v in pred]
    grey_r = [_luminance_on_white(v) for v in ref]
    iou = np.array([[silhouette_iou(pred[i], ref[j]) for j in range(n)] for i in range(n)])
    sim = np.array([[ssim(grey_p[i], grey_r[j]) for j in range(n)] for i in range(n)])
    out = {"img_iou_paired": float(np.mean(np.diag(iou))), "img_ssim_paired": float(np.mean(np.diag(sim)))}
    for name, grid in (("img_iou_matched", iou), ("img_ssim_matched", sim)):
        rows, cols = linear_sum_assignment(-grid)
        out[name] = float(grid[rows, cols].mean())
    return out


class ImageEncoder:
    """Embedding similarity as the reference computes it (metrics/image_similarity.py): a
    transformers vision model loaded with ``from_pretrained`` from a local directory (SigLIP-2 via
    ``get_image_features``, DINOv2/v3 via ``pooler_output``), L2-normalised embeddings, cosine per
    view pair, view-paired mean and Hungarian-matched mean. Images go in as RGB with the alpha
    channel dropped, like PIL's ``convert("RGB")`` in the reference. Preprocessing follows the
    model's ``preprocessor_config.json`` (resize, centre crop, mean/std) in torch, because the host
    has no PIL; that is a reimplementation of the processors' arithmetic, not their exact resampler.
    """

    def __init__(self, path: str, device: str = "cpu") -> None:
        import torch
        from transformers import AutoModel

        self.torch = torch
        self.path = path
        self.model = AutoModel.from_pretrained(path).to(device).eval()
        self.device = device
        self.kind = "siglip" if hasattr(self.model, "get_image_features") else "pooler"
        cfg = _read_json(Path(path) / "preprocessor_config.json")
        size = cfg.get("size", {"height": 224, "width": 224})
        crop = cfg.get("crop_size") if cfg.get("do_center_crop", "crop_size" in cfg) else None
        edge = (size.get("shortest_edge") or size.get("height") or 224) if isinstance(size, dict) else size
        self.resize_to = int(edge)
        self.crop_to = int(crop.get("height", self.resize_to)) if isinstance(crop, dict) else None
        self.mean = torch.tensor(cfg.get("image_mean", [0.485, 0.456, 0.406])).view(1, 3, 1, 1)
        self.std = torch.tensor(cfg.get("image_std", [0.229, 0.224, 0.225])).view(1, 3, 1, 1)

    def embed(self, views: np.ndarray) -> np.ndarray:
        """(V, H, W, 3|4) uint8 -> (V, D) unit vectors."""
        torch = self.torch
        x = torch.from_numpy(np.ascontiguousarray(views[..., :3])).permute(0, 3, 1, 2).float() / 255.0
        x = torch.nn.functional.interpolate(x, size=(self.resize_to, self.resize_to), mode="bicubic",
                                            align_corners=False, antialias=True).clamp(0, 1)  # fmt: skip
        if self.crop_to and self.crop_to < self.resize_to:
            off = (self.resize_to - self.crop_to) // 2
            x = x[:, :, off : off + self.crop_to, off : off + self.crop_to]
        x = ((x - self.mean) / self.std).to(self.device)
        with torch.no_grad():
            if self.kind == "siglip":
                out = self.model.get_image_features(pixel_values=x)
                feats = out if isinstance(out, torch.Tensor) else out.pooler_output
            else:
                feats = self.model(pixel_values=x).pooler_output
        feats = feats / feats.norm(dim=-1, keepdim=True)
        return feats.cpu().numpy()

    def similarity(self, pred: np.ndarray, ref: np.ndarray) -> dict[str, float]:
        a, b = self.embed(pred), self.embed(ref)
        grid = a @ b.T
        rows, cols = linear_sum_assignment(-grid)
        return {"img_emb_paired": float(np.mean(np.diag(grid))), "img_emb_matched": float(grid[rows, cols].mean())}


def _read_json(path: Path) -> dict:
    import json

    return json.loads(path.read_text()) if path.is_file() else {}
