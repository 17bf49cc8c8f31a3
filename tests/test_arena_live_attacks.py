"""Attacks on the live arena, each reproduced against the real app on uvicorn and real
OpenAI-compatible streaming servers on 127.0.0.1 (tests/arena_stream_server.py), and shown to fail:

* a live battle's token on the stored-battle vote endpoints while the models answer (it revealed the
  names), and a live vote before both replies finished;
* a reply naming its own model through the pool entry's spec when the entry has its own ``--name``;
* a server that ignores max_tokens and streams megabytes a second (stored in full);
* a lone surrogate or NUL byte in a delta (it aborted the whole SSE response);
* a voter who disconnects mid-turn (the conversation stayed busy for ever), and a claim whose
  process died (taken over after its deadline);
* moderation words hidden by invisible characters and look-alike letters, end to end;
* huge unauthenticated bodies (parsed in full), declared or chunked;
* a refused battle's prompt image (written anyway) and live media kept for ever.
"""

from __future__ import annotations

import base64
import itertools
import json
import select as select_module
import socket
import time
import tracemalloc
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from arena_stream_server import StreamingServer
from fastapi.testclient import TestClient
from live_server import serve
from sqlalchemy import func, select, update

from harness.leaderboard.arena import create_arena_app, live, pool
from harness.leaderboard.arena.battles import naive_utc
from harness.leaderboard.arena.config import ArenaConfig
from harness.leaderboard.arena.demo import png_bytes, seed_text
from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow
from harness.store.schema_arena_live import ArenaChatRow

NAMES = ("foxtrot-large", "owlbear-mini")


