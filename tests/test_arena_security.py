"""Arena hardening: the per-voter battle limit holds under concurrency (SQLite and PostgreSQL),
X-Forwarded-For is trusted only from configured proxies, `harness serve` does not let uvicorn trust
127.0.0.1 as a proxy, and the voter cookie is Secure over HTTPS."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi.testclient import TestClient
from live_server import serve
from sqlalchemy import func, select
from starlette.requests import Request

from harness.leaderboard.arena import create_arena_app
from harness.leaderboard.arena.config import ArenaConfig
from harness.leaderboard.arena.demo import seed_text
from harness.leaderboard.arena.routes import client_ip, served_over_https
from harness.store.schema_arena import ArenaBattleRow

LIMIT = 40
PARALLEL = 60


@pytest.fixture
def live(db_url) -> Iterator[tuple[object, str]]:
    cfg = ArenaConfig(secret="s", battles_per_minute=LIMIT, ip_multiplier=100, trusted_proxies=[])
    app = create_arena_app(db_url, cfg)
    seed_text(app.state.sessions, n_samples=40)
    with serve(app) as base:
        yield app, base


def test_battle_limit_is_exact_under_concurrency(live):
    app, base = live
    first = httpx.get(f"{base}/api/arena/battle", timeout=60)
    assert first.status_code == 200
    cookies = {"arena_voter": first.cookies["arena_voter"]}

    def one(_: int) -> int:
        with httpx.Client(base_url=base, cookies=cookies, timeout=120) as c:
            return c.get("/api/arena/battle").status_code

    with ThreadPoolExecutor(PARALLEL) as pool:
        codes = list(pool.map(one, range(PARALLEL)))
    assert set(codes) <= {200, 429}
    assert codes.count(200) == LIMIT - 1, codes  # the first request used one of the minute's battles
    with app.state.sessions() as s:
        voters = s.execute(select(ArenaBattleRow.voter_hash, func.count()).group_by(ArenaBattleRow.voter_hash)).all()
    assert [n for _, n in voters] == [LIMIT]


def _request(peer: str, *headers: tuple[str, str], scheme: str = "http") -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": raw, "client": (peer, 5000),
                    "scheme": scheme, "server": ("testserver", 80), "query_string": b""})


def test_forwarded_for_is_trusted_only_from_configured_proxies(monkeypatch):
    monkeypatch.delenv("HARNESS_TRUSTED_PROXIES", raising=False)
    default = ArenaConfig()
    assert default.trusted_proxies == []
    forged = ("X-Forwarded-For", "6.6.6.6")
    assert client_ip(_request("127.0.0.1", forged), default) == "127.0.0.1"  # not even loopback by default
    cfg = ArenaConfig(trusted_proxies=["10.0.0.0/8", "192.0.2.7"])
    assert client_ip(_request("203.0.113.9", forged), cfg) == "203.0.113.9"  # peer is no proxy
    # the client prepends what it likes; each proxy appends the address it saw: take the right-most untrusted
    xff = ("X-Forwarded-For", "6.6.6.6, 198.51.100.4, 10.1.2.3")
    assert client_ip(_request("192.0.2.7", xff), cfg) == "198.51.100.4"
    assert client_ip(_request("10.0.0.1", ("X-Forwarded-For", "garbage, 198.51.100.5")), cfg) == "198.51.100.5"
    assert client_ip(_request("10.0.0.1"), cfg) == "10.0.0.1"
    monkeypatch.setenv("HARNESS_TRUSTED_PROXIES", "10.0.0.0/8, ::1")
    assert ArenaConfig().trusted_proxies == ["10.0.0.0/8", "::1"]


def test_harness_serve_does_not_let_uvicorn_trust_forwarded_headers(monkeypatch, tmp_path):
    import uvicorn
    from typer.testing import CliRunner

    from harness.cli import app

    calls: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: calls.append(kw))
    db = f"sqlite:///{tmp_path / 'h.db'}"
    for var in ("HARNESS_DB_URL", "HARNESS_LEADERBOARD_WRITE_TOKEN_ENV"):  # `serve --workers` sets them: restore
        monkeypatch.setenv(var, "")
    for extra in ([], ["--workers", "2"]):
        result = CliRunner().invoke(app, ["serve", "--db", db, *extra])
        assert result.exit_code == 0, result.output
    assert len(calls) == 2 and all(kw.get("proxy_headers") is False for kw in calls)


def test_voter_cookie_is_secure_over_https(sqlite_url):
    app = create_arena_app(sqlite_url, ArenaConfig(secret="s", trusted_proxies=["192.0.2.7"]))
    seed_text(app.state.sessions, n_samples=5)
    with TestClient(app, base_url="https://testserver") as client:
        cookie = client.get("/api/arena/battle").headers["set-cookie"]
        assert "arena_voter=" in cookie and "secure" in cookie.lower()
    with TestClient(app, base_url="http://testserver") as client:
        assert "secure" not in client.get("/api/arena/battle").headers["set-cookie"].lower()
    cfg = app.state.arena_config
    assert served_over_https(_request("192.0.2.7", ("X-Forwarded-Proto", "https")), cfg)
    assert not served_over_https(_request("203.0.113.9", ("X-Forwarded-Proto", "https")), cfg)


def test_arena_api_errors_are_json_problems(sqlite_url):
    app = create_arena_app(sqlite_url, ArenaConfig(secret="s"))
    with TestClient(app) as client:
        for r in (client.get("/api/arena/battle"), client.post("/api/arena/vote", json={"token": "x.1.y"})):
            assert r.headers["content-type"].startswith("application/problem+json")
            problem = r.json()
            assert problem["status"] == r.status_code in (403, 404) and problem["detail"] and problem["title"]
