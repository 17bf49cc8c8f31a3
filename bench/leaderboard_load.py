"""Leaderboard under load: p50/p99 latency and requests/s for the overview page and its JSON.

Builds a results database of ``--models`` x ``--tasks`` runs with ``--samples`` sample rows each
(default 100 x 20 x 1,000 = 2,000 runs, 2 million sample rows; bulk-inserted directly: executemany
on SQLite, COPY on PostgreSQL), starts the leaderboard with uvicorn in its own process on
127.0.0.1, and drives it with ``--clients`` concurrent connections (a bounded, closed-loop load: each
sends its next request when the previous one is answered; gzip accepted, as browsers do). The load
generator is ``wrk`` (Debian package) when installed, else an aiohttp client (``--client``); neither
decompresses, so the figures are the server's, not the load generator's.

Scenarios per engine: the cached app alone; with ``--writes`` progress updates a second; with a
concurrent ``harness eval`` (``--eval-samples``, the ``qa`` task against tests/openai_server.py,
``--eval-concurrency`` calls in flight) writing sample rows into the same database at API rates;
and the baseline. Each line ends with the machine's 1-minute load average (``os.getloadavg``) as
that measurement ended and, under the eval, how many rows it wrote meanwhile.

Baseline: the same app with its page cache turned off (``create_app(cache_entries=0)``), so every
request queries the database and renders the page; the ratio printed is baseline p99 / cached p99.
Target: cached p99 under 100 ms on a 2-core machine, on SQLite and PostgreSQL.

    python bench/leaderboard_load.py [--engine sqlite|postgres|both] [--pg-url URL] [--requests 4000]

Without ``--pg-url`` a throwaway PostgreSQL server is started (as tests/setup.d/10-postgres.sh does).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

FAMILIES = ["text", "vision", "video", "audio", "3d"]
MODALITIES = {"text": ["text"], "vision": ["image", "text"], "video": ["text", "video"], "audio": ["audio", "text"],
              "3d": ["mesh", "text"]}
BACKENDS = ["openai", "hf", "vllm", "anthropic", "builtin"]
SAMPLE_COLS = ["run_id", "sample_id", "epoch", "input_hash", "input", "target", "output", "prediction", "answer",
               "scores", "unscored", "explanation", "details", "input_tokens", "output_tokens", "calls", "cost",
               "latency_s", "cached", "error", "error_kind", "created_at"]


# ---- database -------------------------------------------------------------------------------------


def build_db(url: str, n_models: int, n_tasks: int, n_samples: int, seed: int = 0) -> float:
    """Fill ``url`` (an empty database) and return the seconds it took."""
    from sqlalchemy import insert

    from harness.store.db import open_db
    from harness.store.schema import MetricRow, ModelRow, RunRow, TaskRow
    from harness.types import stable_hash

    t0 = time.perf_counter()
    rng = random.Random(seed)
    sessions = open_db(url)
    now = datetime.now()
    with sessions.begin() as s:
        s.execute(insert(TaskRow), [{
            "id": t + 1, "name": f"task{t:02d}", "version": "1", "content_hash": stable_hash(t)[:16],
            "family": FAMILIES[t % len(FAMILIES)], "description": f"synthetic task {t}",
            "modalities": MODALITIES[FAMILIES[t % len(FAMILIES)]],
            "primary_metric": "wer" if t % 10 == 9 else "accuracy", "created_at": now} for t in range(n_tasks)])
        s.execute(insert(ModelRow), [{
            "id": m + 1, "spec": f"{BACKENDS[m % len(BACKENDS)]}:org/model-{m:03d}",
            "backend": BACKENDS[m % len(BACKENDS)],
            "display_name": f"model-{m:03d}", "info": {"size": f"{(m % 9 + 1) * 7}B"}, "created_at": now}
            for m in range(n_models)])
        runs, metrics = [], []
        skill = [rng.uniform(0.2, 0.9) for _ in range(n_models)]
        for m in range(n_models):
            for t in range(n_tasks):
                rid = m * n_tasks + t + 1
                acc = min(0.99, max(0.01, skill[m] + rng.uniform(-0.1, 0.1)))
                runs.append({"id": rid, "name": f"run-{m:03d}-{t:02d}", "task_id": t + 1, "model_id": m + 1,
                             "judge_spec": None, "config": {"task": f"task{t:02d}", "model": f"model-{m:03d}"},
                             "config_hash": stable_hash([m, t]), "harness_version": "0.1.0", "git_revision": "bench",
                             "status": "finished", "n_samples": n_samples, "n_done": n_samples, "n_errors": 0,
                             "total_cost": 0.0002 * n_samples * (1 + m % 7), "created_at": now, "started_at": now,
                             "finished_at": now})
                half = 1.96 * (acc * (1 - acc) / n_samples) ** 0.5
                name = "wer" if t % 10 == 9 else "accuracy"
                value = 1 - acc if name == "wer" else acc
                metrics += [
                    {"run_id": rid, "name": name, "value": value, "ci_low": max(0.0, value - half),
                     "ci_high": min(1.0, value + half),
                     "n": n_samples, "breakdown_key": "", "breakdown_value": ""},
                    {"run_id": rid, "name": "errors", "value": 0.0, "ci_low": None, "ci_high": None, "n": n_samples,
                     "breakdown_key": "", "breakdown_value": ""},
                    {"run_id": rid, "name": "cost_per_sample", "value": 0.0002 * (1 + m % 7), "ci_low": None,
                     "ci_high": None, "n": n_samples, "breakdown_key": "", "breakdown_value": ""},
                ] + [{"run_id": rid, "name": name, "value": value, "ci_low": max(0.0, value - 2 * half),
                      "ci_high": min(1.0, value + 2 * half), "n": n_samples // 3, "breakdown_key": "category",
                      "breakdown_value": cat} for cat in ("easy", "medium", "hard")]
        s.execute(insert(RunRow), runs)
        s.execute(insert(MetricRow), metrics)
    engine = sessions.kw["bind"]
    dialect = engine.dialect.name

    def sample_rows(rid: int, acc: float):  # type: ignore[no-untyped-def]
        for i in range(n_samples):
            ok = rng.random() < acc
            yield (rid, str(i), 0, "", json.dumps({"messages": [{"role": "user", "content": [
                       {"type": "text", "text": f"question {i} of run {rid}"}]}], "metadata": {"category": "easy"}}),
                   json.dumps(str(i % 97)), f"the answer is {i % 97 if ok else 0}", "null", str(i % 97),
                   json.dumps({"accuracy": 1.0 if ok else 0.0}), None, "", "{}", 12, 6, 1, 0.0002, 0.05, False, None,
                   None, now)

    for rid in range(1, len(runs) + 1):
        acc = metrics[(rid - 1) * 6]["value"]
        if dialect == "postgresql":
            raw = engine.raw_connection()
            try:
                with raw.cursor() as cur:
                    with cur.copy(f"COPY sample_results ({', '.join(SAMPLE_COLS)}) FROM STDIN") as copy:
                        for row in sample_rows(rid, acc):
                            copy.write_row(row)
                raw.commit()
            finally:
                raw.close()
        else:  # raw executemany with JSON already serialised: what SQLAlchemy would store, 5x faster
            raw = engine.raw_connection()
            try:
                marks = ", ".join("?" * len(SAMPLE_COLS))
                raw.cursor().executemany(f"INSERT INTO sample_results ({', '.join(SAMPLE_COLS)}) VALUES ({marks})",
                                         [(*r[:-1], r[-1].isoformat(sep=" ")) for r in sample_rows(rid, acc)])
                raw.commit()
            finally:
                raw.close()
        if rid % 200 == 0:
            print(f"  {rid}/{len(runs)} runs of samples written ({time.perf_counter() - t0:.0f} s)", flush=True)
    if dialect == "postgresql":
        with engine.begin() as conn:
            # ids were given explicitly: move the sequences past them, or the next insert (a
            # concurrent eval's task, model and run rows) collides with them
            for table in ("sample_results", "tasks", "models", "runs"):
                conn.exec_driver_sql(f"SELECT setval('{table}_id_seq', (SELECT max(id) FROM {table}))")
            conn.exec_driver_sql("ANALYZE")
    engine.dispose()
    return time.perf_counter() - t0


def start_postgres(tmp: Path, port: int) -> tuple[str, list[str]]:
    pg_bin = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    data = tmp / "pg"
    data.mkdir()
    shutil.chown(data, "postgres")
    run_as = ["runuser", "-u", "postgres", "--"]
    subprocess.run(run_as + [str(pg_bin / "initdb"), "-D", str(data / "data"), "-U", "harness", "--auth=trust",
                             "--no-sync"], check=True, capture_output=True)
    subprocess.run(run_as + [str(pg_bin / "pg_ctl"), "-D", str(data / "data"), "-l", str(data / "log"), "-w", "start",
                             "-o", f"-c listen_addresses=127.0.0.1 -p {port} -k {data} -c fsync=off "
                                   "-c max_connections=200 -c synchronous_commit=off"], check=True, capture_output=True)
    subprocess.run(run_as + [str(pg_bin / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "harness", "bench"],
                   check=True, capture_output=True)
    stop = run_as + [str(pg_bin / "pg_ctl"), "-D", str(data / "data"), "-m", "immediate", "stop"]
    return f"postgresql+psycopg://harness@127.0.0.1:{port}/bench", stop


# ---- server and load ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


EVAL_LABEL = "cached, concurrent eval"

SERVER = """
import sys, uvicorn
from harness.leaderboard.app import create_app
app = create_app(sys.argv[1], cache_entries=int(sys.argv[3]))
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False)
"""


def start_server(url: str, cache_entries: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, url, str(port), str(cache_entries)],
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    base = f"http://127.0.0.1:{port}"
    import urllib.request

    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(base + "/api/tasks", timeout=5):
                return proc, base
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("leaderboard server did not start") from None
            time.sleep(0.2)


async def _load(url: str, n_requests: int, clients: int) -> tuple[list[float], float, int]:
    import aiohttp

    latencies: list[float] = []
    errors = 0
    remaining = n_requests

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal remaining, errors
        while remaining > 0:
            remaining -= 1
            t = time.perf_counter()
            async with session.get(url, headers={"Accept-Encoding": "gzip"}) as resp:
                await resp.read()
                if resp.status != 200:
                    errors += 1
            latencies.append(time.perf_counter() - t)

    conn = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=conn, auto_decompress=False) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(clients)))
        wall = time.perf_counter() - t0
    return latencies, wall, errors


def measure_wrk(base: str, path: str, seconds: float, clients: int) -> dict[str, float]:
    """wrk's own percentiles (``--latency``) and requests/s."""
    import re

    cmd = ["wrk", "-t2", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--latency", "--timeout", "60s",
           "-H", "Accept-Encoding: gzip", base + path]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    def ms(text: str) -> float:
        value, unit = re.fullmatch(r"([0-9.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
        return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[unit]

    pct = dict(re.findall(r"^ +(50|99)% +(\S+) *$", out, re.M))
    if set(pct) != {"50", "99"}:
        raise RuntimeError(f"cannot read wrk's output:\n{out}")
    n = int(re.search(r"([0-9]+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: ([0-9]+)", out)
    errors = re.search(r"Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)", out)
    return {"n": n, "p50_ms": ms(pct["50"]), "p99_ms": ms(pct["99"]),
            "rps": float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1)),  # type: ignore[union-attr]
            "errors": (int(bad.group(1)) if bad else 0) + (sum(map(int, errors.groups())) if errors else 0)}