def events_of(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data:"):
            yield json.loads(line[5:])


def _app(sqlite_url: str, tmp_path: Path, **cfg: Any) -> Any:
    settings: dict[str, Any] = {"secret": "attack", "live_media_dir": str(tmp_path / "live"), "live_timeout_s": 30.0}
    settings.update(cfg)
    return create_arena_app(sqlite_url, ArenaConfig(**settings))


def _pool(app: Any, servers: dict[str, StreamingServer], specs: dict[str, str] | None = None) -> None:
    with app.state.sessions() as s:
        for label, srv in servers.items():
            pool.add(s, (specs or {}).get(label, f"openai:{label}"), srv.settings(), label=label)


def _chat(app: Any) -> ArenaChatRow:
    with app.state.sessions() as s:
        chat = s.scalar(select(ArenaChatRow))
        assert chat is not None
        s.expunge(chat)
        return chat


def _wait_for(predicate: Any, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def slow_pair() -> Iterator[dict[str, StreamingServer]]:
    """Two models answering 30 words each, 50 ms apart (1.5 s a reply)."""
    servers = {n: StreamingServer([f"{n[:3]}{i} " for i in range(30)], delay=0.05) for n in NAMES}
    yield servers
    for srv in servers.values():
        srv.close()


def test_a_live_token_is_refused_by_the_stored_vote_and_a_live_vote_waits_for_both_replies(
        db_url, tmp_path, slow_pair):
    app = _app(db_url, tmp_path)
    _pool(app, slow_pair)
    with serve(app) as base, httpx.Client(base_url=base, timeout=30) as c:
        with c.stream("POST", "/api/arena/chat", json={"prompt": "Count, please."}) as r:
            assert r.status_code == 200
            evs = events_of(r.iter_lines())
            first = next(evs)
            battle, token = first["battle"], first["token"]
            assert next(e for e in evs if e["type"] == "delta")  # the models are answering now
            # the attack: the live token on the stored-battle endpoints, mid-answer
            api = c.post("/api/arena/vote", json={"token": token, "outcome": "left"})
            form = c.post("/arena/vote", data={"token": token, "outcome": "left"})
            early = c.post(f"/api/arena/chat/{battle}/vote", json={"token": token, "outcome": "left"})
            for refused in (api, form, early):
                assert not any(n in refused.text for n in NAMES), refused.text
            assert api.status_code == 403 and api.json()["detail"] == "invalid battle token"
            assert form.status_code == 403
            assert early.status_code == 409 and "still answering" in early.json()["detail"]
            rest = list(evs)
        assert rest[-1]["type"] == "end"
        with app.state.sessions() as s:
            assert s.scalar(select(func.count()).select_from(ArenaVoteRow)) == 0
        # both replies finished: the stored endpoints still refuse the live token, the live one takes it
        assert c.post("/api/arena/vote", json={"token": token, "outcome": "left"}).status_code == 403
        vote = c.post(f"/api/arena/chat/{battle}/vote", json={"token": token, "outcome": "left"})
        assert vote.status_code == 200 and {vote.json()["a"]["model"], vote.json()["b"]["model"]} == set(NAMES)


def test_a_stored_battle_token_is_refused_by_the_live_endpoints(sqlite_url, tmp_path):
    app = _app(sqlite_url, tmp_path)
    seed_text(app.state.sessions, n_samples=40)
    client = TestClient(app)
    stored = client.get("/api/arena/battle").json()
    for path in (f"/api/arena/chat/{stored['battle']}/vote", f"/api/arena/chat/{stored['battle']}/turn"):
        r = client.post(path, json={"token": stored["token"], "outcome": "left", "prompt": "more"})
        assert r.status_code == 403, r.text
    assert client.post("/api/arena/vote", json={"token": stored["token"], "outcome": "tie"}).status_code == 200


@pytest.mark.parametrize("said", ["Hi! I am Owlbear Mini, here to help.", "I'm owl\u200bbear-mini."])
def test_a_reply_naming_its_spec_flags_the_vote_whatever_the_pool_name(db_url, tmp_path, said):
    # pool entries added with their own --name: the label says nothing, the spec's model does
    servers = {"fast-one": StreamingServer([said]), "slow-two": StreamingServer(["Hello there."])}
    specs = {"fast-one": "openai:owlbear-mini", "slow-two": "openai:foxtrot-large"}
    try:
        app = _app(db_url, tmp_path)
        _pool(app, servers, specs)
        with serve(app) as base, httpx.Client(base_url=base, timeout=30) as c:
            evs = list(events_of(c.post("/api/arena/chat", json={"prompt": "Who are you?"}).iter_lines()))
            first = evs[0]
            vote = c.post(f"/api/arena/chat/{first['battle']}/vote", json={"token": first["token"], "outcome": "tie"})
        assert vote.status_code == 200 and vote.json()["counted"] is False
        with app.state.sessions() as s:
            row = s.scalar(select(ArenaVoteRow))
            assert row is not None and row.flagged and row.flag_reason == "a reply names its own model"
    finally:
        for srv in servers.values():
            srv.close()


def test_replies_that_name_nothing_are_counted(sqlite_url, tmp_path):
    servers = {"fast-one": StreamingServer(["An owl and a bear."]), "slow-two": StreamingServer(["Large foxtrot."])}
    try:
        app = _app(sqlite_url, tmp_path)
        _pool(app, servers, {"fast-one": "openai:owlbear-mini", "slow-two": "openai:foxtrot-large"})
        client = TestClient(app)
        first = next(events_of(client.post("/api/arena/chat", json={"prompt": "Hi"}).text.splitlines()))
        vote = client.post(f"/api/arena/chat/{first['battle']}/vote", json={"token": first["token"], "outcome": "tie"})
        assert vote.status_code == 200 and vote.json()["counted"] is True
    finally:
        for srv in servers.values():
            srv.close()


def test_a_server_ignoring_max_tokens_is_cut_at_the_reply_cap(sqlite_url, tmp_path):
    flood = StreamingServer(lambda body: itertools.repeat("x" * 65536))  # endless: MB a second, never done
    calm = StreamingServer(["A short reply."])
    try:
        app = _app(sqlite_url, tmp_path)
        _pool(app, {"flood": flood, "calm": calm})
        cap = live.reply_cap(app.state.arena_config)
        started = time.monotonic()
        with serve(app) as base, httpx.Client(base_url=base, timeout=60) as c:
            r = c.post("/api/arena/chat", json={"prompt": "Say something."})
        took = time.monotonic() - started
        evs = list(events_of(r.text.splitlines()))
        assert evs[-1]["type"] == "end" and took < 20, took
        assert len(r.content) < 8 * cap  # what the voter was sent: about the two replies, nothing more
        chat = _chat(app)
        replies = [chat.turns[0][side] for side in "ab"]
        flooded = next(x for x in replies if x["text"].startswith("x"))
        assert len(flooded["text"]) == cap and flooded["truncated"] is True and not flooded["failed"]
        assert next(x for x in replies if x is not flooded)["truncated"] is False
        # the backend's connection was closed at the cap, not read to the end (there is no end)
        assert _wait_for(lambda: flood.cut == 1) and flood.sent < 1000
    finally:
        flood.close()
        calm.close()


def test_lone_surrogates_and_nul_in_deltas_are_replaced_not_fatal(sqlite_url, tmp_path):
    odd = StreamingServer(["fine ", "\ud800", " and ", "\ud83d", "\ude00", " nul\x00 end"])
    calm = StreamingServer(["A short reply."])
    try:
        app = _app(sqlite_url, tmp_path)
        _pool(app, {"odd": odd, "calm": calm})
        with serve(app) as base, httpx.Client(base_url=base, timeout=30) as c:
            r = c.post("/api/arena/chat", json={"prompt": "Odd characters?"})
            assert r.status_code == 200
            evs = list(events_of(r.text.splitlines()))  # the whole response: it was not aborted
            assert evs[-1]["type"] == "end"
            side = next(e["side"] for e in evs if e["type"] == "delta" and e["text"].startswith("fine"))
            shown = "".join(e["text"] for e in evs if e["type"] == "delta" and e["side"] == side)
            # the surrogate pair split over two deltas is joined into its character
            assert shown == "fine \ufffd and \U0001f600 nul\ufffd end"
            stored = _chat(app).turns[0][side]
            assert stored["text"] == shown and stored["sanitized"] == 2 and not stored["failed"]
            first = evs[0]
            ok = c.post(f"/api/arena/chat/{first['battle']}/vote", json={"token": first["token"], "outcome": "tie"})
            assert ok.status_code == 200
    finally:
        odd.close()
        calm.close()


def test_a_voter_leaving_mid_turn_does_not_leave_the_battle_busy(sqlite_url, tmp_path, slow_pair):
    app = _app(sqlite_url, tmp_path)
    _pool(app, slow_pair)
    with serve(app) as base, httpx.Client(base_url=base, timeout=30) as c:
        with c.stream("POST", "/api/arena/chat", json={"prompt": "Count, please."}) as r:
            evs = events_of(r.iter_lines())
            first = next(evs)
            next(e for e in evs if e["type"] == "delta")
        # the voter closed the connection here, with both models mid-reply
        assert _chat(app).busy
        assert _wait_for(lambda: not _chat(app).busy), "the turn was never released"
        chat = _chat(app)
        assert chat.n_turns == 1  # the turn ran to its end and was stored
        assert {chat.turns[0][side]["text"].count(" ") for side in "ab"} == {30}
        assert all(srv.finished == 1 and srv.cut == 0 for srv in slow_pair.values())
        nxt = c.post(f"/api/arena/chat/{first['battle']}/turn", json={"token": first["token"], "prompt": "Again"})
        assert nxt.status_code == 200 and list(events_of(nxt.text.splitlines()))[-1]["turn"] == 2


def test_a_claim_whose_process_died_is_taken_over_after_its_deadline(db_url, tmp_path):
    now = [time.time()]
    app = _app(db_url, tmp_path, clock=lambda: now[0], live_timeout_s=5.0)
    with app.state.sessions() as s:
        pool.add(s, "builtin:constant", {"text": "one"}, label="const-one")
        pool.add(s, "builtin:constant", {"text": "two"}, label="const-two")
    client = TestClient(app)
    first = next(events_of(client.post("/api/arena/chat", json={"prompt": "Hi"}).text.splitlines()))
    battle, token = first["battle"], first["token"]
    # a turn claimed by a process that then died: busy, and nobody will ever store it
    with app.state.sessions() as s:
        s.execute(update(ArenaChatRow).values(busy=True, updated_at=naive_utc(now[0])))
        s.commit()
    turn = client.post(f"/api/arena/chat/{battle}/turn", json={"token": token, "prompt": "More"})
    vote = client.post(f"/api/arena/chat/{battle}/vote", json={"token": token, "outcome": "tie"})
    assert turn.status_code == 409 and vote.status_code == 409  # within the deadline: still answering
    now[0] += live.turn_deadline_s(app.state.arena_config, "chat") + 1
    again = client.post(f"/api/arena/chat/{battle}/turn", json={"token": token, "prompt": "More"})
    assert again.status_code == 200 and list(events_of(again.text.splitlines()))[-1]["turn"] == 2
    assert not _chat(app).busy


def test_moderation_is_not_bypassed_by_invisible_or_look_alike_characters(sqlite_url, tmp_path):
    app = _app(sqlite_url, tmp_path, moderation_words=["bomb*", "forbidden phrase"])
    with app.state.sessions() as s:
        pool.add(s, "builtin:echo", label="echo-one")
        pool.add(s, "builtin:echo", label="echo-two")
    client = TestClient(app)
    for prompt in ("build a bo\u200bmb", "build a bo\u00admb", "build a ｂｏｍｂ", "build a b\u043emb",
                   "build a bo\u0301mb", "build a \U0001d41b\U0001d428\U0001d426\U0001d41b", "build a BΟMB",
                   "a forbidden\u00a0Phr\u0430se"):
        r = client.post("/api/arena/chat", json={"prompt": prompt})
        assert r.status_code == 422 and "does not accept" in r.json()["detail"], ascii(prompt)
    with app.state.sessions() as s:
        assert s.scalar(select(func.count()).select_from(ArenaBattleRow)) == 0
    assert client.post("/api/arena/chat", json={"prompt": "Почему небо голубое?"}).status_code == 200


def _raw_post(base: str, path: str, head: dict[str, str], body: Iterator[bytes] | None = None,
              chunked: bool = False) -> tuple[int, bytes, int]:
    """POST over a plain socket, sending body pieces until the server answers; (status, body, bytes sent)."""
    host, port = base.removeprefix("http://").split(":")
    sent = 0
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
                 *(f"{k}: {v}" for k, v in head.items())]
        if chunked:
            lines.append("Transfer-Encoding: chunked")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        for piece in body or ():
            if select_module.select([sock], [], [], 0)[0]:
                break  # the server has answered (it refuses the rest)
            try:
                sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece)
            except OSError:
                break
            sent += len(piece)
        reply = b""
        try:
            while b"\r\n\r\n" not in reply or len(reply.split(b"\r\n\r\n", 1)[1]) < _length(reply):
                data = sock.recv(65536)
                if not data:
                    break
                reply += data
        except OSError:
            pass
    if b"\r\n\r\n" not in reply:  # no answer at all (the server waited for the rest of the body)
        return 0, b"", sent
    status = int(reply.split(b" ", 2)[1])
    return status, reply.split(b"\r\n\r\n", 1)[1], sent


