"""The page cache: invalidated by database changes, one computation per missing page under
concurrency, stale pages served while one request re-checks."""

from __future__ import annotations

import threading
import time

from harness.leaderboard.cache import ViewCache, db_fingerprint
from harness.runner import EvalConfig, Runner
from harness.store.db import open_db


def test_fingerprint_tracks_runner_writes(tmp_path):
    sessions = open_db(f"sqlite:///{tmp_path / 'c.db'}")
    with sessions() as s:
        empty = db_fingerprint(s)
    Runner(EvalConfig(task="gsm8k", model="builtin:echo", limit=3, progress=False), session_factory=sessions).run()
    with sessions() as s:
        one = db_fingerprint(s)
        assert one != empty and db_fingerprint(s) == one  # stable while nothing changes
    cache = ViewCache(sessions, check_every=0.0)
    calls = []
    assert cache.get("k", lambda: calls.append(1) or "v1") == "v1"
    assert cache.get("k", lambda: calls.append(1) or "v2") == "v1" and len(calls) == 1
    Runner(EvalConfig(task="gsm8k", model="builtin:echo", limit=5, progress=False), session_factory=sessions).run()
    assert cache.get("k", lambda: "v3") == "v3"  # the resumed run added samples: recomputed
    cache.bump()
    assert cache.get("k", lambda: "v4") == "v4"


def test_one_computation_per_missing_page_under_concurrency(tmp_path):
    sessions = open_db(f"sqlite:///{tmp_path / 'c.db'}")
    cache = ViewCache(sessions, check_every=60.0)
    calls = []

    def slow() -> str:
        calls.append(1)
        time.sleep(0.2)
        return "page"

    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get("k", slow))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["page"] * 8 and len(calls) == 1


def test_peek_serves_cache_while_one_caller_revalidates(tmp_path):
    sessions = open_db(f"sqlite:///{tmp_path / 'c.db'}")
    cache = ViewCache(sessions, check_every=0.05)
    assert cache.peek("k") is None  # never checked: the caller must take the slow path
    cache.get("k", lambda: "page")
    assert cache.peek("k") == "page"
    time.sleep(0.06)
    assert cache.peek("k") is None  # due: this caller revalidates...
    assert cache.peek("k") == "page"  # ...while everyone else is still served
    cache.get("k", lambda: "other")  # the revalidation (nothing changed in the database)
    assert cache.peek("k") == "page"
    disabled = ViewCache(sessions, max_entries=0)
    assert disabled.get("k", lambda: 1) == 1 and disabled.get("k", lambda: 2) == 2


def test_stale_page_served_while_one_request_recomputes_after_a_write(tmp_path):
    sessions = open_db(f"sqlite:///{tmp_path / 'c.db'}")
    cache = ViewCache(sessions, check_every=2.0)
    assert cache.get("k", lambda: "old") == "old"
    Runner(EvalConfig(task="gsm8k", model="builtin:echo", limit=2, progress=False), session_factory=sessions).run()
    time.sleep(2.05)  # the next request re-checks the database and finds the new run
    started, release = threading.Event(), threading.Event()

    def slow_new() -> str:
        started.set()
        release.wait(10)
        return "new"

    worker = threading.Thread(target=lambda: cache.get("k", slow_new))
    worker.start()
    assert started.wait(10)
    assert cache.get("k", lambda: "unexpected") == "old"  # not blocked by the recomputation
    assert cache.peek("k") == "old"
    strict: list[str] = []  # data other pages are built from waits for the new value instead
    waiter = threading.Thread(target=lambda: strict.append(cache.get("k", lambda: "unexpected", allow_stale=False)))
    waiter.start()
    time.sleep(0.1)
    assert strict == []
    release.set()
    worker.join(10)
    waiter.join(10)
    assert strict == ["new"] and cache.get("k", lambda: "unexpected") == "new"


