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


def make_page(body: bytes, media_type: str) -> Page:
    return Page(body, gzip.compress(body, 5), '"' + hashlib.sha1(body).hexdigest()[:20] + '"', media_type)


class ViewCache:
    def __init__(self, sessions: sessionmaker[Session], *, check_every: float = 1.0, max_entries: int = 512) -> None:
        self.sessions = sessions
        self.check_every = check_every
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._fingerprint: str | None = None
        self._checked = 0.0
        self._entries: OrderedDict[Any, Any] = OrderedDict()
        self._generation = 0  # bumped on every clear: a value computed before a clear is not stored
        self.hits = self.misses = 0

    def bump(self) -> None:
        """Forget everything now (after a write through this app)."""
        with self._lock:
            self._entries.clear()
            self._generation += 1
            self._checked = 0.0

    def _fresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < self.check_every:
            return
        with self.sessions() as s:
            fp = db_fingerprint(s)
        with self._lock:
            self._checked = now
            if fp != self._fingerprint:
                self._fingerprint = fp
                self._entries.clear()
                self._generation += 1

    def peek(self, key: Any) -> Any | None:
        """The cached value if the fingerprint was checked recently (no DB access), else None."""
        if time.monotonic() - self._checked >= self.check_every:
            return None
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return value

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Cached value for ``key`` or compute it (blocking: call from a worker thread)."""
        self._fresh()
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key]
            generation = self._generation
        self.misses += 1
        value = compute()
        with self._lock:
            if generation != self._generation:
                return value
            self._entries[key] = value
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value
