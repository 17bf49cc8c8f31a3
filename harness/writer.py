"""The runner's write side: finished samples buffered and group-committed.

Rows go in within ``FLUSH_SECONDS`` of finishing (or every ``FLUSH_ROWS``) with ON CONFLICT DO NOTHING
on (run, sample, epoch), one ``executemany`` per table, together with the cache rows and judge
verdicts of the same window; the run's counts are kept up by what each commit inserted, and this
process's sample leases are renewed every ``RENEW_SECONDS``. A failed write is retried once after
sanitising the values (NUL bytes, lone surrogates: the row records what changed), then with back-off; after
``WRITE_ATTEMPTS`` the run fails loudly, counting what could not be stored.

During a run the commits run on a thread of their own (``flush_async``), one at a time: a commit of
a second's rows takes tens of milliseconds, and on the event loop it held back every reply that
arrived meanwhile (at API rates, most of the gap between the runner and a bare client). The
buffers are swapped on the loop, so rows keep arriving while the previous ones are written; the
SQL driver's own work runs without the GIL. In-memory SQLite (one connection per thread) writes
inline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy.orm import Session, sessionmaker

from harness.errors import UserError
from harness.sanitize import clean, clean_row
from harness.store import leases, ops

FLUSH_SECONDS = 0.5  # the longest a finished sample waits for the commit that stores it
# a commit starts once the oldest waiting row is this old, leaving the rest of FLUSH_SECONDS to the
# commit itself and to the interval between checks (TICK_SECONDS at the latest)
FLUSH_DUE = 0.7 * FLUSH_SECONDS
TICK_SECONDS = 0.1 * FLUSH_SECONDS
FLUSH_ROWS = 1000
WRITE_ATTEMPTS = 3
# leases last leases.LEASE_SECONDS (60 s): renewing them (one UPDATE over every lease this process
# holds in the run) at a sixth of that keeps them alive without an O(run) statement per commit
RENEW_SECONDS = leases.LEASE_SECONDS / 6


T = TypeVar("T")


class StoreWriteError(UserError, RuntimeError):
    """Finished samples could not be written after retries; the message counts what was not stored."""


class SampleWriter:
    """Buffers of one run (sample rows, cache rows, judgement rows) and the counts the summary shows."""

    def __init__(self, sessions: sessionmaker[Session], owner: str) -> None:
        self.sessions = sessions
        self.owner = owner  # this process's name on its sample leases (renewed at each commit)
        self.run_id: int | None = None  # set once the run row exists
        self.rows: list[dict[str, Any]] = []
        self.cache_rows: list[dict[str, Any]] = []
        self.judgements: list[dict[str, Any]] = []
        self.last_flush = time.monotonic()
        self.oldest: float | None = None  # when the oldest row waiting for a commit was recorded
        self.last_renew = self.last_flush  # leases are claimed fresh (LEASE_SECONDS ahead)
        self.counted = False  # the run's counts were recounted by this writer (then kept up incrementally)
        self.n_new = self.n_err = self.n_unscored = 0
        self.error_kinds: dict[str, int] = {}
        self.unwritten = 0  # finished samples a failed write lost (the run then fails loudly)
        self._pool: ThreadPoolExecutor | None = None
        self._inflight: Future[None] | None = None
        bind = sessions.kw.get("bind")
        url = getattr(bind, "url", None) or getattr(getattr(bind, "engine", None), "url", None)
        # in-memory SQLite: each thread would get its own (empty) database, or share one connection
        self._inline = url is None or (url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"))

    def record(self, row: dict[str, Any]) -> None:
        if not self.rows:
            self.oldest = time.monotonic()
        self.rows.append(row)
        self.n_new += 1
        if row["error"] is not None:
            self.n_err += 1
            kind = row["error_kind"] or "error"
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1
        elif row["unscored"] is not None:
            self.n_unscored += 1

    def add_cache_rows(self, rows: list[dict[str, Any]]) -> None:
        """The model client's cache sink: always the current buffer (a bound ``cache_rows.extend``
        would keep filling the list a commit already took)."""
        self.cache_rows.extend(rows)

    def due(self, force: bool = False) -> bool:
        now = time.monotonic()
        return force or len(self.rows) >= FLUSH_ROWS or now - self.last_flush >= FLUSH_SECONDS or (
            self.oldest is not None and now - self.oldest >= FLUSH_DUE)

    def _take(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], float] | None:
        """The buffered rows, handed over for a commit (the buffers start afresh), or None if empty."""
        now = time.monotonic()
        self.last_flush, self.oldest = now, None
        if not (self.rows or self.cache_rows or self.judgements) or self.run_id is None:
            return None
        batch = self.rows, self.cache_rows, self.judgements, now
        self.rows, self.cache_rows, self.judgements = [], [], []
        return batch

    def flush(self, force: bool = False) -> None:
        """Commit what is buffered, here and now, if it is due (waits for a commit in flight first;
        if that one failed, the buffer is still written, and the failure raised after)."""
        failed: StoreWriteError | None = None
        try:
            self.wait()
        except StoreWriteError as exc:
            failed = exc
        if self.due(force):
            batch = self._take()
            if batch is not None:
                self._write(*batch)
        if failed is not None:
            raise failed

    async def flush_async(self, force: bool = False) -> None:
        """``flush`` without holding up the event loop: the commit runs on the writer's thread. A
        commit already in flight makes this a no-op (its successor starts at the next check)."""
        if self._inflight is not None or not self.due(force):
            return
        batch = self._take()
        if batch is None:
            return
        if self._inline:
            self._write(*batch)
            return
        self._inflight = self.submit(self._write, *batch)
        assert self._inflight is not None
        try:
            await asyncio.wrap_future(self._inflight)
        finally:
            if self._inflight.done():
                self._inflight = None

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T] | None:
        """Run ``fn(*args)`` on the writer's thread after the commits queued before it; None where
        commits are inline (in-memory SQLite)."""
        if self._inline:
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-writer")
        return self._pool.submit(fn, *args)

    def wait(self) -> None:
        """Block until the commit in flight (if any) is done; its failure, if any, is raised here."""
        inflight, self._inflight = self._inflight, None
        if inflight is not None:
            inflight.result()

    def close(self) -> None:
        self.wait()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _write(self, rows: list[dict[str, Any]], cache_rows: list[dict[str, Any]],
               judgements: list[dict[str, Any]], now: float) -> None:
        run_id = self.run_id
        assert run_id is not None
        last: Exception | None = None
        for attempt in range(WRITE_ATTEMPTS):
            try:
                renew = now - self.last_renew >= RENEW_SECONDS
                with self.sessions.begin() as s:
                    inserted = ops.write_samples(s, rows)
                    ops.cache_put(s, cache_rows)
                    ops.write_judgements(s, judgements)
                    if not self.counted or inserted != len(rows):
                        # the first commit, or rows already there (another process wrote them): count
                        # the whole run once; afterwards each commit adds what it inserted
                        ops.refresh_run_counts(s, run_id)
                    elif rows:
                        ops.add_run_counts(s, run_id, rows)
                    if renew:
                        leases.renew(s, run_id, self.owner)
                self.counted = True
                if renew:
                    self.last_renew = now
                return
            except Exception as exc:  # a bad value (NUL, lone surrogate) or a busy/broken database
                last = exc
                if attempt == 0:
                    # sanitise only now: the common case pays nothing; the row records what changed
                    rows = [clean_row(r) for r in rows]
                    cache_rows = [clean(r)[0] for r in cache_rows]
                    judgements = [clean(r)[0] for r in judgements]
                else:
                    time.sleep(0.2 * attempt)
        self.unwritten += len(rows)
        first = str(last).strip().splitlines()[0] if last is not None and str(last).strip() else type(last).__name__
        raise StoreWriteError(f"could not store {self.unwritten} finished samples after {WRITE_ATTEMPTS} attempts "
                              f"({type(last).__name__}: {first[:200]}); a rerun redoes only what is missing")
