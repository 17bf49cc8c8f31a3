"""Helpful-only alignment probes (issue 10): refusal (XSTest), emergent misalignment (Betley et al.),
sycophancy, steerability and character coherence; ``harness alignment profile`` puts models side by side."""

from harness.tasks.alignment.character import alignment_character
from harness.tasks.alignment.misalignment import alignment_misalignment
from harness.tasks.alignment.refusal import alignment_refusal
from harness.tasks.alignment.steerability import alignment_steerability
from harness.tasks.alignment.sycophancy import alignment_sycophancy

__all__ = ["alignment_character", "alignment_misalignment", "alignment_refusal", "alignment_steerability",
           "alignment_sycophancy"]
