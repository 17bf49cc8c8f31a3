"""GSM8K answer extraction and exact match exactly as lm-evaluation-harness scores its ``gsm8k`` task.

The rules are the core's (:mod:`harness.numbers`, section 1, where they are stated in full): every
family that reads a number uses them from there. This module keeps the family's names for them.
"""

from __future__ import annotations

from harness.numbers import FALLBACK, em_normalise, exact_match, flexible_extract, strict_match

__all__ = ["FALLBACK", "em_normalise", "exact_match", "flexible_extract", "strict_match"]
