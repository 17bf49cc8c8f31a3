"""Sweeps on Ray: expand a matrix into runs, cut the runs into leased work units, and let a pool of
Ray actors work them off into one database.

Ray is the engine (placement, restarts, resources); the database is the single source of truth.
The driver validates the whole matrix, connects to the cluster, and only then writes the sweep and
its units, so a bad entry or an unreachable cluster leaves nothing half-submitted. Actors restart
when their process dies (``max_restarts``) and their call is retried; a restarted or surviving worker
takes the dead one's unit over (its owner's pid is gone, or its lease expires) and the runner redoes
only that unit's samples without rows. Rerunning the same sweep resumes it.

On SQLite the workers can only be local processes (one file, one machine); a sweep on SQLite says
so and refuses a remote cluster address. PostgreSQL is the shared store for a cluster.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from harness.store import units
from harness.sweep.matrix import Matrix, RunEntry, SweepError, expand
from harness.sweep.schema import MAX_UNITS, validate_options
from harness.sweep.status import sweep_progress

MAX_UNIT = 500
# environment a worker needs to find the same caches, data and Blender/vLLM interpreters as the driver
PASSED_ENV = ("HARNESS_", "HF_", "TRANSFORMERS_", "OMP_NUM_THREADS", "OPENAI_")


@dataclass
class SweepOptions:
    workers: int = 2
    unit_size: int | None = None  # samples per unit; default: about four units per worker per run
    ray_address: str | None = None  # None or "local": a local Ray cluster; "auto" or host:port: that one
    lease_seconds: float = units.UNIT_LEASE_SECONDS
    max_slots: int = 4
    max_restarts: int = 3
    progress: bool = True
    say: Any = None  # callable(str) for one-line notes; default: stderr


@dataclass
class SweepResult:
    sweep_id: int
    name: str
    created: bool
    runs: list[dict[str, Any]]
    workers: list[dict[str, Any]] = field(default_factory=list)
    units: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every unit done and every run finished: a run whose finaliser died has all its units done and
        no metrics, and a sweep that stops there must not look complete (a rerun finishes it)."""
        return set(self.units) <= {"done"} and not self.unfinished_runs

    @property
    def unfinished_runs(self) -> list[str]:
        from harness.finalize import UNFINISHED

        return [str(r.get("run")) for r in self.runs if r.get("status") in UNFINISHED]


def _say(opts: SweepOptions, text: str) -> None:
    (opts.say or (lambda t: print(t, file=sys.stderr)))(text)


def check_options(opts: SweepOptions) -> None:
    """Refuse options out of range (``--unit-size 0``, ``--lease nan``, ``--workers 0``) as one line,
    through the sweep schema; called before any database is opened or cluster joined."""
    validate_options({"workers": opts.workers, "unit_size": opts.unit_size, "lease_seconds": opts.lease_seconds,
                      "max_slots": opts.max_slots, "max_restarts": opts.max_restarts,
                      "ray_address": opts.ray_address})


def unit_size(entries: list[RunEntry], opts: SweepOptions) -> int:
    if opts.unit_size is not None:  # 0 is refused, not read as "the default"
        if opts.unit_size < 1:
            raise SweepError("--unit-size must be at least 1")
        return min(opts.unit_size, MAX_UNIT)
    biggest = max((len(e.sample_ids) for e in entries), default=1)
    return max(1, min(MAX_UNIT, math.ceil(biggest / (4 * max(1, opts.workers)))))