def measure(base: str, path: str, n_requests: int, clients: int, client: str = "aiohttp",
            seconds: float = 10.0) -> dict[str, float]:
    if client == "wrk":
        return measure_wrk(base, path, seconds, clients)
    lat, wall, errors = asyncio.run(_load(base + path, n_requests, clients))
    lat.sort()
    return {"n": len(lat), "p50_ms": 1000 * statistics.median(lat), "p99_ms": 1000 * lat[int(0.99 * (len(lat) - 1))],
            "rps": len(lat) / wall, "errors": errors}


def first_request_ms(base: str, path: str) -> tuple[float, int]:
    import urllib.request

    t = time.perf_counter()
    with urllib.request.urlopen(base + path, timeout=120) as resp:
        body = resp.read()
    return 1000 * (time.perf_counter() - t), len(body)


class Writer:
    """Stands in for a run in progress: bumps one run's progress counter ``per_second`` times a
    second, so every page cache check finds the database changed."""

    def __init__(self, url: str, per_second: float) -> None:
        import threading

        self.url, self.period = url, 1.0 / per_second
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        from sqlalchemy import create_engine, text

        engine = create_engine(self.url)
        while not self.stop.wait(self.period):
            with engine.begin() as conn:
                conn.execute(text("UPDATE runs SET n_done = n_done + 1 WHERE id = 1"))
        engine.dispose()

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


