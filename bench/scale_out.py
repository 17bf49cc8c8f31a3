"""Scale-out of a sweep over Ray workers: samples/s on 1, 2, 4 and 8 workers against N × the
single-worker rate, for an I/O-bound model (a fixed delay per call), with lost and duplicated rows.

    python bench/scale_out.py                      # 4,000 samples, 50 ms per call, SQLite
    python bench/scale_out.py --db postgresql+psycopg://harness@127.0.0.1:5432/harness

The workers are local processes. On a 2-core machine this measures the coordination overhead of
the sweep (leasing, heartbeats, group commits, finalising), not compute: every worker spends its
time waiting on the model's delay, as it would on an API. Each worker has ``--concurrency`` calls
in flight (the model's concurrency), so one worker's ideal rate is concurrency / delay.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def make_task_file(folder: Path, n: int) -> Path:
    path = folder / "questions.jsonl"
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"q{i:05d}", "input": f"What is {i} + 1?", "target": str(i + 1)}) + "\n")
    return path


def one(db_url: str, data: Path, workers: int, delay: float, concurrency: int, samples: int,
        unit_size: int | None = None) -> dict[str, float]:
    from sqlalchemy import func, select

    from harness.store.db import open_db
    from harness.store.schema import SampleResultRow
    from harness.sweep import SweepOptions, start
    from harness.sweep.matrix import Matrix, Resources

    sessions = open_db(db_url)
    settings = {"delay": delay, "batch_size": 1, "concurrency": concurrency}
    matrix = Matrix([("qa", {"path": str(data)})], [("builtin:number", settings, Resources())],
                    seeds=[time.time_ns() % 1_000_000_007], name=f"scale-{workers}-{time.time_ns()}", limit=samples)
    # (a fresh seed per measurement: a new run, not a resumed one)
    # by default the units are sized so that every worker gets several
    opts = SweepOptions(workers=workers, unit_size=unit_size, progress=False, max_slots=1, say=lambda _t: None)
    t0 = time.perf_counter()
    result = start(sessions, db_url, matrix, opts)
    wall = time.perf_counter() - t0
    run_name = result.runs[0]["run"]
    work = sum(w.get("seconds", 0.0) for w in result.workers) / max(1, len(result.workers))
    with sessions() as s:
        from harness.store.schema import RunRow

        run_id = s.scalar(select(RunRow.id).where(RunRow.name == run_name))
        rows = s.scalar(select(func.count()).select_from(SampleResultRow).where(SampleResultRow.run_id == run_id))
        keys = s.scalar(select(func.count(func.distinct(SampleResultRow.sample_id)))
                        .where(SampleResultRow.run_id == run_id))
        first, last = s.execute(select(func.min(SampleResultRow.created_at), func.max(SampleResultRow.created_at))
                                .where(SampleResultRow.run_id == run_id)).one()
    # throughput while the workers work: first stored row to last (actor start-up is Ray's, not ours)
    span = max((last - first).total_seconds(), 1e-6)
    return {"workers": workers, "wall_s": wall, "work_s": work, "rate": samples / span,
            "lost": samples - keys, "duplicated": rows - keys}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=4000)
    ap.add_argument("--delay", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=8, help="calls in flight per worker")
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--unit-size", type=int, default=None, help="samples per work unit (default: the sweep's)")
    ap.add_argument("--db", default=None, help="database URL (default: a fresh SQLite file)")
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    counts = [int(x) for x in args.workers.split(",")]
    folder = Path(tempfile.mkdtemp(prefix="harness-scale-"))
    data = make_task_file(folder, args.samples)
    db_url = args.db or f"sqlite:///{folder / 'scale.db'}"
    import ray

    ray.init(num_cpus=max(counts), include_dashboard=False, log_to_driver=False, configure_logging=False)
    ideal = args.concurrency / args.delay
    print(f"# {args.samples} samples, {args.delay * 1000:.0f} ms per call, {args.concurrency} in flight per worker "
          f"(one worker's ideal: {ideal:.0f} samples/s), store {db_url.split(':')[0]}, {os.cpu_count()} cores")
    print("# local worker processes: on a machine with fewer cores than workers this measures the sweep's")
    print("# coordination overhead (leases, commits, finalising) for an I/O-bound model, not compute")
    print(f"{'workers':>7} {'samples/s':>10} {'vs N x 1 worker':>16} {'wall s':>7} {'lost':>5} {'dup':>4}  load")
    base = None
    for n in counts:
        r = one(db_url, data, n, args.delay, args.concurrency, args.samples, args.unit_size)
        base = base or r["rate"]
        load = os.getloadavg()[0]
        print(f"{n:>7} {r['rate']:>10.1f} {r['rate'] / (n * base):>16.2f} {r['wall_s']:>7.1f} {r['lost']:>5} "
              f"{r['duplicated']:>4}  {load:.1f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