def _reachable(address: str) -> None:
    """A fast one-line failure for an address nobody listens on (ray.init would retry for a minute)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise SweepError(f"Ray address {address!r} is not HOST:PORT (or `auto`, or `local`)")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except OSError as exc:
        raise SweepError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def connect(address: str | None, n_cpus: int) -> Any:
    try:
        import ray
    except ImportError:
        raise SweepError("sweeps run on Ray, which is not installed: pip install 'harness[sweep]'") from None
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local cluster needs no token file in ~/.ray
    env = {k: v for k, v in os.environ.items() if k.startswith(PASSED_ENV)}
    runtime_env = {"env_vars": env}
    if address not in (None, "local", "auto"):
        _reachable(address)
    if ray.is_initialized():
        return ray  # this process already joined a cluster (tests, notebooks): use it
    try:
        if address in (None, "local"):
            ray.init(num_cpus=max(2, n_cpus), include_dashboard=False, log_to_driver=False,
                     runtime_env=runtime_env, configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False, runtime_env=runtime_env, configure_logging=False)
    except SweepError:
        raise
    except Exception as exc:  # ConnectionError, RuntimeError("... no existing Ray instance"), ...
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise SweepError(f"cannot start or join a Ray cluster ({address or 'local'}): {first}") from None
    return ray


def _actor_class(ray: Any, max_restarts: int) -> Any:
    class SweepActor:
        """One worker process; its whole life is one ``work`` call (retried after a restart)."""

        def __init__(self, db_url: str, sweep_id: int, kwargs: dict[str, Any]) -> None:
            self.db_url, self.sweep_id, self.kwargs = db_url, sweep_id, kwargs

        def pid(self) -> int:
            return os.getpid()

        def work(self) -> dict[str, Any]:
            from harness.sweep.worker import work

            return work(self.db_url, self.sweep_id, **self.kwargs)

    return ray.remote(max_restarts=max_restarts, max_task_retries=max_restarts)(SweepActor)


def _groups(entries: list[RunEntry], n_workers: int) -> list[tuple[dict[str, float], list[int] | None, int]]:
    """Entries grouped by the resources their model asks for, with a share of the workers each."""
    by: dict[tuple[tuple[str, float], ...], list[int]] = {}
    for i, e in enumerate(entries):
        by.setdefault(tuple(sorted(e.resources.items())), []).append(i)
    if len(by) == 1:
        ((key, _),) = by.items()
        return [(dict(key), None, n_workers)]
    total = sum(len(v) for v in by.values())
    return [(dict(key), idx, max(1, round(n_workers * len(idx) / total))) for key, idx in by.items()]


def start(sessions: sessionmaker[Session], db_url: str, matrix: Matrix, opts: SweepOptions,
          entries: list[RunEntry] | None = None) -> SweepResult:
    """Validate, connect, write the sweep, run the workers until every unit is done; the result.
    ``entries``: the matrix already expanded (the CLI does it before it opens the database)."""
    check_options(opts)
    t0 = time.perf_counter()
    if entries is None:
        entries = expand(matrix)
    name = matrix.name or matrix.default_name()
    notes = []
    if sessions.kw["bind"].dialect.name == "sqlite":
        if opts.ray_address not in (None, "local"):
            raise SweepError("a sweep on SQLite runs its workers as local processes only: use a PostgreSQL "
                             "--db for a Ray cluster")
        notes.append(f"SQLite store: the {opts.workers} workers run as local processes on this machine")
    size = unit_size(entries, opts)
    n_units = sum(math.ceil(len(e.sample_ids) / size) for e in entries)
    if n_units > MAX_UNITS:  # one row each, written in one transaction: bounded before Ray or the database
        raise SweepError(f"the sweep would be {n_units:,} work units of {size} samples (at most {MAX_UNITS:,}): "
                         "raise --unit-size or split the sweep")
    ray = connect(opts.ray_address, opts.workers)
    plan = [(i, e.run_name, ids) for i, e in enumerate(entries) for ids in units.chunk(e.sample_ids, size)]
    config = {"runs": [e.to_dict() for e in entries], "unit_size": size, "workers": opts.workers}
    existing = units.find_sweep(sessions, name)
    if existing is not None and [r["run_name"] for r in existing.config.get("runs", [])] != \
            [e.run_name for e in entries]:
        raise SweepError(f"sweep {name!r} exists with other runs; pick another name")
    sweep_id, created = units.create_sweep(sessions, name, config, plan)
    for note in notes:
        _say(opts, note)
    _say(opts, f"sweep {name!r} (id {sweep_id}): {len(entries)} runs, {len(plan)} units of up to {size} samples, "
               f"{opts.workers} workers" + ("" if created else " (resumed: finished units are kept)"))
    reports = _run_workers(ray, sessions, db_url, sweep_id, entries, opts)
    left = units.outstanding(sessions, sweep_id)
    if set(left) <= {"done"}:
        units.set_sweep_status(sessions, sweep_id, "finished")
    elif units.sweep_status(sessions, sweep_id) == "running":
        units.set_sweep_status(sessions, sweep_id, "failed")
    runs = [r.to_dict() for r in sweep_progress(sessions, sweep_id)]
    return SweepResult(sweep_id, name, created, runs, reports, left, time.perf_counter() - t0, notes)


def _run_workers(ray: Any, sessions: sessionmaker[Session], db_url: str, sweep_id: int, entries: list[RunEntry],
                 opts: SweepOptions) -> list[dict[str, Any]]:
    actor_cls = _actor_class(ray, opts.max_restarts)
    actors, calls = [], []
    for resources, idx, n in _groups(entries, opts.workers):
        options = {"num_cpus": resources.get("cpus", 1.0), "num_gpus": resources.get("gpus", 0.0)}
        if resources.get("memory_gb"):
            options["memory"] = int(resources["memory_gb"] * 2**30)
        kwargs = {"entries": idx, "max_slots": opts.max_slots, "lease_seconds": opts.lease_seconds}
        for _ in range(n):
            actor = actor_cls.options(**options).remote(db_url, sweep_id, kwargs)
            actors.append(actor)
            calls.append(actor.work.remote())
    reports: list[dict[str, Any]] = []
    try:
        _wait(ray, sessions, sweep_id, calls, reports, opts)
    except KeyboardInterrupt:
        released = units.cancel(sessions, sweep_id)
        _say(opts, f"sweep cancelled: {released} leased units released; rerun the same command to continue")
        raise
    finally:
        for actor in actors:
            try:
                ray.kill(actor)
            except Exception:  # already gone
                pass
    return reports


def _wait(ray: Any, sessions: sessionmaker[Session], sweep_id: int, calls: list[Any],
          reports: list[dict[str, Any]], opts: SweepOptions) -> None:
    from harness.progress import RunProgress

    planned = sum(r.planned for r in sweep_progress(sessions, sweep_id))
    done0 = sum(r.done for r in sweep_progress(sessions, sweep_id))
    with RunProgress(opts.progress, planned, done0, "sweep") as bar:
        pending = list(calls)
        while pending:
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=1.0)
            for ref in ready:
                try:
                    reports.append(ray.get(ref))
                except Exception as exc:  # the actor died more often than it may restart
                    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    reports.append({"owner": "?", "error": first[:300]})
            rows = sweep_progress(sessions, sweep_id)
            bar.update(sum(r.done for r in rows), sum(r.errors for r in rows))  # absolute counts, from the rows
