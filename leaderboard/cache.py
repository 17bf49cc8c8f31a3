"""In-process cache of rendered pages and query results, invalidated when the database changes.

The runner writes straight to SQL, so the app cannot be told about changes; instead it computes a
cheap fingerprint of the tables the cached views read (row counts, max ids, sums of progress
counters and metric values, latest finish time) at most every ``check_every`` seconds. Any write
that changes what a view shows changes the fingerprint; a push through this app bumps it at once.
Pages can therefore be up to ``check_every`` seconds stale, never more.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from harness.store.schema import MetricRow, ModelRow, RunRow, TaskRow


def db_fingerprint(s: Session) -> str:
    runs = s.execute(select(func.count(RunRow.id), func.max(RunRow.id), func.sum(RunRow.n_done),
                            func.sum(RunRow.n_errors), func.max(RunRow.finished_at), func.max(RunRow.started_at),
                            func.sum(RunRow.total_cost))).one()
    metrics = s.execute(select(func.count(MetricRow.id), func.max(MetricRow.id), func.sum(MetricRow.value))).one()
    others = s.execute(select(select(func.count(ModelRow.id)).scalar_subquery(),
                              select(func.count(TaskRow.id)).scalar_subquery())).one()
    # repr: NaN sums must compare equal to themselves
    return repr((tuple(runs), tuple(metrics), tuple(others)))


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
    """Rendered pages keyed by request, cleared when :func:`db_fingerprint` changes.

    Under load only one request at a time re-checks the fingerprint (the others keep serving the
    cached page meanwhile, stale by at most one check), and only one computes a missing page (the
    others wait for it), so a cache refresh never turns into a stampede of identical queries.
    """

    def __init__(self, sessions: sessionmaker[Session], *, check_every: float = 1.0, max_entries: int = 512) -> None:
        self.sessions = sessions
        self.check_every = check_every
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._check_lock = threading.Lock()
        self._fingerprint: str | None = None
        self._checked = -1e18
        self._revalidating = False
        self._entries: OrderedDict[Any, Any] = OrderedDict()
        self._inflight: dict[Any, threading.Event] = {}
        self._generation = 0  # bumped on every clear: a value computed before a clear is not stored
        self.hits = self.misses = 0

    def bump(self) -> None:
        """Forget everything now (after a write through this app)."""
        with self._lock:
            self._entries.clear()
            self._generation += 1
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
                if fp != self._fingerprint:
                    self._fingerprint = fp
                    self._entries.clear()
                    self._generation += 1
        finally:
            self._revalidating = False
            self._check_lock.release()

    def peek(self, key: Any) -> Any | None:
        """The cached value without touching the database, or None: then the caller must take the
        slow path (:meth:`get` in a worker thread), which also re-checks the fingerprint when due."""
        with self._lock:
            if time.monotonic() - self._checked >= self.check_every and not self._revalidating:
                self._revalidating = True  # this caller revalidates; the others serve the cache meanwhile
                return None
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return value

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Cached value for ``key`` or compute it (blocking: call from a worker thread)."""
        self._fresh()
        while True:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return self._entries[key]
                waiting = self._inflight.get(key)
                if waiting is None:
                    done = self._inflight[key] = threading.Event()
                    generation = self._generation
                    break
            if not waiting.wait(timeout=60):  # the computing thread is stuck: compute it ourselves
                return compute()
            with self._lock:  # it finished; use its value unless it failed or was not stored
                if key in self._entries:
                    self.hits += 1
                    return self._entries[key]
            return compute()
        self.misses += 1
        try:
            value = compute()
            with self._lock:
                if generation == self._generation and self.max_entries > 0:
                    self._entries[key] = value
                    while len(self._entries) > self.max_entries:
                        self._entries.popitem(last=False)
            return value
        finally:
            with self._lock:
                self._inflight.pop(key, None)
            done.set()
