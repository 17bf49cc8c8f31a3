"""Text embeddings from a local transformers directory, and 3DCodeBench's text-image similarity.

* :class:`TextImageEncoder` (``-T text_image_encoder=DIR``): the reference's
  ``metrics/text_image_similarity.py``: a SigLIP / SigLIP-2 / CLIP model with ``get_text_features``
  and ``get_image_features``; the prompt embedded once (the tokenizer of the same directory,
  ``padding="max_length"`` and truncation, as the reference calls its processor), each of the four
  renders embedded like :class:`~harness.tasks.code3d.images.ImageEncoder` does, cosine per view,
  reported as the mean of the four (``text_image_sim``) and their maximum (``text_image_sim_max``).
* :class:`TextEncoder` (``-T uni3d_text_encoder=DIR``): text only, for the prompt-vs-shape cosine
  of Uni3D (the text tower of the CLIP model Uni3D was aligned to, see the README).
* :class:`ImageTower` (``-T uni3d_image_encoder=DIR``): the image tower of that CLIP model, for
  Uni3D's image-vs-shape cosine of the image-to-3D task (embedded like :class:`ImageEncoder` does).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import UserError
from harness.tasks.code3d.images import ImageEncoder

_TEXT_ARGS = ("input_ids", "attention_mask", "position_ids")
_NO_LIMIT = 100_000  # transformers' "no model_max_length" sentinel is far above this


class EncoderDirError(UserError):
    """A model directory that is missing or cannot be loaded as the kind of model an option needs."""


def check_model_dir(path: str, option: str) -> Path:
    p = Path(path)
    if not (p / "config.json").is_file():
        raise EncoderDirError(f"-T {option}={path}: not a local transformers model directory (no config.json)")
    return p


def _load_error(path: str, option: str, exc: BaseException) -> EncoderDirError:
    text = str(exc).strip().splitlines()
    return EncoderDirError(f"-T {option}={path}: cannot load it ({text[0][:200] if text else type(exc).__name__})")


def load_tokenizer(path: str, option: str) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise _load_error(path, option, exc) from None


def text_features(model: Any, tokenizer: Any, texts: list[str], device: str) -> np.ndarray:
    """(T, D) unit vectors: the tokenizer's output for ``padding="max_length", truncation=True``
    (SigLIP pools its last position, so the padding length is part of the model) into
    ``get_text_features``."""
    import torch

    limit = getattr(tokenizer, "model_max_length", None)
    if not isinstance(limit, int) or limit > _NO_LIMIT:  # no length saved with the tokenizer
        cfg = getattr(model.config, "text_config", model.config)
        limit = int(getattr(cfg, "max_position_embeddings", 64))
    enc = tokenizer(texts, padding="max_length", truncation=True, max_length=limit, return_tensors="pt")
    inputs = {k: v.to(device) for k, v in enc.items() if k in _TEXT_ARGS}
    with torch.inference_mode():
        out = model.get_text_features(**inputs)
    feats = out if isinstance(out, torch.Tensor) else out.pooler_output
    feats = feats.float()
    return (feats / feats.norm(dim=-1, keepdim=True)).cpu().numpy()


def _open_image_encoder(encoder: ImageEncoder, path: str, device: str, option: str) -> None:
    """``ImageEncoder.__init__`` on ``encoder``, a missing or unloadable directory one line naming ``option``."""
    check_model_dir(path, option)
    try:
        ImageEncoder.__init__(encoder, path, device)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise _load_error(path, option, exc) from None


class TextImageEncoder(ImageEncoder):
    """Prompt-vs-render cosine (the image side is :class:`ImageEncoder`'s, same directory)."""

    OPTION = "text_image_encoder"

    def __init__(self, path: str, device: str = "cpu") -> None:
        _open_image_encoder(self, path, device, self.OPTION)
        if not (hasattr(self.model, "get_text_features") and hasattr(self.model, "get_image_features")):
            raise EncoderDirError(f"-T {self.OPTION}={path}: {type(self.model).__name__} is not a text-image "
                                  "model (needs get_text_features and get_image_features: SigLIP, CLIP)")  # fmt: skip
        self.tokenizer = load_tokenizer(path, self.OPTION)
        self._lock = threading.Lock()
        self._text_cache: dict[str, np.ndarray] = {}

    def embed_text(self, text: str) -> np.ndarray:
        with self._lock:
            if text not in self._text_cache:  # the reference's GT baseline reuses the prompt's embedding
                self._text_cache[text] = text_features(self.model, self.tokenizer, [text], self.device)[0]
            return self._text_cache[text]

    def text_similarity(self, text: str, views: np.ndarray) -> dict[str, float]:
        """Prompt vs each of ``views`` ((V, H, W, 3|4) uint8): mean and max cosine over the views."""
        t = self.embed_text(text)
        with self._lock:
            sims = self.embed(views) @ t
        return {"text_image_sim": float(np.mean(sims)), "text_image_sim_max": float(np.max(sims))}


class TextEncoder:
    """A transformers model with ``get_text_features`` and its tokenizer, for the Uni3D text cosine."""

    OPTION = "uni3d_text_encoder"

    def __init__(self, path: str, device: str | None = None) -> None:
        import torch
        from transformers import AutoModel

        check_model_dir(path, self.OPTION)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.model = AutoModel.from_pretrained(path).to(self.device).eval()
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise _load_error(path, self.OPTION, exc) from None
        if not hasattr(self.model, "get_text_features"):
            raise EncoderDirError(f"-T {self.OPTION}={path}: {type(self.model).__name__} has no text tower "
                                  "(needs get_text_features: a CLIP model)")  # fmt: skip
        self.tokenizer = load_tokenizer(path, self.OPTION)
        self._lock = threading.Lock()

    def embed(self, text: str) -> np.ndarray:
        with self._lock:
            return text_features(self.model, self.tokenizer, [text], self.device)[0]


class ImageTower(ImageEncoder):
    """A transformers model with ``get_image_features`` (a CLIP image tower), for the Uni3D image
    cosine; preprocessing and unit embeddings are :class:`ImageEncoder`'s."""

    OPTION = "uni3d_image_encoder"

    def __init__(self, path: str, device: str = "cpu") -> None:
        _open_image_encoder(self, path, device, self.OPTION)
        if not hasattr(self.model, "get_image_features"):  # a DINO has a pooler but is not CLIP's space
            raise EncoderDirError(f"-T {self.OPTION}={path}: {type(self.model).__name__} has no image tower "
                                  "(needs get_image_features: a CLIP model)")  # fmt: skip
        self._lock = threading.Lock()

    def embed_one(self, view: np.ndarray) -> np.ndarray:
        """(H, W, 3|4) uint8 -> (D,) unit vector."""
        with self._lock:  # measure() runs in worker threads
            return self.embed(view[None])[0]

    def dimension(self) -> int:
        side = self.crop_to or self.resize_to
        return len(self.embed_one(np.zeros((side, side, 3), dtype=np.uint8)))
