"""PartVerse-QA (3D-PLOT-LLM): part-slot QA both ways, plus Objaverse captioning and 3DCoMPaT-GrIn."""

from harness.tasks.partverse.task import compat_grin, objaverse_caption, partverse_c2s, partverse_s2c

__all__ = ["compat_grin", "objaverse_caption", "partverse_c2s", "partverse_s2c"]
