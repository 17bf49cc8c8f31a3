"""Ray data-parallel checks (run in the vLLM venv; prints one JSON line).

    python tests/vllm_checks/dp.py splitting             # real Ray actors around a non-vLLM engine
    python tests/vllm_checks/dp.py vllm MODEL_DIR        # vllm:MODEL_DIR -M dp=2 on tiny engines

The non-vLLM engine is a small deterministic text transform with the same interface as
``LocalEngine`` (``run_batch``/``modalities``/``stats``/``close``); it is defined here, in
``__main__``, so Ray ships it to the actors by value.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile


class ReverseEngine:
    """Replies with the prompt reversed; ``error`` in a prompt is that request's own failure."""

    def __init__(self) -> None:
        self.calls = 0
        self.batches: list[int] = []

    def run_batch(self, items: list[dict]) -> list[dict]:
        self.calls += 1
        self.batches.append(len(items))
        out = []
        for item in items:
            text = item["conversation"][-1]["content"]
            if "error" in text:
                out.append({"error": f"bad request: {text}"})
            else:
                out.append({"text": f"{text[::-1]}|pid={os.getpid()}", "input_tokens": len(text.split()),
                            "output_tokens": 1, "finish_reason": "stop", "logprobs": None})
        return out

    def modalities(self) -> list[str]:
        return ["text"]

    def stats(self) -> dict:
        return {"calls": self.calls, "batches": self.batches}

    def close(self) -> None:
        pass


def ray_init() -> dict:
    # a short fresh folder: Ray's unix sockets live under it and paths over 107 bytes fail
    return {"num_cpus": 2, "include_dashboard": False, "_temp_dir": tempfile.mkdtemp(prefix="ray", dir="/tmp")}


def splitting() -> dict:
    from harness.models.vllm import VLLMModel
    from harness.models.vllm_config import parse_settings
    from harness.models.vllm_dp import RayDataParallel
    from harness.types import Message, Request

    dp = RayDataParallel(2, ReverseEngine, cpus_per_replica=1, ray_init=ray_init())
    model = VLLMModel(parse_settings("reverse", {"dp": 2}), executor=dp)
    prompts = [f"prompt number {i}" for i in range(11)] + ["an error here"]
    outs = asyncio.run(model.generate([Request([Message.text("user", p)]) for p in prompts]))
    few = asyncio.run(model.generate([Request([Message.text("user", "only one")])]))
    stats = dp.stats()
    texts = [o.text.split("|pid=")[0] for o in outs]
    result = {
        "in_order": texts[:11] == [p[::-1] for p in prompts[:11]],
        "error_kept": outs[11].error,
        "pids": sorted({o.text.split("|pid=")[1] for o in outs if not o.error}),
        "driver_pid": str(os.getpid()),
        "replica_batches": [r["batches"] for r in stats["replicas"]],
        "calls": stats["calls"],
        "single": few[0].text.split("|pid=")[0],
    }
    asyncio.run(model.aclose())
    return result


def vllm_dp(model_dir: str) -> dict:
    import ray
    import torch
    from check_settings import engine_settings

    from harness.modelspec import build_model
    from harness.types import GenerationConfig, Message, Request

    ray.init(**ray_init())
    # one GPU (or none) holds both replicas: half a GPU each, and half its memory at most
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    extra = {"gpus_per_replica": 0.5} if gpus == 1 else {}
    model = build_model(f"vllm:{model_dir}", engine_settings(dp=2, **extra), {"text"})
    prompts = [f"Question {i}: what is {i} plus {i * 3}?" for i in range(10)]
    reqs = [Request([Message.text("user", p)], GenerationConfig(max_tokens=8)) for p in prompts]
    outs = asyncio.run(model.generate(reqs))
    stats = model.stats()
    result = {"n": len(outs), "errors": [o.error for o in outs if o.error], "nonempty": sum(bool(o.text) for o in outs),
              "calls": stats["calls"], "pids": sorted({r["pid"] for r in stats["replicas"]}),
              "texts": [o.text for o in outs], "spec": model.spec}
    asyncio.run(model.aclose())
    ray.shutdown()
    return result


if __name__ == "__main__":
    mode = sys.argv[1]
    print(json.dumps(splitting() if mode == "splitting" else vllm_dp(sys.argv[2])))