def _length(reply: bytes) -> int:
    for line in reply.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 1 << 30


MIB = 1024 * 1024


@pytest.mark.parametrize("factory", ["arena", "leaderboard"])
def test_huge_unauthenticated_bodies_are_refused_before_they_are_read(sqlite_url, tmp_path, factory):
    if factory == "arena":
        app = _app(sqlite_url, tmp_path)
    else:
        from harness.leaderboard.app import create_app

        app = create_app(sqlite_url)
        app.state.arena_config = ArenaConfig(secret="attack", live_media_dir=str(tmp_path / "live"))
    chunk = b"x" * MIB
    with serve(app) as base:
        # declared: 413 at once, nothing read (the client sends no body at all)
        status, body, _ = _raw_post(base, "/api/arena/chat", {"Content-Length": str(64 * MIB)})
        problem = json.loads(body)
        assert status == 413 and problem["status"] == 413 and "limit" in problem["detail"] and b"\n" not in body
        # chunked, no length to check: counted as it comes, refused once past the cap
        tracemalloc.start()
        try:
            status, body, sent = _raw_post(base, "/api/arena/chat", {}, itertools.repeat(chunk, 64), chunked=True)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert status == 413 and json.loads(body)["status"] == 413
        assert sent < 32 * MIB and peak < 48 * MIB, (sent, peak)  # was: all 64 MiB read, then parsed
        status, body, _ = _raw_post(base, "/api/arena/vote", {"Content-Length": str(MIB)})
        assert status == 413
        status, _, _ = _raw_post(base, "/arena/vote", {"Content-Length": str(MIB)})
        assert status == 413
        if factory == "leaderboard":  # every endpoint: a GET with a body, too
            assert _raw_post(base, "/api/runs", {"Content-Length": str(MIB)})[0] == 401  # push: the token first
            with httpx.Client(base_url=base) as c:
                assert c.request("GET", "/api/tasks", content=chunk).status_code == 413
    # within the caps everything works as before
    client = TestClient(app)
    url = "data:image/png;base64," + base64.b64encode(png_bytes(4, 4, (1, 2, 3))).decode()
    r = client.post("/api/arena/chat", json={"prompt": "x" * 4000, "image": url})
    assert r.status_code == 404 and "pool" in r.json()["detail"]  # past the body cap: the empty pool answers


