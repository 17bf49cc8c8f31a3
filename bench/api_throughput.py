"""Requests/s of the openai backend against a local server that answers after a fixed delay.

    python bench/api_throughput.py [--delay 0.1] [--seconds 2] [--concurrency 1 32 256]

The server (tests/openai_server.py) runs in its own process and sleeps ``--delay`` before every
reply, so the ideal rate at concurrency c is c / delay. At each concurrency, in this one run:

- ``harness``: this project's adapter (``openai:test``), driven like the runner drives it: c
  workers, each calling ``generate`` with one request;
- ``openai-default`` (the named baseline): a bare ``openai.AsyncOpenAI`` with its default httpx
  transport, c calls in flight under a semaphore, retries off;
- ``openai-aiohttp``: the same SDK client on its optional aiohttp transport (``DefaultAioHttpClient``,
  needs aiohttp; skipped when absent) - the alternative the adapter's design rejected;
- ``harness+runner``: the whole evaluation loop (``Runner``: prompt, score, SQLite commits, no
  cache) over the adapter, on a generated task of the same size;
- ``ceiling``: a minimal aiohttp loop that only posts and reads bytes: what this server can serve
  to any Python client on this machine.

Printed per client: requests/s, % of ideal, % of the ceiling, ratio to the baseline, client CPU ms
per request (process time: steadier than wall time on a loaded 2-core machine) and the server
process's CPU ms per request (from /proc), whose inverse is what the server could serve on one core.
Then, unless ``--no-stages``, one more (timed, so not measured) runner run splits its CPU per request
by stage: request building, hashing, leases, the task's prompt and score, row building, JSON encoding
+ SQL insert and the commit (both on the writer's thread, beside the event loop), finalising, the
garbage collector, and the rest (HTTP client, event loop); and says how long the oldest row waited
for the commit that stored it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "openai_server.py"
MESSAGES = [{"role": "user", "content": "What is 2 + 2? Reply with the number only."}]


def start_server(delay: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "--delay", str(delay), "--no-record", "--text", "4"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of another process (Linux /proc), 0 where unavailable."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(call: Callable[[], Awaitable[object]], seconds: float,
                  concurrency: int) -> tuple[float, float, int]:
    """(requests/s, CPU ms per request, requests): `concurrency` workers call back to back for `seconds`."""
    done = 0
    t0, c0 = time.perf_counter(), time.process_time()
    deadline = t0 + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await call()
            done += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / (time.perf_counter() - t0), (time.process_time() - c0) / max(done, 1) * 1000, done


async def client_harness(base_url: str, concurrency: int) -> tuple[Callable[[], Awaitable[object]], Callable]:
    from harness.modelspec import build_model
    from harness.types import GenerationConfig, Message, Request

    model = build_model("openai:test", {"base_url": base_url, "concurrency": concurrency, "max_retries": 0})
    request = Request([Message.text("user", MESSAGES[0]["content"])], GenerationConfig(max_tokens=8))

    async def call() -> object:
        (out,) = await model.generate([request])
        if out.error:
            raise RuntimeError(out.error)
        return out

    return call, model.aclose


async def client_openai(base_url: str, concurrency: int, aiohttp_transport: bool = False) -> tuple:
    import openai

    http_client = openai.DefaultAioHttpClient(timeout=60) if aiohttp_transport else None
    client = openai.AsyncOpenAI(base_url=base_url, api_key="none", max_retries=0, http_client=http_client)
    limit = asyncio.Semaphore(concurrency)

    async def call() -> object:
        async with limit:
            return await client.chat.completions.create(model="test", messages=MESSAGES, max_tokens=8)

    return call, client.close


async def client_ceiling(base_url: str, concurrency: int) -> tuple:
    import aiohttp

    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency))
    body = json.dumps({"model": "test", "messages": MESSAGES, "max_tokens": 8}).encode()
    headers = {"Content-Type": "application/json"}

    async def call() -> object:
        async with session.post(base_url + "/chat/completions", data=body, headers=headers) as resp:
            return await resp.read()

    return call, session.close


class StageClock:
    """CPU time per stage of the runner, each stage's own time without the stages it calls:
    wrappers around the runner's synchronous pieces, and the cyclic collector's passes. Times are
    per thread (``thread_time``, a stack per thread): the commits run on the writer's thread while
    the event loop goes on, and process time would charge one thread's work to the other's stage."""

    def __init__(self) -> None:
        import threading

        self.own: dict[str, float] = {}
        self._local = threading.local()
        self._lock = threading.Lock()
        self._undo: list[Callable[[], None]] = []

    def _stack(self) -> list[float]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _add(self, stage: str, spent: float) -> None:
        with self._lock:
            self.own[stage] = self.own.get(stage, 0.0) + spent

    def wrap(self, owner: object, attr: str, stage: str) -> None:
        original = getattr(owner, attr)

        def timed(*args: object, **kwargs: object) -> object:
            stack = self._stack()
            stack.append(0.0)
            t0 = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.thread_time() - t0
                inner = stack.pop()
                self._add(stage, spent - inner)
                if stack:
                    stack[-1] += spent

        setattr(owner, attr, timed)
        self._undo.append(lambda: setattr(owner, attr, original))

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._local.gc_start = time.thread_time()
        else:
            spent = time.thread_time() - getattr(self._local, "gc_start", time.thread_time())
            self._add("garbage collector", spent)
            stack = self._stack()
            if stack:  # a collection runs inside whatever allocated: not that stage's own time
                stack[-1] += spent

    def __enter__(self) -> StageClock:
        import gc

        from harness import client, runner, types, writer
        from harness.store import leases, ops
        from harness.store.schema import utcnow

        self.max_row_age = 0.0  # seconds from a row's creation to the commit that stores it, at most
        write_samples = ops.write_samples

        def aged(session: object, rows: list[dict[str, object]]) -> int:
            inserted = write_samples(session, rows)  # type: ignore[arg-type]
            if rows:  # the commit follows at once (the cache and judgement rows of the window)
                oldest = min(r["created_at"] for r in rows)  # type: ignore[type-var]
                self.max_row_age = max(self.max_row_age, (utcnow() - oldest).total_seconds())  # type: ignore[operator]
            return inserted

        ops.write_samples = aged  # type: ignore[assignment]
        self._undo.append(lambda: setattr(ops, "write_samples", write_samples))

        for owner, attr, stage in [
            (runner.Runner, "_request", "request building"), (types.Request, "to_dict", "request building"),
            (client.ModelClient, "cache_key", "hashing"), (leases, "claim", "leases"),
            (runner.Runner, "_row", "row building"), (writer.SampleWriter, "record", "row building"),
            (ops, "write_samples", "JSON encoding + SQL insert (writer thread)"),
            (writer.SampleWriter, "_write", "commit (counts, leases; writer thread)"),
            (runner.Runner, "finalize", "finalize (aggregate)"), (runner.Runner, "open_run", "start"),
        ]:
            self.wrap(owner, attr, stage)
        gc.callbacks.append(self._gc)
        self._undo.append(lambda: gc.callbacks.remove(self._gc))
        return self

    def __exit__(self, *exc: object) -> None:
        for undo in reversed(self._undo):
            undo()


async def measure_runner(base_url: str, n: int, concurrency: int,
                         clock: StageClock | None = None) -> tuple[float, float]:
    """(requests/s, CPU ms per request) of a full run through the Runner into a fresh SQLite file;
    with a clock, the task's prompt and score functions are timed as stages too."""
    import tempfile

    from harness.modelspec import build_model
    from harness.runner import EvalConfig, Runner
    from harness.store.db import open_db
    from harness.task import Task
    from harness.types import GenerationConfig, Message, Output, Request, Sample, Score

    samples = [Sample(str(i), [Message.text("user", f"What is {i} + 2? Reply with the number only.")], "4")
               for i in range(n)]
    def prompt(s: Sample) -> Request:
        return Request(s.messages, GenerationConfig(max_tokens=8))

    def score(s: Sample, o: Output, ctx: object) -> Score:
        return Score(values={"exact": float(o.text.strip() == s.target)})

    holder = SimpleNamespace(prompt=prompt, score=score)
    if clock is not None:
        clock.wrap(holder, "prompt", "task prompt + score")
        clock.wrap(holder, "score", "task prompt + score")
    task = Task(name="bench_api", version="1", load=lambda: samples, prompt=holder.prompt, score=holder.score)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        model = build_model("openai:test", {"base_url": base_url, "concurrency": concurrency, "max_retries": 0})
        cfg = EvalConfig(task="bench_api", model="openai:test", concurrency=concurrency, use_cache=False,
                         db_url=url, progress=False)
        runner = Runner(cfg, session_factory=open_db(url), task=task, model=model)
        t0, c0 = time.perf_counter(), time.process_time()
        summary = await runner.run_async()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if summary.n_errors:
        raise RuntimeError(f"{summary.n_errors} errors in the runner benchmark: {summary.errors}")
    return n / wall, cpu / n * 1000


