"""Reliability operators (channel coding for LLM calls) as model combinators.

Use them through the model spec, e.g. ``--model "vote(hf:SmolLM2, n=5, extract=gsm8k)"``. Each
module registers its operators: diversity (select, egc, mrc, vote, self_consistency, wbon), harq
(chase, ir), turbo, rateless, fec, adaptive, and routed (semknn: a fitted router as an operator). The
router (``router``, torch imported on first embedding) and the closed forms (``theory``) hold the maths.
"""

from harness.models.operators import adaptive, diversity, fec, harq, rateless, routed, turbo

__all__ = ["adaptive", "diversity", "fec", "harq", "rateless", "routed", "turbo"]