def _live_files(tmp_path: Path) -> list[str]:
    folder = tmp_path / "live"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_refused_battle_writes_no_image_and_live_media_expire(sqlite_url, tmp_path):
    now = [time.time()]
    app = _app(sqlite_url, tmp_path, clock=lambda: now[0], battles_per_minute=1)
    client = TestClient(app)
    url = "data:image/png;base64," + base64.b64encode(png_bytes(4, 4, (200, 10, 10))).decode()
    with app.state.sessions() as s:
        pool.add(s, "builtin:echo", label="echo-one")
    assert client.post("/api/arena/chat", json={"prompt": "What?", "image": url}).status_code == 404  # no pair
    assert _live_files(tmp_path) == []
    with app.state.sessions() as s:
        pool.add(s, "builtin:constant", {"text": "a red square"}, label="const-two")
    r = client.post("/api/arena/chat", json={"prompt": "What?", "image": url})
    battle = next(events_of(r.text.splitlines()))["battle"]
    assert _live_files(tmp_path) == [f"{battle}-p0.png"]
    limited = client.post("/api/arena/chat", json={"prompt": "And this?", "image": url})
    assert limited.status_code == 429 and _live_files(tmp_path) == [f"{battle}-p0.png"]  # refused: nothing written
    assert client.get(f"/arena/media/{battle}/p0").status_code == 200
    # past the battle's vote deadline and the grace period, the next live battle sweeps its media away
    now[0] += app.state.arena_config.token_ttl_s + live.LIVE_MEDIA_GRACE_S + 120
    client.post("/api/arena/chat", json={"prompt": "Next", "image": url})
    assert f"{battle}-p0.png" not in _live_files(tmp_path)
    assert client.get(f"/arena/media/{battle}/p0").status_code == 404


