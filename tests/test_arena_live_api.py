"""Live battles through the JSON/SSE API with offline models (no browser): code3d renders through a
renderer that stands in for the Blender pool (one side's code fails and shows as failed), the
moderation hook refuses before the pool is reached, and turns and votes are refused out of order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from harness.leaderboard.arena import create_arena_app, pool
from harness.leaderboard.arena.config import ArenaConfig
from harness.leaderboard.arena.demo import png_bytes
from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow
from harness.store.schema_arena_live import ArenaChatRow
from harness.tasks.code3d.arena import uniform_code

GOOD = "import bpy\nbpy.ops.mesh.primitive_cube_add(size=1)\n"
BAD = "import bpy\nraise RuntimeError('no chair today')\n"


def events(body: str) -> list[dict]:
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


@pytest.fixture()
def arena(sqlite_url, tmp_path):
    app = create_arena_app(sqlite_url, ArenaConfig(secret="api", moderation_words=["forbidden"], max_turns=2,
                                                   live_media_dir=str(tmp_path / "live")))
    seen: list[str] = []

    async def fake_blender(reply: str, out_dir: Path) -> dict:
        seen.append(reply)
        if "raise" in reply:
            return {"status": "ERR_EXEC", "renders": [], "error": "RuntimeError: no chair today"}
        out_dir.mkdir(parents=True)
        path = out_dir / "Image_005.png"
        path.write_bytes(png_bytes(8, 8, (150, 150, 158)))
        return {"status": "OK", "renders": [str(path)]}

    app.state.arena_renderer = fake_blender
    with app.state.sessions() as s:
        pool.add(s, "builtin:constant", {"text": GOOD}, label="chair-good", kinds=("code3d",))
        pool.add(s, "builtin:constant", {"text": BAD}, label="chair-bad", kinds=("code3d",))
    return app, TestClient(app), seen


def test_code3d_live_battle_renders_both_and_shows_the_failure(arena):
    app, client, seen = arena
    r = client.post("/api/arena/chat", json={"prompt": "Write Blender code for a chair", "kind": "code3d"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    evs = events(r.text)
    assert evs[0]["type"] == "battle" and evs[-1] == {"type": "end", "turn": 1, "can_continue": True}
    deltas = [e for e in evs if e["type"] == "delta"]
    assert len(deltas) == 2  # a backend that cannot stream sends its whole reply once
    renders = {e["side"]: e for e in evs if e["type"] == "render"}
    assert {e["failed"] for e in renders.values()} == {True, False}
    ok = next(e for e in renders.values() if not e["failed"])
    bad = next(e for e in renders.values() if e["failed"])
    assert bad["status"] == "ERR_EXEC" and bad["images"] == [] and "RuntimeError: no chair" not in r.text
    image = client.get(ok["images"][0])
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
    assert sorted(seen) == sorted([GOOD, BAD])
    assert "chair-" not in r.text  # no label before the vote
    # vote; the reveal names both
    vote = client.post(f"/api/arena/chat/{evs[0]['battle']}/vote", json={"token": evs[0]["token"], "outcome": "tie"})
    assert vote.status_code == 200 and {vote.json()["a"]["model"], vote.json()["b"]["model"]} == {"chair-good",
                                                                                                  "chair-bad"}
    with app.state.sessions() as s:
        v = s.scalar(select(ArenaVoteRow))
        assert v is not None and v.task == "code3d-live" and v.categories["kind"] == "3d"


def test_moderation_refuses_before_the_pool_and_order_is_enforced(arena):
    app, client, seen = arena
    r = client.post("/api/arena/chat", json={"prompt": "Something FORBIDDEN please", "kind": "code3d"})
    assert r.status_code == 422 and "does not accept" in r.json()["detail"]
    with app.state.sessions() as s:
        assert s.scalar(select(func.count()).select_from(ArenaBattleRow)) == 0
    assert seen == []
    assert client.post("/api/arena/chat", json={"prompt": "hi"}).status_code == 404  # no chat pool: explains
    assert "pool add" in client.post("/api/arena/chat", json={"prompt": "hi"}).json()["detail"]
    first = events(client.post("/api/arena/chat", json={"prompt": "a chair", "kind": "code3d"}).text)[0]
    battle, token = first["battle"], first["token"]
    assert client.post(f"/api/arena/chat/{battle}/turn", json={"token": "x.1.y", "prompt": "more"}).status_code == 403
    second = client.post(f"/api/arena/chat/{battle}/turn", json={"token": token, "prompt": "taller"})
    assert events(second.text)[-1] == {"type": "end", "turn": 2, "can_continue": False}
    third = client.post(f"/api/arena/chat/{battle}/turn", json={"token": token, "prompt": "again"})
    assert third.status_code == 409 and "at most 2 turns" in third.json()["detail"]
    assert client.post(f"/api/arena/chat/{battle}/vote", json={"token": token, "outcome": "left"}).status_code == 200
    again = client.post(f"/api/arena/chat/{battle}/vote", json={"token": token, "outcome": "left"})
    assert again.status_code == 409
    with app.state.sessions() as s:
        chat = s.scalar(select(ArenaChatRow))
        assert chat is not None and [t["prompt"] for t in chat.turns] == ["a chair", "taller"]


def test_uniform_look_strips_materials_after_the_model_code():
    code = uniform_code(GOOD)
    assert code.startswith(GOOD)  # the model's line numbers in a traceback stay as they were
    assert "materials.clear()" in code and "LIGHT" in code
    compile(code, "<arena>", "exec")


def test_prompt_image_goes_to_the_models_and_is_served_opaquely(sqlite_url, tmp_path):
    import base64

    app = create_arena_app(sqlite_url, ArenaConfig(secret="img", live_media_dir=str(tmp_path / "live")))
    with app.state.sessions() as s:
        pool.add(s, "builtin:echo", label="echo-one")
        pool.add(s, "builtin:constant", {"text": "a red square"}, label="const-two")
    client = TestClient(app)
    png = png_bytes(4, 4, (200, 10, 10), text="secret camera model")
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    r = client.post("/api/arena/chat", json={"prompt": "What is in the image?", "image": url})
    assert r.status_code == 200
    battle = events(r.text)[0]["battle"]
    with app.state.sessions() as s:
        row = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == battle))
        assert row is not None and set(row.media) == {"p0"}
        chat = s.scalar(select(ArenaChatRow).where(ArenaChatRow.battle_id == row.id))
        assert chat is not None and chat.turns[0]["image"] is True
    served = client.get(f"/arena/media/{battle}/p0")
    assert served.status_code == 200 and b"secret camera" not in served.content  # metadata stripped
    bad = client.post("/api/arena/chat", json={"prompt": "x", "image": "data:text/plain;base64,aGVsbG8="})
    assert bad.status_code == 415 and "PNG or a JPEG" in bad.json()["detail"]


def test_history_keeps_each_sides_own_replies_and_the_image_on_the_first_turn():
    from harness.leaderboard.arena.live import history

    turns = [{"prompt": "q1", "a": {"text": "A1"}, "b": {"text": "B1"}}]
    msgs = history(turns, "b", "q2", "/img.png")
    assert [(m.role, m.text_content) for m in msgs] == [("user", "q1"), ("assistant", "B1"), ("user", "q2")]
    assert [p.type for p in msgs[0].content] == ["text", "image"] and [p.type for p in msgs[2].content] == ["text"]