class ConcurrentEval:
    """A real ``harness eval`` writing into the benchmarked database while the load runs: the ``qa``
    task over a generated JSONL of ``samples`` rows, against tests/openai_server.py answering after
    ``delay`` seconds, ``concurrency`` calls in flight, no response cache. It writes sample rows and
    progress counters at API rates (a group commit every half second) and adds a run, so it also
    changes what the overview shows when it starts and when it is stopped (SIGINT: it finalises)."""

    def __init__(self, url: str, tmp: Path, samples: int, concurrency: int, delay: float) -> None:
        self.url, self.tmp, self.samples, self.concurrency, self.delay = url, tmp, samples, concurrency, delay
        self.server: subprocess.Popen[str] | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.done_at_start = 0

    def __enter__(self) -> ConcurrentEval:
        data = self.tmp / "eval.jsonl"
        if not data.exists():
            with data.open("w") as f:
                for i in range(self.samples):
                    f.write(json.dumps({"id": f"q{i}", "input": f"What is {i} + 2? Reply with the number only.",
                                        "target": "4"}) + "\n")
        server_py = Path(__file__).resolve().parent.parent / "tests" / "openai_server.py"
        self.server = subprocess.Popen([sys.executable, str(server_py), "--delay", str(self.delay), "--no-record",
                                        "--text", "4"], stdout=subprocess.PIPE, text=True)
        assert self.server.stdout is not None
        line = self.server.stdout.readline()
        if not line.startswith("READY"):
            raise RuntimeError(f"the API stand-in did not start: {line!r}")
        base_url = f"http://127.0.0.1:{int(line.split()[1])}/v1"
        self.run_name = f"bench-eval-{time.time_ns()}"
        harness_cli = Path(sys.executable).with_name("harness")
        self.proc = subprocess.Popen(
            [str(harness_cli), "eval", "-t", "qa", "-T", f"path={data}", "-m", "openai:test", "-M",
             f"base_url={base_url}", "-M", "max_retries=0", "--concurrency", str(self.concurrency), "--no-cache",
             "--no-progress", "--run-name", self.run_name, "--db", self.url],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "OMP_NUM_THREADS": "1"})
        self.started = time.monotonic()
        # measure once rows are flowing: the eval's start-up (imports, loading the task) is not its load
        while self.rows_written() == 0:
            if self.proc.poll() is not None:
                raise RuntimeError(f"harness eval exited: {self.proc.stderr.read().decode()[-500:]}")  # type: ignore[union-attr]
            time.sleep(0.2)
        return self

    def rows_written(self) -> int:
        from sqlalchemy import create_engine, text

        engine = create_engine(self.url)
        try:
            with engine.connect() as conn:
                return int(conn.execute(text("SELECT coalesce(max(n_done), 0) FROM runs WHERE name = :name"),
                                        {"name": self.run_name}).scalar() or 0)
        finally:
            engine.dispose()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.server is not None:
            self.server.terminate()
            self.server.wait(10)


