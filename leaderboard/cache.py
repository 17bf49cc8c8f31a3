"""In-process cache of rendered pages and query results, invalidated when the database changes.

The runner writes straight to SQL, so the app cannot be told about changes; instead it computes a
cheap fingerprint of the tables the cached views read (row counts, max ids, sums of progress
counters and metric values, latest finish time) at most every ``check_every`` seconds. Any write
that changes what a view shows changes the fingerprint; a push through this app bumps it at once.

The fingerprint has two scopes. ``summary`` covers what the overview shows (runs' identity and
status, metric rows, models, tasks); ``full`` adds the progress counters that a run in progress
updates twice a second (samples done, errors, cost). Metrics are written when a run finishes, so
a running evaluation leaves overview pages cached and only refreshes run, task and model pages.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session, sessionmaker

from harness.store.schema import MetricRow, ModelRow, RunRow, TaskRow

SCOPES = ("summary", "full")
log = logging.getLogger(__name__)


def db_fingerprint(s: Session) -> dict[str, str]:
    """{scope: fingerprint} (see the module docstring); reprs, so NaN sums equal themselves."""
    finished = func.sum(case((RunRow.status == "finished", 1), else_=0))
    runs = s.execute(select(func.count(RunRow.id), func.max(RunRow.id), finished, func.max(RunRow.finished_at),
                            func.sum(RunRow.task_id + RunRow.model_id))).one()
    progress = s.execute(select(func.sum(RunRow.n_done), func.sum(RunRow.n_errors), func.sum(RunRow.total_cost),
                                func.max(RunRow.started_at), func.sum(RunRow.n_samples))).one()
    metrics = s.execute(select(func.count(MetricRow.id), func.max(MetricRow.id), func.sum(MetricRow.value))).one()
    others = s.execute(select(select(func.count(ModelRow.id)).scalar_subquery(),
                              select(func.count(TaskRow.id)).scalar_subquery())).one()
    summary = repr((tuple(runs), tuple(metrics), tuple(others)))
    return {"summary": summary, "full": summary + repr(tuple(progress))}


@dataclass(slots=True)
class Page:
    body: bytes
    gzipped: bytes
    etag: str
    media_type: str
    headers: tuple[tuple[str, str], ...] = ()


def make_page(body: bytes, media_type: str, headers: tuple[tuple[str, str], ...] = ()) -> Page:
    etag = '"' + hashlib.sha1(body).hexdigest()[:20] + '"'
    return Page(body, gzip.compress(body, 5), etag, media_type, headers)


class ViewCache:
    """Rendered pages keyed by request, recomputed when :func:`db_fingerprint` changes.

    Stale-while-revalidate, so a database that changes every second (a run in progress commits
    twice a second) never makes readers wait: when the fingerprint changes, cached pages become
    stale rather than vanish; the first request for a stale page recomputes it while the others
    keep getting the stale copy. With ``get(..., background=True)`` not even that request waits:
    the recomputation runs in a background thread (at most ``rebuilders`` at a time) and every
    request until the new value is stored gets the stale copy; pages do not use it yet, because the
    request that finds the database changed would then show the previous version once more.
    Only one request at a time re-checks the fingerprint, and only one computation of a given page
    runs, so a refresh never turns into a stampede of identical queries. A page is thus at most one
    check interval plus one recomputation old. :meth:`bump` (a write through this app) drops
    everything at once instead.
    """

    def __init__(self, sessions: sessionmaker[Session], *, check_every: float = 1.0, max_entries: int = 512,
                 rebuilders: int = 2) -> None:
        self.sessions = sessions
        self.rebuilders = rebuilders
        self._pool: ThreadPoolExecutor | None = None  # background recomputations of stale pages
        self.check_every = check_every
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._check_lock = threading.Lock()
        self._fingerprint: dict[str, str] | None = None
        self._checked = -1e18
        self._revalidating = False
        self._entries: OrderedDict[Any, tuple[str, int, Any]] = OrderedDict()  # key -> (scope, generation, value)
        self._inflight: dict[Any, threading.Event] = {}
        # per scope, bumped whenever that part of the database changed: older entries are stale
        self._generation = dict.fromkeys(SCOPES, 0)
        self._drops = 0  # bumped by bump(): values computed before it are not stored
        self.hits = self.misses = 0

    def bump(self) -> None:
        """Forget everything now (after a write through this app)."""
        with self._lock:
            self._entries.clear()
            self._generation = {k: v + 1 for k, v in self._generation.items()}
            self._drops += 1
            self._checked = -1e18

    def _fresh(self) -> None:
        if time.monotonic() - self._checked < self.check_every:
            return
        if not self._check_lock.acquire(blocking=self._fingerprint is None):
            return  # another thread is checking right now
        try:
            with self.sessions() as s:
                fp = db_fingerprint(s)
            with self._lock:
                self._checked = time.monotonic()
                for scope in SCOPES:
                    if self._fingerprint is None or fp[scope] != self._fingerprint[scope]:
                        self._generation[scope] += 1
                self._fingerprint = fp
        finally:
            self._revalidating = False
            self._check_lock.release()

    def peek(self, key: Any) -> Any | None:
        """The cached value without touching the database, or None: then the caller must take the
        slow path (:meth:`get` in a worker thread), which also re-checks the fingerprint when due."""
        with self._lock:
            if time.monotonic() - self._checked >= self.check_every and not self._revalidating:
                self._revalidating = True  # this caller revalidates; the others are served meanwhile
                return None
            item = self._entries.get(key)
            if item is None or (item[1] != self._generation[item[0]] and key not in self._inflight):
                return None  # missing, or stale with nobody recomputing it: the slow path recomputes
            self._entries.move_to_end(key)
            self.hits += 1
            return item[2]

    def get(self, key: Any, compute: Callable[[], Any], *, allow_stale: bool = True, scope: str = "full",
            background: bool = False) -> Any:
        """Cached value for ``key`` or compute it (blocking: call from a worker thread). While
        another thread recomputes a stale entry, the stale value is returned unless ``allow_stale``
        is False (for data that other cached values are built from). ``scope``: which part of the
        database the value depends on (``summary`` or ``full``, see the module docstring).
        ``background`` (pages): a stale entry is recomputed in a background thread and this caller
        gets the stale value too, instead of computing the new one itself."""
        self._fresh()
        while True:
            with self._lock:
                item = self._entries.get(key)
                if item is not None and item[1] == self._generation[item[0]]:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return item[2]
                waiting = self._inflight.get(key)
                if waiting is None:
                    done = self._inflight[key] = threading.Event()
                    generation, drops = self._generation[scope], self._drops
                    stale = item[2] if item is not None and allow_stale else None
                    break
                if item is not None and allow_stale:
                    self.hits += 1
                    return item[2]
            if not waiting.wait(timeout=60):  # the computing thread is stuck: compute it ourselves
                return compute()
        self.misses += 1
        if background and stale is not None and self.rebuilders > 0:
            # the previous version answers this request; the new one is built off the request path
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.rebuilders, thread_name_prefix="view-cache")
            self._pool.submit(self._rebuild, key, compute, scope, generation, drops, done)
            return stale
        return self._compute(key, compute, scope, generation, drops, done)

    def _rebuild(self, key: Any, compute: Callable[[], Any], scope: str, generation: int, drops: int,
                 done: threading.Event) -> None:
        try:
            self._compute(key, compute, scope, generation, drops, done)
        except Exception:  # the stale copy stays; the next request for the page tries again
            log.exception("rebuilding the cached page %r failed", key)

    def _compute(self, key: Any, compute: Callable[[], Any], scope: str, generation: int, drops: int,
                 done: threading.Event) -> Any:
        try:
            value = compute()
            with self._lock:
                if drops == self._drops and self.max_entries > 0:
                    self._entries[key] = (scope, generation, value)
                    self._entries.move_to_end(key)
                    while len(self._entries) > self.max_entries:
                        self._entries.popitem(last=False)
            return value
        finally:
            with self._lock:
                self._inflight.pop(key, None)
            done.set()
