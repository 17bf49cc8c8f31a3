"""Data parallelism with Ray: ``dp`` actors, each holding its own engine (a ``vllm.LLM``, with
tensor parallelism inside it), answer interleaved shards of one batch concurrently.

No scheduler of our own: each replica gets its shard in ONE engine call and vLLM's scheduler does
the batching inside it. Shards are interleaved (request i goes to replica i mod dp) so that a task
sorted by length or difficulty still spreads evenly; results are put back in request order.

Ray placement: an actor asks for ``tensor_parallel_size`` GPUs when the machine has GPUs (Ray sets
``CUDA_VISIBLE_DEVICES`` for it, and vLLM's own multiprocessing executor then spreads TP over
them), else one CPU. With ``ray_address`` the actors go to an existing (multi-node) cluster, whose
nodes must have the harness and vLLM installed; otherwise a local Ray is started.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def interleave(items: list[T], n: int) -> list[list[T]]:
    """Request i -> shard i mod n."""
    return [items[k::n] for k in range(n)]


def merge_interleaved(shards: list[list[T]], total: int) -> list[T]:
    """Inverse of :func:`interleave`."""
    out: list[Any] = [None] * total
    for k, shard in enumerate(shards):
        out[k :: len(shards)] = shard
    return out


class EngineActor:
    """Ray actor body: builds its engine from a picklable factory inside the actor process."""

    def __init__(self, make_engine: Callable[[], Any]) -> None:
        self.engine = make_engine()

    def run_batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self.engine.run_batch(items)

    def modalities(self) -> list[str]:
        return self.engine.modalities()

    def tokenizer(self) -> Any:
        return self.engine.tokenizer()

    def max_model_len(self) -> int:
        return int(self.engine.max_model_len())

    def stats(self) -> dict[str, Any]:
        return {**self.engine.stats(), "pid": os.getpid()}

    def close(self) -> None:
        self.engine.close()


class RayDataParallel:
    """The same interface as one engine (``run_batch``, ``modalities``, ``tokenizer``,
    ``max_model_len``, ``stats``, ``close``). Every item is answered on its own (a scoring item is
    one prompt), so sharding a batch of completion or scoring items changes no value."""

    def __init__(self, dp: int, make_engine: Callable[[], Any], *, gpus_per_replica: float = 0,
                 cpus_per_replica: float = 1, ray_address: str | None = None,
                 ray_init: dict[str, Any] | None = None) -> None:
        import ray

        self._started_ray = False
        if not ray.is_initialized():
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # else Ray writes ~/.ray/auth_token
            kwargs = {"include_dashboard": False, "log_to_driver": True, **(ray_init or {})}
            ray.init(address=ray_address, **kwargs)
            self._started_ray = True
        # Any: Ray's stubs type an actor handle's methods as plain callables without .remote
        actor_cls: Any = ray.remote(num_gpus=gpus_per_replica, num_cpus=cpus_per_replica)(EngineActor)
        self.actors: list[Any] = [actor_cls.remote(make_engine) for _ in range(dp)]
        ray.get([a.stats.remote() for a in self.actors])  # wait until every engine has loaded

    def run_batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        import ray

        shards = interleave(items, len(self.actors))
        refs = [a.run_batch.remote(s) for a, s in zip(self.actors, shards, strict=True) if s]
        results = ray.get(refs)
        results += [[] for _ in range(len(shards) - len(results))]  # fewer items than replicas
        return merge_interleaved(results, len(items))

    def modalities(self) -> list[str]:
        import ray

        return ray.get(self.actors[0].modalities.remote())

    def tokenizer(self) -> Any:
        """Replica 0's tokenizer, pickled over: the replicas load the same model, so any one's will do
        for the token work the adapter does before sharding (completion and scoring prompts)."""
        import ray

        return ray.get(self.actors[0].tokenizer.remote())

    def max_model_len(self) -> int:
        import ray

        return int(ray.get(self.actors[0].max_model_len.remote()))

    def stats(self) -> dict[str, Any]:
        import ray

        per = ray.get([a.stats.remote() for a in self.actors])
        return {"calls": sum(p["calls"] for p in per), "replicas": per}

    def close(self) -> None:
        import ray

        for actor in self.actors:
            try:
                ray.get(actor.close.remote(), timeout=60)
            except Exception:  # a dead or stuck replica must not keep the others alive
                pass
            ray.kill(actor)
        self.actors = []
        if self._started_ray:
            ray.shutdown()


def gpus_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False
