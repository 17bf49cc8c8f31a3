"""Decode the next videos in background threads while the current one is being prompted.

The runner builds requests one sample at a time on its event loop, so a cold video (seeking for
frames, decoding and resampling 40 minutes of audio: seconds to tens of seconds) would stall it.
When a sample of video i is prompted, the next ``window`` videos in sample order are submitted to
a small thread pool (PyAV releases the GIL while decoding); the prompt then waits only for its own
video. Work is bounded by the window, so ``--limit 5`` never decodes the whole dataset. A job
that fails (missing or broken video) is ignored here: the prompt redoes the work and raises the
real error for that sample.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor


class Prefetcher:
    def __init__(self, warm: Callable[[str], object], *, workers: int = 2, window: int = 4) -> None:
        self.order: list[str] = []
        self.position: dict[str, int] = {}
        self.warm = warm
        self.window = window
        self.workers = workers
        self.futures: dict[str, Future[object]] = {}
        self.pool: ThreadPoolExecutor | None = None
        self.lock = threading.Lock()

    def set_order(self, order: list[str]) -> None:
        """The video ids in the order their samples will be prompted (the task's load order)."""
        with self.lock:
            self.order = list(dict.fromkeys(order))
            self.position = {vid: i for i, vid in enumerate(self.order)}

    def _submit(self, vid: str) -> None:
        if vid not in self.futures:
            if self.pool is None:
                self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="longshot-media")
            self.futures[vid] = self.pool.submit(self.warm, vid)

    def wait_for(self, vid: str) -> None:
        """Queue ``vid`` and the videos after it, then wait for ``vid``'s own job."""
        if self.workers < 1:
            return
        with self.lock:
            start = self.position.get(vid)
            self._submit(vid)
            if start is not None:
                for nxt in self.order[start + 1 : start + 1 + self.window]:
                    self._submit(nxt)
            future = self.futures[vid]
        try:
            future.result()
        except Exception:  # noqa: S110 - the caller redoes the work and reports the error per sample
            pass

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