CLIENTS = {
    "harness": client_harness,
    "harness+runner": None,
    "openai-default": client_openai,
    "openai-aiohttp": lambda url, c: client_openai(url, c, aiohttp_transport=True),
    "ceiling": client_ceiling,
}


async def measure_client(name: str, base_url: str, c: int, n: int, seconds: float,
                         server_pid: int) -> tuple[float, float, float] | None:
    """(requests/s, client CPU ms/request, server CPU ms/request), or None if the client is unavailable."""
    s0 = process_cpu_seconds(server_pid)
    if name == "harness+runner":
        rps, cpu = await measure_runner(base_url, n, c)
        return rps, cpu, (process_cpu_seconds(server_pid) - s0) / n * 1000
    try:
        call, close = await CLIENTS[name](base_url, c)  # type: ignore[misc]
    except (ImportError, RuntimeError) as exc:  # the SDK's aiohttp transport without aiohttp
        print(f"{c:>5} {name:<15} skipped ({exc})")
        return None
    try:
        await measure(call, min(0.5, seconds), c)  # warm: connections, imports
        s0 = process_cpu_seconds(server_pid)
        rps, cpu, done = await measure(call, seconds, c)
    finally:
        await close()
    return rps, cpu, (process_cpu_seconds(server_pid) - s0) / max(done, 1) * 1000


