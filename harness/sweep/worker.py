"""One sweep worker: lease a unit, evaluate it with the ordinary runner, mark it done, repeat.

A worker is a process (a Ray actor, or a plain local process) with its own pooled engine. It keeps
the models it has built (at most ``max_models``, least recently used out) and prefers units of those
models, so a model's weights are loaded once per worker. A model that takes concurrent calls (an API
backend: ``concurrency > 1``) opens more unit slots in the same event loop, up to ``max_slots``.

The worker never holds a transaction across a model call: leasing, heartbeats and completion are
short transactions of their own (:mod:`harness.store.units`), and the runner commits samples in
groups as usual. When a worker completes the last unit of a run, it finalises the run (metrics from
the stored rows): claim and finalisation are one transaction (:mod:`harness.finalize`), so exactly one
worker does it, and a worker killed meanwhile leaves the run unfinished; every worker that finds no
unit left finalises such runs (that is how a rerun sweep finishes what a killed finaliser left).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from harness.errors import UserError
from harness.model import close_model
from harness.store import units
from harness.store.leases import new_owner
from harness.store.schema import OPERATOR, RunRow
from harness.store.schema_sweeps import SweepRow
from harness.sweep.matrix import RunEntry
from harness.task import Task

POLL_SECONDS = 0.5  # how often an idle worker looks for units another worker may have abandoned


@dataclass
class WorkerReport:
    owner: str
    units_done: int = 0
    units_failed: int = 0
    samples_new: int = 0
    samples_skipped: int = 0  # already stored when the unit started (a unit taken over from a dead worker)
    models_built: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"owner": self.owner, "units_done": self.units_done, "units_failed": self.units_failed,
                "samples_new": self.samples_new, "samples_skipped": self.samples_skipped,
                "models_built": self.models_built, "errors": self.errors[:5]}


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    return f"{type(exc).__name__}: {msg}"[:500] if not isinstance(exc, UserError) else msg[:500]


class SweepWorker:
    def __init__(self, sessions: sessionmaker[Session], sweep_id: int, *, entries: list[int] | None = None,
                 max_slots: int = 4, max_models: int = 2, lease_seconds: float = units.UNIT_LEASE_SECONDS,
                 wait_for_others: bool = True) -> None:
        self.sessions = sessions
        self.sweep_id = sweep_id
        self.entries = entries
        self.max_slots = max(1, max_slots)
        self.max_models = max(1, max_models)
        self.lease_seconds = lease_seconds
        self.wait_for_others = wait_for_others
        self.owner = new_owner()
        self.report = WorkerReport(self.owner)
        with sessions() as s:
            row = s.get(SweepRow, sweep_id)
            if row is None:
                raise UserError(f"no sweep with id {sweep_id}")
            self.runs = [RunEntry.from_dict(d) for d in row.config["runs"]]
        self._models: OrderedDict[str, Any] = OrderedDict()
        self._tasks: dict[int, Task] = {}
        self._broken: dict[str, str] = {}  # model key -> why it cannot be built here
        self._sized: set[int] = set()
        self._fitted: set[tuple[str, int]] = set()  # (model, entry): fit-then-predict models train once
        self._slots = 0
        self._stop = asyncio.Event()

    # ---- models and tasks, built once per worker ------------------------------------------------
    @staticmethod
    def _model_key(entry: RunEntry) -> str:
        from harness.types import stable_hash

        return stable_hash([entry.model, entry.model_settings, sorted(entry.resources.items())])

    def _task(self, i: int) -> Task:
        if i not in self._tasks:
            from harness.runner import build_task

            task = build_task(self.runs[i].task, self.runs[i].task_options)
            loaded: list[Any] = []
            load = task.load

            def once() -> list[Any]:
                # every unit of the run selects its samples from the task: read the data once per worker
                if not loaded:
                    loaded.extend(load())
                return loaded

            task.load = once
            self._tasks[i] = task
        return self._tasks[i]

    async def _model(self, entry: RunEntry, task: Task) -> Any:
        from harness.modelspec import build_model

        key = self._model_key(entry)
        if key in self._broken:
            raise UserError(self._broken[key])
        if key in self._models:
            self._models.move_to_end(key)
            return self._models[key]
        try:
            model = build_model(entry.model, entry.model_settings, set(task.modalities))
        except Exception as exc:  # an import error or a backend refusing: the same on every unit
            self._broken[key] = f"model {entry.model!r} cannot be built on worker {self.owner}: {_one_line(exc)}"
            raise UserError(self._broken[key]) from None
        self.report.models_built += 1
        self._models[key] = model
        while len(self._models) > self.max_models:
            old_key, old = self._models.popitem(last=False)
            self._fitted = {f for f in self._fitted if f[0] != old_key}  # a rebuilt model trains again
            await close_model(old)
        return model

    def _loaded_entries(self) -> list[int]:
        keys = set(self._models)
        return [i for i, e in enumerate(self.runs) if self._model_key(e) in keys]

    # ---- the loop --------------------------------------------------------------------------------
    async def run(self) -> WorkerReport:
        beat = asyncio.create_task(self._heartbeat())
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                self._spawn()
            # no unit left to claim: runs a dead worker left unfinalised are finished here (a rerun
            # sweep, or this worker restarted by Ray after being killed while finalising)
            await asyncio.to_thread(self.finalize_leftovers)
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
            for model in self._models.values():
                with contextlib.suppress(Exception):
                    await close_model(model)
        return self.report

    def _spawn(self) -> None:
        self._slots += 1
        self._group.create_task(self._slot())

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            with contextlib.suppress(Exception):  # a missed beat only shortens the lease
                units.heartbeat(self.sessions, self.owner, self.lease_seconds)

    async def _slot(self) -> None:
        while not self._stop.is_set():
            if units.sweep_status(self.sessions, self.sweep_id) != "running":
                self._stop.set()
                return
            unit = units.claim(self.sessions, self.sweep_id, self.owner, entries=self.entries,
                               prefer=self._loaded_entries(), seconds=self.lease_seconds)
            if unit is None:
                left = units.outstanding(self.sessions, self.sweep_id)
                if self.wait_for_others and left.get("leased", 0) + left.get("pending", 0) > 0:
                    # another worker holds the rest: wait, and take its unit over if it dies
                    await asyncio.sleep(POLL_SECONDS)
                    continue
                return
            concurrent = await self._run_unit(unit)
            if concurrent and self._slots < self.max_slots:
                self._spawn()

    async def _run_unit(self, unit: units.Unit) -> bool:
        """Evaluate one unit; True when its model takes concurrent calls (more slots pay off)."""
        from harness.runner import EvalConfig, Runner

        entry = self.runs[unit.entry]
        try:
            task = self._task(unit.entry)
            model = await self._model(entry, task)
            cfg = EvalConfig(task=entry.task, model=entry.model, task_options=entry.task_options,
                             model_settings=entry.model_settings, judge=entry.judge,
                             judge_settings=entry.judge_settings, seed=entry.seed, epochs=entry.epochs,
                             sample_ids=unit.sample_ids, run_name=entry.run_name, progress=False)
            fitted = (self._model_key(entry), unit.entry)
            runner = Runner(cfg, session_factory=self.sessions, task=task, model=model, unit=True,
                            fit=fitted not in self._fitted)
            summary = await runner.run_async()
            self._fitted.add(fitted)
        except Exception as exc:
            message = _one_line(exc)
            self.report.errors.append(message)
            self.report.units_failed += 1
            units.finish(self.sessions, unit, self.owner, error=message)
            return False
        self.report.samples_new += summary.n_new
        self.report.samples_skipped += summary.n_skipped
        self._size_run(unit.entry, summary.run_id)
        if units.finish(self.sessions, unit, self.owner):
            self.report.units_done += 1
            self._finalize_if_complete(entry, summary.run_id, runner)
        return int(getattr(model, "concurrency", 1) or 1) > 1

    def _size_run(self, i: int, run_id: int) -> None:
        """A unit opens the run with its own size; the run's size is the whole entry's."""
        if i in self._sized:
            return
        total = len(self.runs[i].sample_ids) * self.runs[i].epochs
        with self.sessions.begin() as s:
            s.execute(update(RunRow).where(RunRow.id == run_id, RunRow.n_samples < total).values(n_samples=total))
        self._sized.add(i)

    def _finalize_if_complete(self, entry: RunEntry, run_id: int, runner: Any) -> None:
        # the claim ("every unit of the run is done", the run still unfinished) is decided under the
        # run's lock in the finalising transaction itself: of the workers that see the run complete,
        # one finalises it, and a worker killed while finalising leaves it unfinished for the next
        with self.sessions() as s:
            if not units.run_complete(s, self.sweep_id, entry.run_name):
                return  # the common case, read without taking the run's lock
        runner.finalize(run_id, "finished", claim=self._complete(entry))

    def _complete(self, entry: RunEntry) -> Callable[[Session], bool]:
        return lambda s: units.run_complete(s, self.sweep_id, entry.run_name)

    def finalize_leftovers(self) -> int:
        """Finalise this sweep's runs whose every unit is done but which are still unfinished (the
        worker that completed the last unit died while finalising, or before it began); how many it
        finalised. The claim is the same as above, so a live finaliser is never doubled."""
        from harness.finalize import UNFINISHED, finalize_run

        finalised = 0
        for i, entry in enumerate(self.runs):
            if self.entries is not None and i not in self.entries:
                continue
            with self.sessions() as s:
                run = s.execute(select(RunRow.id, RunRow.status).where(
                    RunRow.name == entry.run_name, RunRow.owner == OPERATOR)).first()
                if run is None or run.status not in UNFINISHED or not units.run_complete(s, self.sweep_id,
                                                                                         entry.run_name):
                    continue
            try:
                done = finalize_run(self.sessions, self._task(i), run.id, "finished", seed=entry.seed,
                                    owner=self.owner, claim=self._complete(entry))
            except Exception as exc:  # e.g. SQLite still locked by a live finaliser: that one finishes it
                self.report.errors.append(f"finalising run {entry.run_name!r}: {_one_line(exc)}")
                continue
            finalised += done is not None
        return finalised


def work(db_url: str, sweep_id: int, **kwargs: Any) -> dict[str, Any]:
    """A worker's whole life, for a Ray actor or a local process: returns its report as a dict."""
    from harness.store.db import open_db

    sessions = open_db(db_url, auto_create=False)
    started = time.perf_counter()
    report = asyncio.run(SweepWorker(sessions, sweep_id, **kwargs).run())
    out = report.to_dict()
    out["seconds"] = time.perf_counter() - started
    sessions.kw["bind"].dispose()
    return out
