"""Completion and scoring requests on the vLLM adapter (run in the vLLM venv; prints one JSON line).

    python tests/vllm_checks/loglikelihood.py engine MODEL_DIR WORK_DIR   # one in-process engine
    python tests/vllm_checks/loglikelihood.py ray MODEL_DIR               # one engine in a Ray actor

The values are compared with the ``hf:`` backend's by tests/test_vllm_loglikelihood.py.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from check_settings import engine_settings
from ll_cases import COMPLETION_PROMPT, COMPLETIONS, LONG_PROMPT, PAIRS, ROLLING, SHORT, SHORT_PAIRS, TOO_LONG

MAX_MODEL_LEN = 512


def _outs(outputs: list[Any]) -> list[dict[str, Any]]:
    return [o.to_dict() for o in outputs]


def _bad_pair() -> Any:
    from harness.types import Message, Request

    # built by hand: Request.loglikelihood refuses an empty continuation itself
    return Request([Message.text("user", "a")], kind="loglikelihood", pairs=[("a", "")])


def engine(model_dir: str, work: Path) -> dict[str, Any]:
    from harness.models.vllm import VLLMModel
    from harness.models.vllm_config import parse_settings
    from harness.modelspec import build_model
    from harness.types import GenerationConfig, Message, Request

    settings = engine_settings(max_model_len=MAX_MODEL_LEN)
    t0 = time.perf_counter()
    model = build_model(f"vllm:{model_dir}", settings, {"text"})
    out: dict[str, Any] = {"start_s": time.perf_counter() - t0, "spec": model.spec,
                           "kinds": sorted(model.request_kinds)}
    executor = model.executor

    async def run() -> None:
        # 1. every scoring request of a batch in ONE engine call; a bad pair fails its request alone
        calls0 = executor.calls
        t1 = time.perf_counter()
        batch = await model.generate([Request.loglikelihood(PAIRS[:4]), _bad_pair(), Request.loglikelihood(PAIRS[4:]),
                                      Request.rolling(ROLLING)])
        out["batch"] = {"outputs": _outs(batch), "engine_calls": executor.calls - calls0,
                        "seconds": time.perf_counter() - t1}
        # 2. each pair in its own batch: batch-mates change nothing
        alone = [(await model.generate([Request.loglikelihood([p])]))[0] for p in PAIRS]
        out["alone"] = _outs(alone)
        # 3. a short window on the same engine (max_length is the adapter's, not the engine's): the
        #    rolling text in several windows, a context cut to the window, a continuation that cannot fit
        short = VLLMModel(parse_settings(model_dir, {**settings, "max_length": SHORT}), executor=executor)
        res = await short.generate([Request.rolling(ROLLING[:1]), Request.loglikelihood(SHORT_PAIRS),
                                    Request.loglikelihood([TOO_LONG])])
        out["short"] = {"outputs": _outs(res), "spec": short.spec}
        try:
            VLLMModel(parse_settings(model_dir, {**settings, "max_length": MAX_MODEL_LEN - 1}), executor=executor)
            out["too_wide"] = None
        except ValueError as exc:
            out["too_wide"] = str(exc)
        # 4. completions: the raw prompt (no template), left-truncated, stop strings, seeds
        hot: dict[str, Any] = {"max_tokens": 12, "temperature": 1.0}
        comp = await model.generate([
            *(Request.completion(prompt, GenerationConfig(**cfg)) for prompt, cfg in COMPLETIONS),
            Request([Message.text("user", COMPLETION_PROMPT)], GenerationConfig(max_tokens=8)),  # chat, for contrast
            Request.completion(LONG_PROMPT, GenerationConfig(max_tokens=8)),
            Request.completion("Once upon a time", GenerationConfig(seed=7, **hot)),
            Request.completion("Once upon a time", GenerationConfig(seed=7, **hot)),
            Request.completion("Once upon a time", GenerationConfig(seed=8, **hot)),
            Request.completion("", GenerationConfig(max_tokens=8)),  # SmolLM2 adds no BOS: no tokens, refused alone
        ])
        out["completion"] = _outs(comp)

    try:
        asyncio.run(run())
        # 5. a whole native multiple-choice run through the runner and the model client, into SQLite
        #    (last: the runner closes the model it was given)
        out["eval"] = _eval(model, work)
    finally:
        asyncio.run(model.aclose())
    return out


def _eval(model: Any, work: Path) -> dict[str, Any]:
    import sqlite3

    from harness.run_config import EvalConfig
    from harness.runner import evaluate

    db = work / "ll.db"
    t0 = time.perf_counter()
    summary = evaluate(EvalConfig(task="mmlu_redux", model=model.spec, limit=6, db_url=f"sqlite:///{db}",
                                  progress=False), model=model)
    with sqlite3.connect(db) as con:
        rows = con.execute("select sample_id, input, prediction, error, input_tokens, calls from sample_results"
                           " order by sample_id").fetchall()
    return {"status": summary.status, "seconds": time.perf_counter() - t0,
            "rows": [{"id": r[0], "input": json.loads(r[1]), "prediction": json.loads(r[2]) if r[2] else None,
                      "error": r[3], "input_tokens": r[4], "calls": r[5]} for r in rows]}


def ray(model_dir: str) -> dict[str, Any]:
    """Scoring through RayDataParallel: the tokenizer and length come over from the actor."""
    from functools import partial

    from harness.models.vllm import VLLMModel
    from harness.models.vllm_config import parse_settings
    from harness.models.vllm_dp import RayDataParallel
    from harness.models.vllm_engine import LocalEngine
    from harness.types import GenerationConfig, Request

    settings = parse_settings(model_dir, engine_settings(max_model_len=MAX_MODEL_LEN))
    init = {"num_cpus": 2, "include_dashboard": False, "_temp_dir": tempfile.mkdtemp(prefix="ray", dir="/tmp")}
    t0 = time.perf_counter()
    executor = RayDataParallel(1, partial(LocalEngine, settings.path, settings.engine), ray_init=init)
    model = VLLMModel(settings, executor=executor)
    out: dict[str, Any] = {"start_s": time.perf_counter() - t0}
    try:
        res = asyncio.run(model.generate([Request.loglikelihood(PAIRS), Request.rolling(ROLLING),
                                          Request.completion(COMPLETION_PROMPT, GenerationConfig(max_tokens=8))]))
        out["outputs"] = _outs(res)
        out["calls"] = model.stats()["calls"]
    finally:
        asyncio.run(model.aclose())
    return out


if __name__ == "__main__":
    mode = sys.argv[1]
    result = engine(sys.argv[2], Path(sys.argv[3])) if mode == "engine" else ray(sys.argv[2])
    print(json.dumps(result))
