"""Tokens/s of the local backends (``hf:`` and ``llamacpp:``) against their bare libraries, on the
embedded models (SmolLM2-135M-Instruct, Gemma 3 270M), at 1 and 2 CPU threads.

Baselines, with the same prompts (GSM8K test questions through the model's chat template, or plain
text after <bos> for Gemma, exactly the tokens the harness sends), greedy decoding and the same
``max_tokens``:

- ``llamacpp:`` vs a bare ``llama_cpp.Llama`` on the same GGUF: one prompt at a time, each from an
  empty KV cache (``reset()``, as the backend does), ``generate`` with the greedy sampler until an
  end-of-generation token or ``max_tokens``, then ``detokenize``;
- ``hf:`` vs a bare ``transformers`` ``generate`` on the converted safetensors directory: one batch
  of all prompts, left-padded, ``do_sample=False``.

Every pass runs in a worker thread, as the backends run generation (``asyncio.to_thread``): on the
2-core dev machine, llama.cpp (and torch) at 2 threads decoded ~5x slower when called from the main
thread than from a worker thread (SmolLM2, llama.cpp, 2 threads: 5-14 vs 25-42 tok/s, measured
alternating; no difference at 1 thread), which would flatter the harness. Each pass runs after a
warm-up and ``--reps`` times alternating (bare, harness); the best of each is kept (the machine is
shared, so the best is the least disturbed). Printed: generated tokens/s of
each, the ratio harness/bare (target: >= 0.90) and whether the replies were identical.

    python bench/local_models.py                            # both models, both backends, 1 and 2 threads
    python bench/local_models.py --models gemma3-270m --backends llamacpp -n 4 --max-tokens 32
    python bench/local_models.py --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("smollm2-135m-instruct", "gemma3-270m")


def questions(n: int) -> list[str]:
    from harness.tasks.gsm8k.task import DATA, INSTRUCTION

    rows = [json.loads(line) for line in DATA.read_text().splitlines()[:n]]
    return [INSTRUCTION + row["question"] for row in rows]


def requests(texts: list[str], max_tokens: int) -> list[Any]:
    from harness.types import GenerationConfig, Message, Request

    return [Request([Message.text("user", t)], GenerationConfig(max_tokens=max_tokens, temperature=0.0))
            for t in texts]


def in_worker(run: Callable[[], tuple[int, float, list[str]]]) -> tuple[int, float, list[str]]:
    """Run a pass in a fresh worker thread (see the module docstring: the main thread is slower)."""
    done: list[Any] = []

    def target() -> None:
        try:
            done.append(run())
        except BaseException as exc:  # re-raised in the caller's thread
            done.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]


def best_of(reps: int, passes: dict[str, Callable[[], tuple[int, float, list[str]]]]) -> dict[str, Any]:
    """Run each pass once to warm up, then ``reps`` times alternating; keep each one's fastest."""
    out: dict[str, Any] = {}
    for name, run in passes.items():
        in_worker(run)
        out[name] = {"tokens": 0, "seconds": float("inf"), "texts": []}
    for _ in range(reps):
        for name, run in passes.items():
            tokens, seconds, texts = in_worker(run)
            if seconds < out[name]["seconds"]:
                out[name] = {"tokens": tokens, "seconds": seconds, "texts": texts}
    return out


