"""``semknn``: the fitted SemKNN router as an operator, for routing new prompts online.

    harness reliability fit-router -t reliability --db $DB --out router.npz
    harness eval -t my_task -m "semknn(hf:m, vote(hf:m, n=5), turbo(hf:m), router='router.npz', lam=0.05)"

The positional models are the router's techniques *in the order* ``fit-router`` printed (and stored
in the file); each request's user text is embedded, the technique with the highest
``kNN mean quality - lam * cost`` answers it, and its Output is passed through with
``details["routed_to"]`` added (an operator's own cost trace stays; a plain model's single call gets
a one-call cost split). The embedding runs locally and is not counted as cost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.backend_settings import Setting
from harness.model import Model
from harness.models.operators.base import OperatorError, check_params
from harness.models.operators.cost import Call, cost_split
from harness.models.operators.router import SemKNNRouter, default_embed
from harness.registry import model
from harness.types import Output, Request


def save_router(path: str | Path, router: SemKNNRouter, specs: Sequence[str]) -> None:
    np.savez_compressed(path, techniques=np.array(router.techniques), specs=np.array(list(specs)),
                        embeddings=router.embeddings.astype(np.float32), quality=router.quality,
                        cost=router.cost, k=np.array(router.k))


def load_router(path: str | Path) -> tuple[SemKNNRouter, list[str]]:
    if not Path(path).exists():
        raise OperatorError(f"semknn: router file {path} not found (make one with `harness reliability fit-router`)")
    data = np.load(path, allow_pickle=False)
    router = SemKNNRouter([str(t) for t in data["techniques"]], k=int(data["k"]))
    router.embeddings = data["embeddings"].astype(float)
    router.quality = data["quality"]
    router.cost = data["cost"]
    return router, [str(s) for s in data["specs"]]


PARAMETERS = {
    "router": Setting(str | None, None, "the router file `harness reliability fit-router` wrote (required)"),
    "lam": Setting(float, 0.0, "cost weight: each prompt goes to argmax kNN quality - lam x cost"),
}


class SemKNNOperator:
    name = "semknn"

    def __init__(self, *techniques: Model, router: str | None = None, lam: float = 0.0) -> None:
        if router is None:
            raise OperatorError("semknn: pass router='FILE' (from `harness reliability fit-router`)")
        self.router, self.fitted_specs = load_router(router)
        if len(techniques) != len(self.router.techniques):
            raise OperatorError(f"semknn: the router file has {len(self.router.techniques)} techniques "
                                f"({'; '.join(self.fitted_specs)}), got {len(techniques)} models")
        self.techniques = list(techniques)
        self.lam = float(lam)
        self.spec = f"semknn({', '.join(t.spec for t in techniques)}, lam={self.lam}, router={Path(router).name!r})"
        self.batch_size = 16
        self.concurrency = max(int(getattr(t, "concurrency", 1) or 1) for t in techniques)
        self.modalities = frozenset.intersection(*(frozenset(getattr(t, "modalities", {"text"}))
                                                   for t in techniques))
        self.cacheable = all(getattr(t, "cacheable", True) for t in techniques)

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        texts = ["\n".join(m.text_content for m in r.messages if m.role == "user") for r in requests]
        vectors = await asyncio.to_thread(default_embed, texts)
        choice = self.router.route(vectors, self.lam)
        outs: list[Output | None] = [None] * len(requests)
        for t in sorted(set(choice.tolist())):
            idx = [i for i, c in enumerate(choice) if c == t]
            for i, out in zip(idx, await self.techniques[t].generate([requests[i] for i in idx]), strict=True):
                outs[i] = self._annotate(out, t)
        return [o for o in outs if o is not None]

    def _annotate(self, out: Output, t: int) -> Output:
        details: dict[str, Any] = dict(out.details)
        if "cost" not in details:  # a plain model: one generator call
            u = out.usage
            details["cost"] = cost_split([Call("generator", self.techniques[t].spec, u.input_tokens,
                                               u.output_tokens, u.cost, u.seconds)])
        details.update(routed_to=self.router.techniques[t], router_lambda=self.lam)
        out.details = details
        return out

    async def aclose(self) -> None:
        from harness.model import close_model

        for t in self.techniques:
            await close_model(t)


@model("semknn", operator=True, settings=PARAMETERS, strict=True,
       description="SemKNN router: route each prompt to argmax kNN quality - lam x cost (router='FILE', lam=0)")
def semknn(*models: Any, **params: Any) -> SemKNNOperator:
    return SemKNNOperator(*models, **check_params("semknn", PARAMETERS, params))
