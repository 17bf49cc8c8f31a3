"""Managed-server checks: ``vllm-server:`` starts vLLM's OpenAI server, answers through the
OpenAI-compatible adapter, and is gone after ``aclose`` (run in the vLLM venv; one JSON line).

    python tests/vllm_checks/server.py MODEL_DIR
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.error
import urllib.request

from check_settings import engine_settings


def alive(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def main(model_dir: str) -> dict:
    from openai import OpenAI

    from harness.modelspec import build_model
    from harness.types import GenerationConfig, Message, Request

    t0 = time.perf_counter()
    model = build_model(f"vllm-server:{model_dir}", engine_settings(), {"text"})
    out: dict = {"start_s": round(time.perf_counter() - t0, 1), "spec": model.spec,
                 "delegate": type(model.delegate).__module__ + "." + type(model.delegate).__name__,
                 "batch_size": model.batch_size, "concurrency": model.concurrency}
    base = model.base_url
    health = base.removesuffix("/v1") + "/health"
    pid = model.server.proc.pid

    def req(text: str, **cfg: object) -> Request:
        return Request([Message.text("user", text)], GenerationConfig(**{"max_tokens": 10, **cfg}))

    async def run() -> None:
        outs = await model.generate([req(f"Question {i}: {i} + {i}?") for i in range(6)])
        out["replies"] = {"n": len(outs), "errors": [o.error for o in outs if o.error],
                          "nonempty": sum(bool(o.text) for o in outs),
                          "input_tokens": [o.usage.input_tokens for o in outs],
                          "output_tokens": [o.usage.output_tokens for o in outs]}
        # the adapter's reply equals a plain openai-client call to the same server
        direct = OpenAI(base_url=base, api_key="EMPTY").chat.completions.create(
            model=model_dir, messages=[{"role": "user", "content": "Question 0: 0 + 0?"}], max_tokens=10,
            temperature=0.0, seed=0)
        out["same_as_direct"] = direct.choices[0].message.content == outs[0].text
        hot = [req("Tell me a story.", temperature=1.0, seed=5, max_tokens=20) for _ in range(2)]
        hot_outs = await model.generate(hot)
        out["seeded_same"] = hot_outs[0].text == hot_outs[1].text
        lp = (await model.generate([req("Hi", logprobs=True, extra={"top_logprobs": 2}, max_tokens=4)]))[0]
        out["logprobs"] = {"n": len(lp.logprobs or []), "tops": [len(t["top_logprobs"]) for t in lp.logprobs or []]}
        out["healthy_before_close"] = alive(health)
        await model.aclose()

    asyncio.run(run())
    time.sleep(0.5)
    out["healthy_after_close"] = alive(health)
    try:
        import os

        os.kill(pid, 0)
        out["process_gone"] = False
    except ProcessLookupError:
        out["process_gone"] = True
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