# ---- llama.cpp --------------------------------------------------------------------------------------
def llamacpp_passes(name: str, texts: list[str], max_tokens: int, threads: int) -> dict[str, Callable[[], Any]]:
    import llama_cpp

    from harness.modelspec import build_model

    harness_model = build_model(f"llamacpp:{name}", {"threads": threads, "concurrency": 1})
    reqs = requests(texts, max_tokens)
    prepared = [harness_model.prepare(i, r) for i, r in enumerate(reqs)]
    bare = llama_cpp.Llama(model_path=str(harness_model.gguf), n_ctx=harness_model.n_ctx, n_batch=512,
                           n_threads=threads, n_threads_batch=threads, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(bare.model)

    def run_bare() -> tuple[int, float, list[str]]:
        t0 = time.perf_counter()
        total, replies = 0, []
        for p in prepared:
            bare.reset()
            tokens = bare.tokenize(p.prompt.encode(), add_bos=p.add_bos, special=True)
            out: list[int] = []
            for token in bare.generate(tokens, temp=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0):
                out.append(token)
                if llama_cpp.llama_vocab_is_eog(vocab, token) or len(out) >= max_tokens:
                    break
            total += len(out)
            text = bare.detokenize([t for t in out if not llama_cpp.llama_vocab_is_eog(vocab, t)])
            replies.append(text.decode("utf-8", errors="replace"))
        return total, time.perf_counter() - t0, replies

    def run_harness() -> tuple[int, float, list[str]]:
        t0 = time.perf_counter()
        outs = asyncio.run(harness_model.generate(requests(texts, max_tokens)))
        seconds = time.perf_counter() - t0
        errors = [o.error for o in outs if o.error]
        if errors:
            raise SystemExit(f"llamacpp:{name}: {errors[0]}")
        return sum(o.usage.output_tokens for o in outs), seconds, [o.text for o in outs]

    return {"bare": run_bare, "harness": run_harness}


# ---- transformers -----------------------------------------------------------------------------------
def hf_passes(name: str, texts: list[str], max_tokens: int, threads: int) -> dict[str, Callable[[], Any]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.models.hf_embedded import ensure_converted
    from harness.modelspec import build_model

    torch.set_num_threads(threads)
    folder = ensure_converted(name, log=lambda m: print(m, file=sys.stderr))
    harness_model = build_model(f"hf:{name}", {"threads": threads, "batch_size": len(texts)})
    tok = AutoTokenizer.from_pretrained(folder)
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    bare = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    eos = harness_model._eos_ids()
    prompts = [tok.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True, tokenize=False)
               for t in texts]

    def run_bare() -> tuple[int, float, list[str]]:
        torch.set_num_threads(threads)  # per thread: OpenMP's count does not carry over between threads
        t0 = time.perf_counter()
        with torch.inference_mode():
            enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
            gen = bare.generate(**enc, max_new_tokens=max_tokens, do_sample=False, num_beams=1, eos_token_id=eos,
                                pad_token_id=tok.pad_token_id)
        seconds = time.perf_counter() - t0
        total, replies = 0, []
        for row in gen[:, enc["input_ids"].shape[1]:].tolist():
            n = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
            total += n
            replies.append(tok.decode(row[:n], skip_special_tokens=True))
        return total, seconds, replies

    def run_harness() -> tuple[int, float, list[str]]:
        t0 = time.perf_counter()
        outs = asyncio.run(harness_model.generate(requests(texts, max_tokens)))
        seconds = time.perf_counter() - t0
        errors = [o.error for o in outs if o.error]
        if errors:
            raise SystemExit(f"hf:{name}: {errors[0]}")
        return sum(o.usage.output_tokens for o in outs), seconds, [o.text for o in outs]

    return {"bare": run_bare, "harness": run_harness}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help="embedded model names, comma-separated")
    ap.add_argument("--backends", default="llamacpp,hf", help="llamacpp, hf or both")
    ap.add_argument("--threads", default="1,2", help="CPU thread counts, comma-separated")
    ap.add_argument("-n", type=int, default=8, help="prompts (GSM8K test questions)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    texts = questions(args.n)
    load = os.getloadavg()[0]
    print(f"{args.n} GSM8K prompts, greedy, max_tokens={args.max_tokens}, best of {args.reps}; "
          f"{os.cpu_count()} CPUs, load average {load:.1f} at the start")
    print(f"{'model':<24}{'backend':<10}{'threads':>7}{'harness tok/s':>15}{'bare tok/s':>12}{'ratio':>8}"
          f"{'tokens':>8}  same replies")
    rows = []
    builders = {"llamacpp": llamacpp_passes, "hf": hf_passes}
    for name in args.models.split(","):
        for backend in args.backends.split(","):
            for threads in (int(t) for t in args.threads.split(",")):
                passes = builders[backend](name, texts, args.max_tokens, threads)
                got = best_of(args.reps, passes)
                h, b = got["harness"], got["bare"]
                h_rate, b_rate = h["tokens"] / h["seconds"], b["tokens"] / b["seconds"]
                same = sum(x == y for x, y in zip(h["texts"], b["texts"], strict=True))
                row = {"model": name, "backend": backend, "threads": threads, "harness_tok_s": round(h_rate, 2),
                       "bare_tok_s": round(b_rate, 2), "ratio": round(h_rate / b_rate, 3),
                       "harness_tokens": h["tokens"], "bare_tokens": b["tokens"], "same_replies": same,
                       "prompts": len(texts)}
                rows.append(row)
                print(f"{name:<24}{backend:<10}{threads:>7}{h_rate:>15.1f}{b_rate:>12.1f}{h_rate / b_rate:>8.3f}"
                      f"{h['tokens']:>8}  {same}/{len(texts)}", flush=True)
                del passes, got
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "load_start": load, "args": vars(args)}, indent=1))


if __name__ == "__main__":
    main()
