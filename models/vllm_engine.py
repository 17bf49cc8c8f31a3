"""One in-process vLLM engine (``vllm.LLM``) answering a whole batch with ONE ``chat``/``generate``.

Items are plain dicts (``{"conversation": [...]} or {"prompt": "..."}`` plus ``"sampling"``: the
``SamplingParams`` keyword arguments), and results are plain dicts, so the same class runs inside a
Ray actor for data parallelism (``harness.models.vllm_dp``).

A bad request (prompt longer than ``max_model_len``, unreadable image, bad sampling value) makes
vLLM reject the whole call; the batch is then split in halves until the bad requests are isolated,
each getting its own error, so one sample never fails its neighbours. An engine that died is not
retried.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from harness.models.vllm_inputs import result_from_request_output

FATAL_ERRORS = ("EngineDeadError", "OutOfMemoryError")


def _error(exc: BaseException) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"}


class LocalEngine:
    """Holds one ``vllm.LLM``. ``calls`` counts the engine calls made (for tests and reports)."""

    def __init__(self, model: str, engine_kwargs: dict[str, Any], chat: bool = True,
                 chat_kwargs: dict[str, Any] | None = None) -> None:
        # vLLM's CPU build binds its internal queues to a non-loopback address without this; one
        # engine (TP within a node) needs no other. Set VLLM_HOST_IP yourself for multi-node TP/PP.
        os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")
        from vllm import LLM

        self.llm = LLM(model=model, **engine_kwargs)
        self.chat = chat
        self.chat_kwargs = dict(chat_kwargs or {})
        self.calls = 0
        self._lock = threading.Lock()  # LLM is not re-entrant; the adapter calls from worker threads

    # ---- batch entry point ----------------------------------------------------------------------
    def run_batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from vllm import SamplingParams

        results: list[dict[str, Any] | None] = [None] * len(items)
        ready: list[tuple[int, dict[str, Any], Any]] = []
        for i, item in enumerate(items):
            try:  # bad sampling values are the request's own error, not the batch's
                ready.append((i, item, SamplingParams(**item["sampling"])))
            except Exception as exc:
                results[i] = _error(exc)
        with self._lock:
            for (i, _, _), res in zip(ready, self._isolating(ready), strict=True):
                results[i] = res
        return [r if r is not None else {"error": "no result"} for r in results]

    def _isolating(self, ready: list[tuple[int, dict[str, Any], Any]]) -> list[dict[str, Any]]:
        if not ready:
            return []
        try:
            return self._call(ready)
        except Exception as exc:
            if type(exc).__name__ in FATAL_ERRORS:
                raise
            if len(ready) == 1:
                return [_error(exc)]
            mid = len(ready) // 2
            return self._isolating(ready[:mid]) + self._isolating(ready[mid:])

    def _call(self, ready: list[tuple[int, dict[str, Any], Any]]) -> list[dict[str, Any]]:
        params = [p for _, _, p in ready]
        self.calls += 1
        if self.chat:
            outs = self.llm.chat([it["conversation"] for _, it, _ in ready], params, use_tqdm=False,
                                 **self.chat_kwargs)
        else:
            outs = self.llm.generate([it["prompt"] for _, it, _ in ready], params, use_tqdm=False)
        if len(outs) != len(ready):
            raise RuntimeError(f"vLLM returned {len(outs)} outputs for {len(ready)} prompts")
        return [result_from_request_output(o, int(it["sampling"].get("logprobs") or 0))
                for o, (_, it, _) in zip(outs, ready, strict=True)]

    # ---- introspection --------------------------------------------------------------------------
    def modalities(self) -> list[str]:
        """Input modalities the loaded model takes, from vLLM's multimodal registry."""
        model_config = self.llm.llm_engine.model_config
        if not getattr(model_config, "is_multimodal_model", False):
            return ["text"]
        try:
            from vllm.multimodal import MULTIMODAL_REGISTRY

            get_info = getattr(MULTIMODAL_REGISTRY, "get_processing_info", None)
            info = get_info(model_config) if get_info else MULTIMODAL_REGISTRY.create_processor(model_config).info
            limits = info.get_supported_mm_limits()
            return sorted({"text", *limits})
        except Exception:  # registry API moved between releases: fall back to the HF config
            from harness.models.vllm_config import modalities_from_config

            return sorted(modalities_from_config(model_config.hf_config.to_dict()))

    def stats(self) -> dict[str, Any]:
        return {"calls": self.calls}

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            engine = getattr(llm, "llm_engine", None)
            shutdown = getattr(engine, "shutdown", None) or getattr(getattr(engine, "engine_core", None),
                                                                    "shutdown", None)
            if shutdown is not None:
                shutdown()
            del llm
