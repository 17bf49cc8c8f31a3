"""One in-process vLLM engine (``vllm.LLM``) answering a whole batch with ONE ``chat``/``generate``.

Items are plain dicts: ``{"conversation": [...]}`` (through ``LLM.chat``), ``{"prompt": "..."}`` or
``{"prompt_token_ids": [...]}`` (through ``LLM.generate``), plus ``"sampling"``: the
``SamplingParams`` keyword arguments; a scoring item also has ``"score_last": N`` and gets back the
logprob and rank of its prompt's last N tokens instead of a reply (``harness.models.vllm_scoring``).
Results are plain dicts, so the same class runs inside a Ray actor for data parallelism
(``harness.models.vllm_dp``). A batch is one ``LLM.chat`` call for its conversations and one
``LLM.generate`` call for everything else.

A bad request (prompt longer than ``max_model_len``, unreadable image, bad sampling value) makes
vLLM reject the whole call; the batch is then split in halves until the bad requests are isolated,
each getting its own error, so one sample never fails its neighbours. An engine that died is not
retried.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from harness.models.vllm_inputs import prompt_scores, result_from_request_output

FATAL_ERRORS = ("EngineDeadError", "OutOfMemoryError")


def _error(exc: BaseException) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"}


def _prompt(item: dict[str, Any]) -> Any:
    if "prompt_token_ids" in item:  # vLLM's TokensPrompt: the ids as given, no tokenisation
        return {"prompt_token_ids": list(item["prompt_token_ids"])}
    return item["prompt"]


def _result(ro: Any, item: dict[str, Any]) -> dict[str, Any]:
    """A converted output; a conversion that fails is that item's own error."""
    try:
        if "score_last" in item:
            return prompt_scores(ro, int(item["score_last"]))
        return result_from_request_output(ro, int(item["sampling"].get("logprobs") or 0))
    except Exception as exc:
        return _error(exc)


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
            for route in (True, False):  # conversations through chat(), the rest through generate()
                group = [r for r in ready if ("conversation" in r[1]) == route]
                for (i, _, _), res in zip(group, self._isolating(group), strict=True):
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
        """One engine call for items of one route (all conversations, or none)."""
        params = [p for _, _, p in ready]
        self.calls += 1
        if "conversation" in ready[0][1]:
            outs = self.llm.chat([it["conversation"] for _, it, _ in ready], params, use_tqdm=False,
                                 **self.chat_kwargs)
        else:
            outs = self.llm.generate([_prompt(it) for _, it, _ in ready], params, use_tqdm=False)
        if len(outs) != len(ready):
            raise RuntimeError(f"vLLM returned {len(outs)} outputs for {len(ready)} prompts")
        return [_result(o, it) for o, (_, it, _) in zip(outs, ready, strict=True)]

    # ---- introspection --------------------------------------------------------------------------
    def tokenizer(self) -> Any:
        """The tokenizer vLLM itself uses (picklable, so a Ray actor can hand it back)."""
        return self.llm.get_tokenizer()

    def max_model_len(self) -> int:
        return int(self.llm.llm_engine.model_config.max_model_len)

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