async def run(args: argparse.Namespace) -> None:
    proc, base_url = start_server(args.delay)
    try:
        print(f"server delay {args.delay * 1000:.0f} ms at {base_url}; {args.seconds:.0f} s per measurement, "
              f"best of {args.repeat} (harness+runner: a task of ideal-rate x seconds samples)")
        header = f"{'conc':>5} {'client':<15} {'req/s':>8} {'ideal':>8} {'%ideal':>7} {'%ceiling':>8} "
        print(header + f"{'x baseline':>10} {'CPU ms/req':>10} {'server CPU ms/req':>17}")
        for c in args.concurrency:
            ideal = c / args.delay
            n = max(c * 2, int(ideal * args.seconds))  # samples for the runner row
            results: dict[str, tuple[float, float]] = {}
            server_cpu: dict[str, float] = {}
            # clients take turns, --repeat rounds, best round kept: other load on a shared machine
            # comes and goes within seconds and would otherwise favour whichever client ran in a lull
            for _ in range(args.repeat):
                for name in args.clients:
                    measured = await measure_client(name, base_url, c, n, args.seconds, proc.pid)
                    if measured is None:
                        continue
                    rps, cpu, srv_cpu = measured
                    if rps > results.get(name, (0.0, 0.0))[0]:
                        results[name], server_cpu[name] = (rps, cpu), srv_cpu
            base = results.get("openai-default", (0.0, 0.0))[0]
            ceiling = results.get("ceiling", (0.0, 0.0))[0]
            for name, (rps, cpu) in results.items():
                pct_ceiling = f"{100 * rps / ceiling:7.1f}%" if ceiling else "      -"
                ratio = f"{rps / base:9.2f}x" if base else "        -"
                print(f"{c:>5} {name:<15} {rps:8.1f} {ideal:8.0f} {100 * rps / ideal:6.1f}% {pct_ceiling} "
                      f"{ratio} {cpu:10.2f} {server_cpu[name]:17.2f}", flush=True)
            if "harness+runner" in args.clients and args.stages:
                await print_stages(base_url, n, c, results.get("harness", (0.0, 0.0))[1])
    finally:
        proc.terminate()
        proc.wait(10)


async def print_stages(base_url: str, n: int, c: int, adapter_cpu_ms: float) -> None:
    """One more runner run with every stage timed (the wrappers add about a microsecond per call,
    so this run is not one of the measured ones): CPU microseconds per request by stage."""
    with StageClock() as clock:
        _, cpu_ms = await measure_runner(base_url, n, c, clock)
    total = cpu_ms * 1000
    rest = total - sum(clock.own.values()) / n * 1e6
    print(f"{c:>5} harness+runner CPU by stage (us/request, a separate timed run of {n} samples; "
          f"the adapter alone: {adapter_cpu_ms * 1000:.0f} us/request)")
    for stage, spent in sorted(clock.own.items(), key=lambda kv: -kv[1]):
        print(f"{'':>7}{stage:<30} {spent / n * 1e6:7.1f} {100 * spent / n * 1e6 / total:5.1f}%")
    print(f"{'':>7}{'HTTP client, event loop, rest':<30} {rest:7.1f} {100 * rest / total:5.1f}%")
    print(f"{'':>7}{'total':<30} {total:7.1f}; the oldest row waited {clock.max_row_age * 1000:.0f} ms for its commit",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each measurement")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 32, 256])
    parser.add_argument("--repeat", type=int, default=3, help="rounds per point; the best is reported")
    parser.add_argument("--clients", nargs="+", default=list(CLIENTS), choices=list(CLIENTS))
    parser.add_argument("--no-stages", dest="stages", action="store_false",
                        help="skip the runner's per-stage CPU breakdown (one extra run per concurrency)")
    args = parser.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
