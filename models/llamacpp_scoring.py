"""Scoring requests on llama.cpp: loglikelihood and rolling loglikelihood, exact, from the GGUF as it is.

The token boundary and the rolling windows are the core's (:mod:`harness.loglikelihood`, lm-eval's
rules, with the GGUF's own tokeniser under lm-eval's BOS rule: :func:`encoder`); this module evaluates
the token sequences the way ``models/hf_scoring.py`` does for transformers:

- each unit's input is ``(context + continuation)[-(max_length + 1):][:-1]``, evaluated from an empty
  KV cache in chunks of ``n_batch`` tokens (what ``Llama.eval`` does, so the logits are bit-for-bit
  those of a ``Llama(logits_all=True)`` evaluating the same tokens: tests/test_llamacpp_loglikelihood.py);
- only the positions a unit scores are asked for as outputs (llama.cpp's per-token ``logits`` flag),
  so no second ``Llama`` with ``logits_all`` is needed and a multiple-choice question costs one output
  row, not one per prompt token. The cost is llama.cpp's output buffer: at most ``n_batch`` scored
  positions at once, ``n_batch`` x vocabulary x 4 bytes (100 MB for SmolLM2, 512 MB for Gemma 3 at
  the default ``n_batch`` 512), reached only by rolling requests and long continuations;
- the log-softmax is computed in numpy in **float64** over the whole vocabulary from llama.cpp's
  float32 logits; a unit's value is the sum of its continuation tokens' entries, and it is greedy
  when the argmax at every scored position is the token itself;
- units with the same input tokens are evaluated once (for letters as choices, one evaluation per
  question), longest first, spread over the backend's pool of contexts (``concurrency``);
- a request whose text cannot be encoded fails alone, before anything runs; an evaluation that fails
  fails only the requests with a unit on that input.

Usage per request: ``input_tokens`` is the tokens fed for its units (as hf counts them), ``calls`` 1,
``seconds`` its share of the evaluations it used (an evaluation shared by several units is split
evenly among them).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.loglikelihood import BosAwareEncoder, TokenPair, Unit, combine, expand
from harness.types import Loglikelihood, Output, Request, Usage

# rows of float64 log-softmax computed at once: 4M values (32 MB), whatever the vocabulary
SOFTMAX_BLOCK_VALUES = 1 << 22


def prefix_token(llm: Any) -> int:
    """What an empty context becomes: BOS, else EOS (lm-eval's ``prefix_token_id``)."""
    bos = int(llm.token_bos())
    return bos if bos >= 0 else int(llm.token_eos())


def token_text(llm: Any, token: int) -> str:
    return bytes(llm.detokenize([token], special=True)).decode("utf-8", errors="replace") if token >= 0 else ""


def encoder(llm: Any) -> BosAwareEncoder:
    """The GGUF's tokeniser with lm-eval's special-token rule: the vocabulary's own BOS default
    (``add_bos=True`` lets llama.cpp follow ``tokenizer.ggml.add_bos_token``), no second BOS on a text
    that starts with the prefix token's text; special-token text is parsed, as a transformers
    tokeniser does."""

    def with_specials(text: str) -> list[int]:
        return list(llm.tokenize(text.encode("utf-8"), add_bos=True, special=True))

    def plain(text: str) -> list[int]:
        return list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    return BosAwareEncoder(with_specials, plain, token_text(llm, prefix_token(llm)))


@dataclass
class _Input:
    """One distinct model input and the units scored on it."""

    tokens: tuple[int, ...]
    units: list[int]  # indices into Plan.units
    pairs: list[TokenPair] = field(default_factory=list)
    values: list[Loglikelihood] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


@dataclass
class Plan:
    """The token work of one call's scoring requests: units, and their distinct inputs longest first."""

    outputs: list[Output | None]
    units: list[Unit]
    shapes: dict[int, list[int]]  # request -> number of units per item
    inputs: list[_Input]


def plan(requests: Sequence[Request], encode: BosAwareEncoder, prefix: int, max_length: int) -> Plan:
    """Encode every request (a request that cannot be encoded fails alone) and group its units by input."""
    outputs: list[Output | None] = [None] * len(requests)
    # the core refuses a continuation longer than max_length (no input of max_length tokens predicts it)
    work = expand(requests, encode, prefix, max_length)
    for i, why in work.failed.items():
        outputs[i] = Output(error=f"input: {why}", details={"error_kind": "input"})
    units, shapes = work.units, work.shapes
    grouped: dict[tuple[int, ...], _Input] = {}
    for k, unit in enumerate(units):
        toks = unit.pair.model_input(max_length)
        inp = grouped.setdefault(toks, _Input(toks, []))
        inp.units.append(k)
        inp.pairs.append(unit.pair)
    inputs = sorted(grouped.values(), key=lambda x: (-len(x.tokens), x.tokens))
    return Plan(outputs, units, shapes, inputs)


def finish(p: Plan, requests: Sequence[Request], max_length: int) -> list[Output]:
    """One Output per request, in order, from the evaluated inputs."""
    values: list[Loglikelihood | None] = [None] * len(p.units)
    failed: dict[int, str] = {}
    seconds: dict[int, float] = {}
    for inp in p.inputs:
        share = inp.seconds / max(1, len(inp.units))
        for n, k in enumerate(inp.units):
            req = p.units[k].request
            seconds[req] = seconds.get(req, 0.0) + share
            if inp.error is not None:
                failed.setdefault(req, inp.error)
            else:
                values[k] = inp.values[n]
    collected: dict[tuple[int, int], list[Loglikelihood]] = {}
    tokens_in: dict[int, int] = {}
    for unit, value in zip(p.units, values, strict=True):
        if value is not None:
            collected.setdefault((unit.request, unit.item), []).append(value)
        tokens_in[unit.request] = tokens_in.get(unit.request, 0) + len(unit.pair.model_input(max_length))
    out = list(p.outputs)
    for i, counts in p.shapes.items():
        usage = Usage(input_tokens=tokens_in.get(i, 0), calls=1, seconds=seconds.get(i, 0.0))
        if i in failed:
            out[i] = Output(error=failed[i], usage=usage)
            continue
        lls = [combine(collected.get((i, j), [])) if requests[i].kind == "loglikelihood_rolling"
               else collected[(i, j)][0] for j in range(len(counts))]
        out[i] = Output(loglikelihoods=lls, usage=usage,
                        details={"scored_units": sum(counts), "max_length": max_length})
    return [o if o is not None else Output(error="internal: no output") for o in out]


class Evaluator:
    """Evaluates token sequences on one llama.cpp context and reads the scored positions' logits."""

    def __init__(self, llm: Any) -> None:
        import llama_cpp

        self.llm = llm
        self.n_batch = int(llm.n_batch)  # Llama.eval's chunks: the same logits as its own evaluation
        self.n_vocab = int(llm.n_vocab())
        self._batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)

    def close(self) -> None:
        import llama_cpp

        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None

    def score(self, tokens: Sequence[int], pairs: Sequence[TokenPair]) -> list[Loglikelihood]:
        """Each pair's value on ``tokens`` (its model input): position ``len(tokens) - len(cont) + k``
        predicts ``cont[k]``."""
        import numpy as np

        n = len(tokens)
        span = max(len(p.continuation) for p in pairs)
        if not 0 < span <= n:
            raise ValueError(f"cannot score {span} tokens on an input of {n}")
        first = n - span  # the first scored position
        # per scored position (offset from `first`): the tokens some pair predicts there, their
        # log-softmax values, and the argmax
        needed: list[set[int]] = [set() for _ in range(span)]
        for p in pairs:
            for k, token in enumerate(p.continuation, start=span - len(p.continuation)):
                needed[k].add(token)
        picked: list[dict[int, float]] = [{} for _ in range(span)]
        best = np.empty(span, dtype=np.int64)

        def read(rows: list[Any], offset: int) -> None:
            block = np.asarray(rows, dtype=np.float64)  # [rows, vocab]: float32 logits widened exactly
            top = block.max(axis=1, keepdims=True)
            lse = top[:, 0] + np.log(np.exp(block - top).sum(axis=1))
            best[offset:offset + len(rows)] = block.argmax(axis=1)
            for r in range(len(rows)):
                k = offset + r
                picked[k] = {t: float(block[r, t] - lse[r]) for t in needed[k]}

        self._decode(tokens, first, read)
        out = []
        for p in pairs:
            lo = span - len(p.continuation)
            cont = p.continuation
            logprob = sum(picked[lo + k][t] for k, t in enumerate(cont))
            greedy = all(int(best[lo + k]) == t for k, t in enumerate(cont))
            out.append(Loglikelihood(float(logprob), greedy, len(cont)))
        return out

    def _decode(self, tokens: Sequence[int], first: int, read: Callable[[list[Any], int], None]) -> None:
        """Evaluate ``tokens`` from an empty cache, asking for the logits of positions ``first`` on,
        and hand them to ``read`` in blocks (rows, offset from ``first``) before the next chunk runs."""
        import llama_cpp
        import numpy as np

        llm, batch = self.llm, self._batch
        llm.reset()
        memory = llama_cpp.llama_get_memory(llm.ctx)
        if memory is not None:
            llama_cpp.llama_memory_clear(memory, True)
        per_block = max(1, SOFTMAX_BLOCK_VALUES // self.n_vocab)
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start:start + self.n_batch]
            batch.n_tokens = len(chunk)
            for i, token in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = start + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = start + i >= first
            batch.logits[len(chunk) - 1] = True  # as Llama.eval: every decode yields an output
            rc = int(llama_cpp.llama_decode(llm.ctx, batch))
            if rc != 0:
                raise RuntimeError(f"llama_decode failed (status {rc}) on an input of {len(tokens)} tokens")
            lo = max(start, first)
            rows = [np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, pos - start), shape=(self.n_vocab,))
                    for pos in range(lo, start + len(chunk))]
            for b in range(0, len(rows), per_block):
                read(rows[b:b + per_block], lo - first + b)
        llm.reset()


def run_inputs(queue: deque[_Input], acquire: Callable[[], Any], release: Callable[[Any], None]) -> None:
    """Evaluate inputs taken from ``queue`` (longest first; shared by the worker threads) on one context
    held (``acquire``) for as long as inputs remain."""
    try:
        slot = acquire()
    except Exception as exc:  # no context to be had (the model was closed): what is left fails
        while queue:
            queue.popleft().error = f"{type(exc).__name__}: {exc}"
        return
    evaluator = Evaluator(slot.llm)
    try:
        while queue:
            try:
                inp = queue.popleft()  # atomic: two workers never take the same input
            except IndexError:
                return
            t0 = time.perf_counter()
            try:
                inp.values = evaluator.score(inp.tokens, inp.pairs)
            except Exception as exc:  # this input's requests fail; the next input starts afresh anyway
                inp.error = f"{type(exc).__name__}: {exc}"
            inp.seconds = time.perf_counter() - t0
    finally:
        evaluator.close()
        release(slot)
