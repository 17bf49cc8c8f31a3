"""CPU cost of the reliability operators' orchestration (tracing, extraction, cost split), per
underlying call, against the baseline of making the same calls directly.

Model: ``builtin:number`` (instant), so what is measured is the harness's own work. Baseline: the
same number of requests sent straight to the model (``model.generate`` in batches of 40). Operator:
``vote(builtin:number, n=5)`` and ``rateless(builtin:number, rule=agreement)`` over N requests in
chunks of the operator's batch size (as the runner hands them over). Prints microseconds per
underlying call and the ratio operator / baseline (median of ``--repeats``).

    python bench/reliability_overhead.py [--n 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from harness.modelspec import build_model
from harness.types import GenerationConfig, Message, Request


def _requests(n: int) -> list[Request]:
    return [Request([Message.text("user", f"Question {i}: add {i} and {i + 1}.")],
                    GenerationConfig(temperature=0.0, seed=i)) for i in range(n)]


async def _direct(model, reqs: list[Request], batch: int = 40) -> int:  # type: ignore[no-untyped-def]
    calls = 0
    for i in range(0, len(reqs), batch):
        calls += len(await model.generate(reqs[i : i + batch]))
    return calls


async def _operator(op, reqs: list[Request]) -> int:  # type: ignore[no-untyped-def]
    calls = 0
    for i in range(0, len(reqs), op.batch_size):
        calls += sum(o.usage.calls for o in await op.generate(reqs[i : i + op.batch_size]))
    return calls


def _time(coro_fn) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    t0 = time.process_time()
    calls = asyncio.run(coro_fn())
    return time.process_time() - t0, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    reqs = _requests(args.n)
    base = build_model("builtin:number")
    for spec in ("vote(builtin:number, n=5, extract=gsm8k)", "rateless(builtin:number, rule=agreement)"):
        op = build_model(spec)
        op_us, base_us = [], []
        for _ in range(args.repeats):
            cpu, calls = _time(lambda op=op: _operator(op, reqs))
            op_us.append(1e6 * cpu / calls)
            expanded = [r for r in reqs for _ in range(calls // len(reqs))]
            cpu_b, calls_b = _time(lambda expanded=expanded: _direct(base, expanded))
            base_us.append(1e6 * cpu_b / calls_b)
        o, b = statistics.median(op_us), statistics.median(base_us)
        print(f"{spec}: {o:.1f} us CPU per underlying call; baseline direct builtin:number calls "
              f"{b:.1f} us; ratio {o / b:.1f}x")


if __name__ == "__main__":
    main()