def bench_engine(name: str, url: str, args: argparse.Namespace, tmp: Path) -> list[dict[str, object]]:
    import contextlib

    out = []
    setups = [("cached", 512, args.requests, 0.0), ("baseline: no cache", 0, args.baseline_requests, 0.0)]
    if args.writes:
        setups.insert(1, (f"cached, {args.writes:g} writes/s", 512, args.requests, args.writes))
    if args.eval_samples:
        setups.insert(-1, (EVAL_LABEL, 512, args.requests, 0.0))
    for label, entries, n, writes in setups:
        proc, base = start_server(url, entries)
        evaluation = (ConcurrentEval(url, tmp, args.eval_samples, args.eval_concurrency, args.eval_delay)
                      if label == EVAL_LABEL else contextlib.nullcontext())
        writer = Writer(url, writes) if writes else contextlib.nullcontext()
        try:
            with evaluation:
                for path in ("/", "/api/overview"):
                    cold, size = first_request_ms(base, path)
                    measure(base, path, min(200, n), args.clients)  # warm-up (aiohttp: also checks the answers)
                    # uncached answers take seconds under this load: measure long enough for many to finish
                    seconds = args.seconds if entries else max(args.seconds, 30.0)
                    rows_before = evaluation.rows_written() if isinstance(evaluation, ConcurrentEval) else 0
                    t_measure = time.perf_counter()
                    with writer:
                        res = measure(base, path, n, args.clients, args.client, seconds)
                    t_measure = time.perf_counter() - t_measure
                    load = os.getloadavg()[0]  # the 1-minute load average as the measurement ends
                    writer = Writer(url, writes) if writes else contextlib.nullcontext()
                    extra = ""
                    if isinstance(evaluation, ConcurrentEval):
                        rows = evaluation.rows_written() - rows_before
                        res["eval_rows_per_s"] = rows / t_measure
                        res["eval_running"] = evaluation.running()
                        extra = (f", eval wrote {rows} rows meanwhile"
                                 + ("" if evaluation.running() else ", AND ENDED: the measurement outlived it"))
                    out.append({"engine": name, "server": label, "path": path, "cold_ms": cold, "bytes": size,
                                "load": load, **res})
                    print(f"  {name:10s} {label:21s} {path:14s} p50 {res['p50_ms']:7.1f} ms  "
                          f"p99 {res['p99_ms']:7.1f} ms  {res['rps']:7.0f} req/s  (first request {cold:.0f} ms, "
                          f"{size // 1024} KiB, {res['errors']} errors, load {load:.1f}{extra})", flush=True)
        finally:
            proc.terminate()  # graceful: uvicorn finishes the requests in flight...
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:  # ...which, uncached under load, can take long
                proc.kill()
                proc.wait()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=["sqlite", "postgres", "both"], default="both")
    ap.add_argument("--pg-url", help="an empty PostgreSQL database to fill (default: start a throwaway server)")
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--baseline-requests", type=int, default=300)
    ap.add_argument("--client", choices=["wrk", "aiohttp"], default="wrk" if shutil.which("wrk") else "aiohttp",
                    help="load generator (default: wrk when installed)")
    ap.add_argument("--seconds", type=float, default=10.0, help="wrk: seconds per measurement")
    ap.add_argument("--writes", type=float, default=2.0,
                    help="also measure while a writer changes the database this often per second (0: skip)")
    ap.add_argument("--eval-samples", type=int, default=200_000,
                    help="also measure while a `harness eval` of this many samples writes to the database (0: skip)")
    ap.add_argument("--eval-concurrency", type=int, default=64, help="the concurrent eval's calls in flight")
    ap.add_argument("--eval-delay", type=float, default=0.05, help="seconds its API stand-in takes per reply")
    ap.add_argument("--keep", type=Path, help="build the databases here and keep them")
    ap.add_argument("--reuse", action="store_true", help="with --keep (sqlite) / --pg-url: the database is filled")
    args = ap.parse_args()
    tmp = args.keep if args.keep and args.reuse else Path(tempfile.mkdtemp(prefix="lb-bench-", dir=args.keep))
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; client {args.client}")
    shutil.chown(tmp, "postgres") if os.geteuid() == 0 else None
    results = []
    stop_pg: list[str] | None = None
    try:
        engines = ["sqlite", "postgres"] if args.engine == "both" else [args.engine]
        for engine in engines:
            if engine == "sqlite":
                url = f"sqlite:///{tmp / 'bench.db'}"
            elif args.pg_url:
                url = args.pg_url
            else:
                url, stop_pg = start_postgres(tmp, free_port())
            print(f"{engine}: building {args.models} models x {args.tasks} tasks x {args.samples} samples ...",
                  flush=True)
            if args.reuse:
                print(f"{engine}: reusing {url}", flush=True)
            else:
                secs = build_db(url, args.models, args.tasks, args.samples)
                print(f"{engine}: built in {secs:.0f} s", flush=True)
            results += bench_engine(engine, url, args, tmp)
    finally:
        if stop_pg:
            subprocess.run(stop_pg, capture_output=True)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(f"{args.clients} concurrent clients ({args.client}) on 127.0.0.1; target: cached p99 < 100 ms; "
          f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (a shared machine)")
    for engine in sorted({r["engine"] for r in results}):
        for path in ("/", "/api/overview"):
            cached = next(r for r in results if r["engine"] == engine and r["path"] == path and r["server"] == "cached")
            base = next(r for r in results if r["engine"] == engine and r["path"] == path
                        and str(r["server"]).startswith("baseline"))
            busy = [r for r in results if r["engine"] == engine and r["path"] == path and "writes" in str(r["server"])]
            evals = [r for r in results if r["engine"] == engine and r["path"] == path and r["server"] == EVAL_LABEL]
            verdict = "OK" if cached["p99_ms"] < 100 else "MISSED"
            print(f"{engine:9s} {path:14s} cached p50 {cached['p50_ms']:.1f} ms p99 {cached['p99_ms']:.1f} ms "
                  f"{cached['rps']:.0f} req/s [{verdict}] | vs baseline (no cache) p99 {base['p99_ms']:.0f} ms: "
                  f"{base['p99_ms'] / cached['p99_ms']:.1f}x lower p99, {cached['rps'] / base['rps']:.1f}x req/s"
                  + (f" | with {args.writes:g} writes/s: p50 {busy[0]['p50_ms']:.1f} ms p99 {busy[0]['p99_ms']:.1f} ms "
                     f"{busy[0]['rps']:.0f} req/s" if busy else "")
                  + (f" | under a concurrent eval ({evals[0]['eval_rows_per_s']:.0f} rows/s, load "
                     f"{evals[0]['load']:.1f}): p50 {evals[0]['p50_ms']:.1f} ms p99 {evals[0]['p99_ms']:.1f} ms "
                     f"[{'OK' if evals[0]['p99_ms'] < 100 else 'MISSED'}]" if evals else ""))


if __name__ == "__main__":
    io.DEFAULT_BUFFER_SIZE = 1 << 16
    main()