def test_progress_writes_refresh_full_scope_only(tmp_path):
    from sqlalchemy import update

    from harness.store.schema import RunRow

    sessions = open_db(f"sqlite:///{tmp_path / 'c.db'}")
    Runner(EvalConfig(task="gsm8k", model="builtin:echo", limit=3, progress=False), session_factory=sessions).run()
    cache = ViewCache(sessions, check_every=0.0)
    assert cache.get("overview", lambda: "o1", scope="summary") == "o1"
    assert cache.get("run", lambda: "r1") == "r1"
    with sessions.begin() as s:  # what a run in progress does twice a second
        s.execute(update(RunRow).values(n_done=RunRow.n_done + 1))
    assert cache.get("overview", lambda: "o2", scope="summary") == "o1"
    assert cache.get("run", lambda: "r2") == "r2"
    with sessions.begin() as s:  # a run finishing (status, metrics) changes the summary too
        s.execute(update(RunRow).values(status="failed"))
    assert cache.get("overview", lambda: "o3", scope="summary") == "o3"


def _stale_cache(tmp_path):  # type: ignore[no-untyped-def]
    """A cache holding "old" for "k" whose database then changed (a new run): "k" is stale."""
    sessions = open_db(f"sqlite:///{tmp_path / 'c.db'}")
    cache = ViewCache(sessions, check_every=0.0)
    assert cache.get("k", lambda: "old") == "old"
    Runner(EvalConfig(task="gsm8k", model="builtin:echo", limit=2, progress=False), session_factory=sessions).run()
    return cache


def _until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_stale_page_is_rebuilt_in_the_background_and_the_previous_version_served(tmp_path):
    cache = _stale_cache(tmp_path)
    caller = threading.current_thread()
    release = threading.Event()
    builders: list[threading.Thread] = []

    def rebuild() -> str:
        builders.append(threading.current_thread())
        release.wait(30)
        return "new"

    # the request that finds the page stale is answered at once with the previous version...
    assert cache.get("k", rebuild, background=True) == "old"
    cache.check_every = 1e9  # no more re-checks: peek answers from the cache
    _until(lambda: builders, "the rebuild never started")
    assert builders[0] is not caller  # ...while the rebuild runs in another thread
    assert cache.get("k", lambda: "unexpected", background=True) == "old" and cache.peek("k") == "old"
    release.set()
    _until(lambda: cache.peek("k") == "new", "the rebuilt page was never stored")
    assert cache.get("k", lambda: "unexpected", background=True) == "new" and len(builders) == 1


def test_a_failed_background_rebuild_keeps_the_previous_version(tmp_path):
    cache = _stale_cache(tmp_path)
    failed = threading.Event()

    def broken() -> str:
        failed.set()
        raise RuntimeError("database went away")

    assert cache.get("k", broken, background=True) == "old"
    cache.check_every = 1e9
    assert failed.wait(30)
    _until(lambda: "k" not in cache._inflight, "the failed rebuild was never cleared")
    assert cache.peek("k") is None  # stale, nobody rebuilding: the slow path (get) must be taken
    assert cache.get("k", lambda: "new", background=True) == "old"  # this request starts another rebuild
    _until(lambda: cache.peek("k") == "new", "the second rebuild was never stored")


def test_a_missing_page_strict_data_and_plain_gets_are_computed_by_the_caller(tmp_path):
    cache = _stale_cache(tmp_path)
    caller = threading.current_thread()
    seen: list[threading.Thread] = []

    def compute(value: str):  # type: ignore[no-untyped-def]
        return lambda: seen.append(threading.current_thread()) or value

    assert cache.get("other", compute("first"), background=True) == "first"  # nothing to serve meanwhile
    assert cache.get("k", compute("strict"), allow_stale=False, background=True) == "strict"
    Runner(EvalConfig(task="gsm8k", model="builtin:echo", limit=3, progress=False),
           session_factory=cache.sessions).run()
    assert cache.get("k", compute("plain")) == "plain"  # not a page: the caller recomputes as before
    assert seen == [caller, caller, caller]
