"""Arena integrity through the HTTP API (FastAPI TestClient on a real SQLite file): tokens are
single-use, bound and signed; limits hold; nothing served names a model before the vote; identical
or doubly failed outputs are never served; every vote is stored."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from harness.leaderboard.arena import create_arena_app
from harness.leaderboard.arena.config import ArenaConfig
from harness.leaderboard.arena.demo import DEMO_MODELS, seed_renders, seed_text
from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow

MODEL_WORDS = [*DEMO_MODELS, "alpha", "bravo", "charlie", "delta"]


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def arena(sqlite_url, tmp_path):
    clock = Clock()
    cfg = ArenaConfig(secret="test-secret", votes_per_minute=1000, votes_per_day=10000, battles_per_minute=1000,
                      clock=clock, stats_ttl_s=0.0)
    root = tmp_path / "artifacts"
    app = create_arena_app(sqlite_url, cfg, media_roots=[root])
    seed_text(app.state.sessions)
    seed_renders(app.state.sessions, root)
    app.state.clock = clock
    with TestClient(app) as client:
        yield app, client


def battle(client: TestClient, task: str = "arena-demo") -> dict:
    r = client.get("/api/arena/battle", params={"task": task})
    assert r.status_code == 200, r.text
    return r.json()


def vote(client: TestClient, token: str | None, outcome: str = "left"):
    return client.post("/api/arena/vote", json={"token": token, "outcome": outcome})


def n_votes(app) -> int:
    with app.state.sessions() as s:
        return s.scalar(select(func.count()).select_from(ArenaVoteRow))


def test_vote_reveals_and_is_stored(arena):
    app, client = arena
    b = battle(client)
    r = vote(client, b["token"], "right")
    assert r.status_code == 200
    result = r.json()
    assert result["left_model"] in DEMO_MODELS and result["right_model"] in DEMO_MODELS
    assert result["left_model"] != result["right_model"]
    with app.state.sessions() as s:
        row = s.scalar(select(ArenaVoteRow))
        served = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == b["battle"]))
    assert (row.left_model, row.right_model, row.outcome) == (result["left_model"], result["right_model"], "right")
    assert row.voter_hash and row.ip_hash and row.sample_id == served.sample_id and row.served_at == served.created_at
    assert row.features == served.features and row.features["left"]["length"] > 0 and not row.flagged
    assert served.voted_at == row.created_at
    raw = client.get("/api/arena/votes").json()
    assert len(raw) == 1 and raw[0]["outcome"] == "right"


def test_token_reuse_refused(arena):
    app, client = arena
    b = battle(client)
    assert vote(client, b["token"]).status_code == 200
    again = vote(client, b["token"], "tie")
    assert again.status_code == 409 and "already used" in again.json()["error"]
    assert n_votes(app) == 1


def test_missing_and_malformed_token_refused(arena):
    app, client = arena
    battle(client)
    assert vote(client, None).status_code == 400
    assert vote(client, "").status_code == 400
    assert vote(client, "not-a-token").status_code == 403
    assert n_votes(app) == 0


def test_forged_tokens_refused(arena):
    app, client = arena
    b = battle(client)
    public_id, expires, mac = b["token"].split(".")
    flipped = mac[:-1] + ("0" if mac[-1] != "0" else "1")
    forged = [
        f"{public_id}.{expires}.{flipped}",  # bad signature
        f"{public_id}.{int(expires) + 3600}.{mac}",  # extended expiry
        f"{'x' * len(public_id)}.{expires}.{mac}",  # another battle id
    ]
    for token in forged:
        r = vote(client, token)
        assert r.status_code == 403, token
    # a token signed with another secret for this very battle
    from harness.leaderboard.arena import tokens

    with app.state.sessions() as s:
        row = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == public_id))
    fields = tokens.battle_fields(public_id, row.sample_id, row.epoch, row.left_model, row.right_model,
                                  row.voter_hash, int(expires))
    assert vote(client, tokens.sign(b"another-secret", fields)).status_code == 403
    # swapping the positions in the signed fields is a different MAC
    swapped = tokens.battle_fields(public_id, row.sample_id, row.epoch, row.right_model, row.left_model,
                                   row.voter_hash, int(expires))
    assert vote(client, tokens.sign(b"test-secret", swapped)).status_code == 403
    assert n_votes(app) == 0
    assert vote(client, b["token"]).status_code == 200  # the genuine one still works


def test_token_bound_to_its_voter(arena):
    app, client = arena
    b = battle(client)
    with TestClient(app) as other:  # another browser: another voter cookie
        assert vote(other, b["token"]).status_code == 403
    assert vote(client, b["token"]).status_code == 200


def test_expired_token_refused(arena):
    app, client = arena
    b = battle(client)
    app.state.clock.now += app.state.arena_config.token_ttl_s + 1
    r = vote(client, b["token"])
    assert r.status_code == 403 and "expired" in r.json()["error"]
    assert n_votes(app) == 0


def test_over_limit_voter_refused_before_serving(arena):
    app, client = arena
    cfg = app.state.arena_config
    cfg.votes_per_minute = 3
    held = battle(client)  # served while this voter could still vote
    for _ in range(3):
        assert vote(client, battle(client)["token"]).status_code == 200
    refused = client.get("/api/arena/battle", params={"task": "arena-demo"})
    assert refused.status_code == 429 and "can be served in" in refused.json()["detail"]  # with the wait
    assert vote(client, held["token"]).status_code == 429  # the binding check at vote time stays
    assert n_votes(app) == 3
    app.state.clock.now += 61  # a minute later the same (still valid) token goes through
    assert vote(client, held["token"]).status_code == 200
    cfg.votes_per_day = 4
    app.state.clock.now += 61
    daily = client.get("/api/arena/battle", params={"task": "arena-demo"})
    assert daily.status_code == 429 and " h " in daily.json()["detail"]  # daily cap: hours to wait
    assert n_votes(app) == 4


def test_ip_limit_applies_across_cookies(arena):
    app, client = arena
    cfg = app.state.arena_config
    cfg.votes_per_minute, cfg.ip_multiplier = 2, 2  # 4 per minute from one IP
    ok = 0
    for _ in range(2):
        with TestClient(app) as c:  # fresh cookie each time, same IP
            for _ in range(2):
                ok += vote(c, battle(c)["token"]).status_code == 200
    with TestClient(app) as c:  # a third cookie from the same IP is refused before it is served
        assert c.get("/api/arena/battle", params={"task": "arena-demo"}).status_code == 429
    assert ok == 4 and n_votes(app) == 4


def test_battle_serving_is_rate_limited(arena):
    app, client = arena
    app.state.arena_config.battles_per_minute = 2
    assert client.get("/api/arena/battle").status_code == 200
    assert client.get("/api/arena/battle").status_code == 200
    assert client.get("/api/arena/battle").status_code == 429


def test_identical_and_doubly_failed_outputs_never_served(arena):
    app, client = arena
    seen = set()
    for _ in range(60):
        b = battle(client)
        with app.state.sessions() as s:
            row = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == b["battle"]))
        seen.add(row.sample_id)
        assert row.sample_id not in {"s000", "s001", "s002", "s003"}, "identical outputs served"
        assert row.sample_id not in {"s004", "s005"}, "both-failed pair served"
        assert b["left"]["text"] != b["right"]["text"]
    assert len(seen) > 5
    for _ in range(15):  # 3D task: s000 renders identically for every model (only PNG text chunks differ)
        b = battle(client, "arena-demo-3d")
        assert "object 0:" not in b["prompt"]["text"]
        assert len(b["left"]["images"]) == 4 and len(b["right"]["images"]) == 4


def test_no_battle_when_everything_is_identical(sqlite_url):
    app = create_arena_app(sqlite_url, ArenaConfig(secret="s"))
    seed_text(app.state.sessions, n_samples=3, n_identical=2, n_failed=1)
    with TestClient(app) as client:
        r = client.get("/api/arena/battle")
        assert r.status_code == 404 and "no battle" in r.json()["error"]
        page = client.get("/arena")
        assert page.status_code == 404 and "no battle available" in page.text


def test_model_names_absent_before_the_vote(arena):
    app, client = arena
    for task in ("arena-demo", "arena-demo-3d"):
        for _ in range(10):
            page = client.get("/arena", params={"task": task})
            assert page.status_code == 200
            body = page.text.lower()
            assert not [w for w in MODEL_WORDS if w in body]
            token = re.search(r'name="token" value="([^"]+)"', page.text).group(1)
            srcs = re.findall(r'<img src="([^"]+)"', page.text)
            for src in srcs:
                assert not [w for w in MODEL_WORDS if w in src.lower()]
                media = client.get(src)
                assert media.status_code == 200 and media.content.startswith(b"\x89PNG")
                assert not [w for w in MODEL_WORDS if w.encode() in media.content.lower()]
                assert b"tEXt" not in media.content
                assert "last-modified" not in media.headers and "etag" not in media.headers
            j = client.get("/api/arena/battle", params={"task": task})
            assert not [w for w in MODEL_WORDS if w in j.text.lower()]
            assert not [w for w in MODEL_WORDS if w in token.lower()]
            assert not [w for w in MODEL_WORDS if w in str(j.headers).lower()]
    # after the vote the reveal names both
    page = client.get("/arena", params={"task": "arena-demo"})
    token = re.search(r'name="token" value="([^"]+)"', page.text).group(1)
    reveal = client.post("/arena/vote", data={"token": token, "outcome": "tie"})
    assert reveal.status_code == 200 and len(re.findall(r'class="name">demo-', reveal.text)) == 2


def test_outputs_naming_their_model_are_not_served(sqlite_url):
    from harness.store.schema import SampleResultRow

    app = create_arena_app(sqlite_url, ArenaConfig(secret="s", stats_ttl_s=0.0))
    runs = seed_text(app.state.sessions, models=("demo-alpha", "demo-bravo"), n_samples=4, n_identical=0, n_failed=0)
    with app.state.sessions() as s:  # every alpha answer but s003 introduces itself
        for row in s.scalars(select(SampleResultRow).where(SampleResultRow.run_id == runs["demo-alpha"])):
            if row.sample_id != "s003":
                row.output = "As Demo-Alpha, I think " + row.output
        s.commit()
    with TestClient(app) as client:
        for _ in range(10):
            b = battle(client)
            assert "demo-alpha" not in (b["left"]["text"] + b["right"]["text"]).lower()


def test_media_only_for_the_battles_own_slots(arena, tmp_path):
    app, client = arena
    b = battle(client, "arena-demo-3d")
    assert client.get(f"/arena/media/{b['battle']}/l9").status_code == 404
    assert client.get(f"/arena/media/{b['battle']}/..%2F..%2Fetc%2Fpasswd").status_code == 404
    assert client.get("/arena/media/nonexistent/l0").status_code == 404


def test_bad_outcome_refused(arena):
    app, client = arena
    b = battle(client)
    assert vote(client, b["token"], "left-ish").status_code == 400
    assert vote(client, b["token"], "both_bad").status_code == 200


def test_html_form_vote_and_refusal_pages(arena):
    app, client = arena
    page = client.get("/arena")
    token = re.search(r'name="token" value="([^"]+)"', page.text).group(1)
    assert client.post("/arena/vote", data={"token": token, "outcome": "left"}).status_code == 200
    again = client.post("/arena/vote", data={"token": token, "outcome": "left"})
    assert again.status_code == 409 and "already used" in again.text
    assert client.post("/arena/vote", data={"outcome": "left"}).status_code == 400


def test_ratings_api_and_page(arena):
    app, client = arena
    app.state.arena_config.min_votes = 1
    for i in range(40):
        b = battle(client)
        vote(client, b["token"], ["left", "right", "tie", "both_bad"][i % 4])
    data = client.get("/api/arena/ratings", params={"ci": "sandwich"}).json()
    assert data["votes_used"] == 40 and len(data["ratings"]) == 4
    assert all(r["ci_low"] <= r["rating"] <= r["ci_high"] for r in data["ratings"])
    boot = client.get("/api/arena/ratings", params={"bootstrap": 50}).json()
    assert boot["method"] == "bootstrap" and boot["bootstrap_rounds"] == 50
    styled = client.get("/api/arena/ratings", params={"style": True}).json()
    assert styled["style_control"] and set(styled["style_coefficients"]) == {"length", "headers", "lists", "bold"}
    page = client.get("/arena/ratings", params={"task": "arena-demo"})
    assert page.status_code == 200 and page.text.count("<tr><td>") == 4
    assert 'data-arena-figure="fig-win"' in page.text
    assert client.get("/arena/ratings", params={"ci": "nope"}).status_code == 400


def test_implausible_voter_excluded_from_ratings(arena):
    app, client = arena
    app.state.arena_config.min_votes = 1
    honest_left = 0
    for i in range(30):  # one honest-ish voter alternating sides
        b = battle(client)
        honest_left += i % 2 == 0
        vote(client, b["token"], "left" if i % 2 == 0 else "right")
    with TestClient(app) as bot:
        for _ in range(30):
            vote(bot, battle(bot)["token"], "left")
    data = client.get("/api/arena/ratings", params={"ci": "sandwich"}).json()
    assert data["excluded_voters"] == 1 and data["votes_used"] == 30


def test_mesh_view_serves_geometry_only(arena):
    app, client = arena
    b = battle(client, "arena-demo-3d")
    for side in ("left", "right"):
        url = b[side]["mesh"]
        assert url and not [w for w in MODEL_WORDS if w in url]
        r = client.get(url)
        assert r.status_code == 200
        trace = r.json()["data"][0]
        assert trace["type"] == "mesh3d" and len(trace["x"]) == 8 and len(trace["i"]) == 12
        assert not [w for w in MODEL_WORDS if w in r.text.lower()]  # names in the GLB never leave
    assert client.get(f"/arena/mesh/{b['battle']}/x").status_code == 404


def test_glb_and_obj_readers(tmp_path):
    import numpy as np

    from harness.leaderboard.arena.demo import box, glb_bytes
    from harness.leaderboard.arena.mesh import MeshError, read_mesh

    (tmp_path / "m.glb").write_bytes(glb_bytes(*box(2.0), name="x"))
    v, f = read_mesh(tmp_path / "m.glb")
    assert f.shape == (12, 3) and np.allclose(v.min(axis=0), [-1, -0.5, -1]) and np.allclose(v.max(axis=0), [1, 1.5, 1])
    (tmp_path / "m.obj").write_text("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1/1 2/2 3/3 4/4\n")
    v, f = read_mesh(tmp_path / "m.obj")
    assert f.tolist() == [[0, 1, 2], [0, 2, 3]]
    (tmp_path / "bad.glb").write_bytes(b"nope")
    with pytest.raises(MeshError):
        read_mesh(tmp_path / "bad.glb")


def test_render_task_without_renders_counts_as_failed(sqlite_url, tmp_path):
    from harness.store.schema import SampleResultRow

    root = tmp_path / "art"
    app = create_arena_app(sqlite_url, ArenaConfig(secret="s"), media_roots=[root])
    runs = seed_renders(app.state.sessions, root, models=("demo-alpha", "demo-bravo"), n_samples=3)
    with app.state.sessions() as s:  # both models' s001 failed to render, alpha's s002 too
        for row in s.scalars(select(SampleResultRow)):
            if row.sample_id == "s001" or (row.sample_id == "s002" and row.run_id == runs["demo-alpha"]):
                row.details = {"status": "ERR_EXEC", "renders": []}
        s.commit()
    with TestClient(app) as client:
        for _ in range(8):
            b = battle(client, "arena-demo-3d")
            assert "object 1:" not in b["prompt"]["text"]  # both failed: never served
            failed = [side for side in ("left", "right") if b[side]["failed"]]
            assert len(failed) == 1 and not b[failed[0]]["images"] and b[failed[0]]["mesh"] is None
