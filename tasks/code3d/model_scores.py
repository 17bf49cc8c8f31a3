"""The optional model-based scores of 3DCodeBench: text-image similarity and Uni3D cosines.

Each is on only when its option names local weights; with none given nothing here loads or runs, so
default runs cost nothing more. The models are loaded when the task is built, so a bad directory or a
checkpoint that does not fit is one line before any sample runs.

* ``text_image_sim`` / ``text_image_sim_max`` (``-T text_image_encoder=DIR``): the prompt the model
  was given vs each of the four renders, mean and max over the views (the reference's
  ``text_image_similarity.py``); ``text_image_sim_gt`` is the same for the reference views (its
  "GT baseline"). Text-to-3D only (an image-input run has no prompt to compare), as in the reference.
* ``uni3d_shape_sim`` (``-T uni3d=CKPT``): cosine of the Uni3D embeddings of the candidate's and the
  reference's surface samples (the reference's ``cos_3d_3d``); ``uni3d_text_sim``
  (+ ``-T uni3d_text_encoder=DIR``): the object's description vs the candidate's embedding
  (``cos_text_3d``; the reference uses ``prompt_description.txt`` whatever the prompt type), text-to-3D only.
* ``uni3d_image_sim`` (+ ``-T uni3d_image_encoder=DIR``): the reference's first view (``Image_005.png``)
  through the image tower of the same CLIP model vs the candidate's embedding (``cos_image_3d``),
  image-to-3D only; in a text-to-3D run the tower is not even loaded.

A failed execution has none of these; the penalised means count it as 0, as the reference's do.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import RunConfigError

if TYPE_CHECKING:
    from harness.tasks.code3d.executor import ExecResult
    from harness.tasks.code3d.references import Reference
    from harness.tasks.code3d.task import Code3DConfig

MODEL_METRIC_WORDS = {
    "text_image_sim": "prompt-render cosine, mean of 4 views",
    "text_image_sim_max": "prompt-render cosine, max of 4 views",
    "uni3d_shape_sim": "Uni3D cosine, candidate vs reference shape",
    "uni3d_text_sim": "Uni3D cosine, description vs candidate shape",
    "uni3d_image_sim": "Uni3D cosine, first reference view vs candidate shape",
}
FIRST_VIEW = "Image_005.png"  # the view the reference's shape_uni3d.py embeds for image-to-3D


class ModelOptionError(RunConfigError):
    """Model options that do not go together (one line)."""


def check_model_options(cfg: Code3DConfig) -> None:
    """The towers compare text or an image with Uni3D's shape embedding: useless without it."""
    for option in ("uni3d_text_encoder", "uni3d_image_encoder"):
        if getattr(cfg, option) and not cfg.uni3d:
            what = "the prompt" if option == "uni3d_text_encoder" else "the first reference view"
            raise ModelOptionError(f"-T {option} needs -T uni3d=CKPT ({what} is compared with Uni3D's shape "
                                   "embedding)")  # fmt: skip


def first_view_index(renders: list[str]) -> int:
    """Where ``Image_005.png`` is among the reference views (our renders start with it; given views
    under other names: the first, which is what the model saw first)."""
    names = [Path(r).name for r in renders]
    return names.index(FIRST_VIEW) if FIRST_VIEW in names else 0


