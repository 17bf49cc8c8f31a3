"""The arena behind a real uvicorn on 127.0.0.1 with many concurrent clients: no vote is lost, no
token is counted twice, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from live_server import serve
from sqlalchemy import func, select

from harness.leaderboard.arena import create_arena_app
from harness.leaderboard.arena.config import ArenaConfig
from harness.leaderboard.arena.demo import seed_text
from harness.store.schema_arena import ArenaVoteRow

CLIENTS = 12
VOTES_EACH = 10




@pytest.fixture
def live(db_url) -> Iterator[tuple[object, str]]:
    cfg = ArenaConfig(secret="s", votes_per_minute=10_000, votes_per_day=10_000, battles_per_minute=10_000)
    app = create_arena_app(db_url, cfg)
    seed_text(app.state.sessions, n_samples=40)
    with serve(app) as base:
        yield app, base


def test_concurrent_votes_are_all_stored(live):
    app, base = live

    def voter(_: int) -> list[int]:
        codes = []
        with httpx.Client(base_url=base, timeout=60) as c:
            for i in range(VOTES_EACH):
                b = c.get("/api/arena/battle")
                assert b.status_code == 200, b.text
                outcome = ["left", "right", "tie"][i % 3]
                r = c.post("/api/arena/vote", json={"token": b.json()["token"], "outcome": outcome})
                codes.append(r.status_code)
        return codes

    with ThreadPoolExecutor(CLIENTS) as pool:
        codes = [c for batch in pool.map(voter, range(CLIENTS)) for c in batch]
    assert codes.count(200) == CLIENTS * VOTES_EACH, codes
    with app.state.sessions() as s:
        assert s.scalar(select(func.count()).select_from(ArenaVoteRow)) == CLIENTS * VOTES_EACH
    ratings = httpx.get(f"{base}/api/arena/ratings", params={"ci": "sandwich"}, timeout=60).json()
    assert ratings["votes_used"] == CLIENTS * VOTES_EACH


def test_one_token_raced_by_many_requests_counts_once(live):
    app, base = live
    with httpx.Client(base_url=base, timeout=60) as c:
        token = c.get("/api/arena/battle").json()["token"]
        cookies = dict(c.cookies)
    barrier = threading.Barrier(16)

    def submit(_: int) -> int:
        with httpx.Client(base_url=base, timeout=60, cookies=cookies) as c:
            barrier.wait()
            return c.post("/api/arena/vote", json={"token": token, "outcome": "left"}).status_code

    with ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(submit, range(16)))
    assert codes.count(200) == 1 and codes.count(409) == 15, codes
    with app.state.sessions() as s:
        assert s.scalar(select(func.count()).select_from(ArenaVoteRow)) == 1