def test_a_later_turn_deletes_the_renders_it_replaces(sqlite_url, tmp_path):
    app = _app(sqlite_url, tmp_path)

    async def renderer(reply: str, out_dir: Path) -> dict[str, Any]:
        out_dir.mkdir(parents=True)
        path = out_dir / "Image_000.png"
        path.write_bytes(png_bytes(4, 4, (150, 150, 158)))
        return {"status": "OK", "renders": [str(path)]}

    app.state.arena_renderer = renderer
    with app.state.sessions() as s:
        pool.add(s, "builtin:constant", {"text": "import bpy"}, label="chair-one", kinds=("code3d",))
        pool.add(s, "builtin:constant", {"text": "import bpy  # 2"}, label="chair-two", kinds=("code3d",))
    client = TestClient(app)
    first = next(events_of(client.post("/api/arena/chat", json={"prompt": "A chair", "kind": "code3d"})
                           .text.splitlines()))
    before = set(_live_files(tmp_path))
    assert len(before) == 2  # one render folder per side
    client.post(f"/api/arena/chat/{first['battle']}/turn", json={"token": first["token"], "prompt": "Taller"})
    after = set(_live_files(tmp_path))
    assert len(after) == 2 and not before & after  # the first turn's renders are gone with their slots
    with app.state.sessions() as s:
        row = s.scalar(select(ArenaBattleRow))
        assert row is not None and all(Path(p).exists() for p in row.media.values())


def test_turn_deadline_is_longer_than_the_turn_may_run():
    cfg = ArenaConfig()
    for kind in ("chat", "code3d"):
        assert live.turn_deadline_s(cfg, kind) - live.STORE_MARGIN_S > cfg.live_timeout_s
    assert timedelta(seconds=live.turn_deadline_s(cfg, "chat")) < timedelta(seconds=cfg.token_ttl_s)