@dataclass
class ModelScorers:
    text_image: Any = None  # text_image.TextImageEncoder
    uni3d: Any = None  # uni3d.Uni3DScorer
    uni3d_text: Any = None  # text_image.TextEncoder
    uni3d_image: Any = None  # text_image.ImageTower (image-to-3D runs only)
    text_input: bool = True  # the model was given text (not the reference views)
    _ref_emb: dict[str, Any] = field(default_factory=dict)  # reference points file -> Uni3D embedding
    _view_emb: dict[tuple[str, int], Any] = field(default_factory=dict)  # (reference views, index) -> image emb
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, cfg: Code3DConfig) -> ModelScorers:
        check_model_options(cfg)
        scorers = cls(text_input=not cfg.image_input)
        if not (cfg.text_image_encoder or cfg.uni3d):
            return scorers  # the default: torch is not even imported
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        if cfg.text_image_encoder:
            from harness.tasks.code3d.text_image import TextImageEncoder

            scorers.text_image = TextImageEncoder(cfg.text_image_encoder, device)
        if cfg.uni3d:
            from harness.tasks.code3d.uni3d import Uni3DScorer

            scorers.uni3d = Uni3DScorer(cfg.uni3d, device)
        if cfg.uni3d_text_encoder:
            from harness.tasks.code3d.text_image import TextEncoder

            scorers.uni3d_text = TextEncoder(cfg.uni3d_text_encoder, device)
            dim = len(scorers.uni3d_text.embed("a chair"))
            if dim != scorers.uni3d.cfg.embed_dim:
                from harness.tasks.code3d.text_image import EncoderDirError

                raise EncoderDirError(f"-T uni3d_text_encoder={cfg.uni3d_text_encoder}: its text embeddings have {dim} "
                                      f"dimensions, Uni3D's space has {scorers.uni3d.cfg.embed_dim} (it must be the "
                                      "text tower of OpenCLIP EVA02-E-14-plus)")  # fmt: skip
        if cfg.uni3d_image_encoder and cfg.image_input:  # the reference scores the image cosine for image-to-3D only
            from harness.tasks.code3d.text_image import ImageTower

            scorers.uni3d_image = ImageTower(cfg.uni3d_image_encoder, device)
            dim = scorers.uni3d_image.dimension()
            if dim != scorers.uni3d.cfg.embed_dim:
                from harness.tasks.code3d.text_image import EncoderDirError

                raise EncoderDirError(f"-T uni3d_image_encoder={cfg.uni3d_image_encoder}: its image embeddings have "
                                      f"{dim} dimensions, Uni3D's space has {scorers.uni3d.cfg.embed_dim} (it must be "
                                      "the image tower of OpenCLIP EVA02-E-14-plus)")  # fmt: skip
        return scorers

    def reference_embedding(self, points_file: str) -> Any:
        import numpy as np

        with self._lock:  # every round of every candidate of an object compares with the same reference
            if points_file not in self._ref_emb:
                self._ref_emb[points_file] = self.uni3d.embed(np.load(points_file, allow_pickle=False))
            return self._ref_emb[points_file]

    def reference_view_embedding(self, ref: Reference) -> Any:
        """The image tower's unit embedding of the reference's first view (None without full-size views)."""
        import numpy as np

        if not ref.views or not ref.renders:
            return None
        key = (ref.views, first_view_index(ref.renders))
        with self._lock:  # once per reference, whatever the number of candidates and rounds
            if key not in self._view_emb:
                views = np.load(ref.views, allow_pickle=False)
                self._view_emb[key] = self.uni3d_image.embed_one(views[key[1]]) if key[1] < len(views) else None
            return self._view_emb[key]

    def measure(self, result: ExecResult, ref: Reference, prompt: str, description: str) -> dict[str, float]:
        """The scores of one executed candidate (empty for a failed one or with no scorer loaded)."""
        import numpy as np

        values: dict[str, float] = {}
        if not result.ok:
            return values
        if self.text_image is not None and self.text_input and result.views_npy:
            values.update(self.text_image.text_similarity(prompt, np.load(result.views_npy, allow_pickle=False)))
        if self.uni3d is not None and result.points:
            emb = self.uni3d.embed(np.load(result.points, allow_pickle=False))
            if ref.points:
                values["uni3d_shape_sim"] = float(emb @ self.reference_embedding(ref.points))
            if self.uni3d_text is not None and self.text_input:
                values["uni3d_text_sim"] = float(emb @ self.uni3d_text.embed(description))
            if self.uni3d_image is not None and not self.text_input:
                view = self.reference_view_embedding(ref)
                if view is not None:
                    values["uni3d_image_sim"] = float(emb @ view)
        return values

    def reference_baseline(self, ref: Reference, prompt: str) -> dict[str, float]:
        """The prompt vs the reference views: the ceiling the reference reports beside the renders."""
        import numpy as np

        if self.text_image is None or not self.text_input or not ref.views:
            return {}
        return {"text_image_sim_gt": self.text_image.text_similarity(prompt, np.load(ref.views))["text_image_sim"]}
