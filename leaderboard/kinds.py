"""Which kind of model a leaderboard line is (LLM, method, agent, stub), and whether a judge is a stub.

A kind is declared by the backend when it registers (``@model(..., kind=...)``, see
:data:`harness.registry.MODEL_KINDS`) and stored on the model row's ``info`` when the runner
creates the row. The overview ranks a model only against models of its own kind: a k-means fit, a
Crafter agent and an LLM have no common scale on which "beats" means anything.

Which declaration counts: the operator's own rows keep the kind stored when they were run, falling
back to this process's registry for rows older than kinds. A push token's row is the registry's
whenever its backend is registered here (the code's declaration, not the pusher's claim), the
stored claim only for a backend unknown here. A spec nobody declares is ``unknown``: listed on its
own, never ranked against a declared kind.

A run whose judge is a stub backend (``builtin:constant`` replying a canned verdict) has scores that
measure nothing; such runs are marked wherever they are shown and never ranked.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from harness.modelspec import spec_kind
from harness.registry import MODEL_KINDS
from harness.store.schema import OPERATOR

UNKNOWN = "unknown"
# the order lists appear in on the overview: what people come for first
KIND_ORDER: tuple[str, ...] = ("llm", "agent", "method", "stub", UNKNOWN)
KIND_LABELS = {"llm": "LLMs", "agent": "Agents", "method": "Methods", "stub": "Built-in stubs",
               UNKNOWN: "Undeclared kind"}
KIND_NOTES = {
    "llm": "language models and operators over them",
    "agent": "agents acting in an environment or a decision loop",
    "method": "trained or fitted methods (clustering, transport, conformal prediction, ...)",
    "stub": "the harness's instant built-in models: canned replies, for demos and tests",
    UNKNOWN: "backends not registered on this server and without a stored kind",
}


@lru_cache(maxsize=4096)
def declared_kind(spec: str) -> str | None:
    """The registry's kind for a model spec (None: a backend not registered in this process)."""
    return spec_kind(spec)


def model_kind(info: Mapping[str, Any] | None, spec: str, owner: str = OPERATOR) -> str:
    """The kind a model row ranks under (see the module docstring); always one of :data:`KIND_ORDER`."""
    stored = (info or {}).get("kind")
    stored = stored if isinstance(stored, str) and stored in MODEL_KINDS else None
    if owner == OPERATOR and stored:
        return stored
    return declared_kind(spec) or stored or UNKNOWN


def judge_is_stub(judge_spec: str | None) -> bool:
    """Whether a run's judge is a stub backend by the registry's declaration (an unknown judge is not)."""
    return bool(judge_spec) and declared_kind(str(judge_spec)) == "stub"
