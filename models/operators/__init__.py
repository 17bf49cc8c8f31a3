"""Reliability operators (channel coding for LLM calls) as model combinators.

Use them through the model spec, e.g. ``--model "vote(hf:SmolLM2, n=5, extract=gsm8k)"``. Each
module registers its operators: diversity (select, egc, mrc, vote, self_consistency, wbon), harq
(chase, ir), turbo, rateless, fec, adaptive. The semantic-kNN router (``router``) and the closed
forms (``theory``) are imported on demand (the router needs torch).
"""

from harness.models.operators import adaptive, diversity, fec, harq, rateless, turbo

__all__ = ["adaptive", "diversity", "fec", "harq", "rateless", "turbo"]
