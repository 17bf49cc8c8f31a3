"""A live battle in headless Chromium against two local OpenAI-compatible servers that stream.

The full leaderboard app on uvicorn; two tiny aiohttp servers speak the chat completions API with
``stream: true`` (one token every 80 ms). Checked: tokens arrive in the page incrementally, a second
turn carries the first one to each model, the vote (by keyboard) reveals the names, the names
appear nowhere before the vote (page, every byte the server sent, the battle id and token), the
conversation is stored intact, and the rate limit refuses the next battle before anything is served.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from live_server import chromium, serve
from sqlalchemy import func, select

from harness.leaderboard.arena import pool
from harness.leaderboard.arena.config import ArenaConfig
from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow
from harness.store.schema_arena_live import ArenaChatRow

NAMES = ("foxtrot-large", "owlbear-mini")
WORDS = {"foxtrot-large": "alpha beta gamma delta epsilon zeta eta theta iota kappa".split(),
         "owlbear-mini": "one two three four five six seven eight nine ten".split()}


class StreamingServer:
    """POST /v1/chat/completions with stream=true: one SSE chunk per word, 80 ms apart."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.requests: list[dict[str, Any]] = []
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        threading.Thread(target=self._run, daemon=True).start()
        assert self._ready.wait(20)

    def _run(self) -> None:
        from aiohttp import web

        async def chat(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            self.requests.append(body)
            assert body.get("stream") is True
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for i, word in enumerate(self.words):
                chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
                         "choices": [{"index": 0, "delta": {"content": ("" if i == 0 else " ") + word},
                                      "finish_reason": None}]}
                await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
                await asyncio.sleep(0.08)
            usage = {"prompt_tokens": 7, "completion_tokens": len(self.words), "total_tokens": 7 + len(self.words)}
            await resp.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
            return resp

        async def main() -> None:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", chat)
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self._ready.set()
            while True:
                await asyncio.sleep(3600)

        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(main())


class Recorder:
    """ASGI middleware keeping every response byte the browser was sent (the network traffic)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.sent: list[bytes] = []
        self.state = app.state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def record(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                self.sent.append(bytes(message.get("body", b"")))
            elif message["type"] == "http.response.start":
                self.sent.append(b"".join(k + b": " + v + b"\n" for k, v in message.get("headers", [])))
            await send(message)

        await self.app(scope, receive, record)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from harness.leaderboard.app import create_app

    tmp = tmp_path_factory.mktemp("arena-live")
    app = create_app(f"sqlite:///{tmp / 'arena.db'}")
    app.state.arena_config = ArenaConfig(secret="live-test", votes_per_minute=1, live_media_dir=str(tmp / "media"))
    servers = {n: StreamingServer(WORDS[n]) for n in NAMES}
    with app.state.sessions() as s:
        for n in NAMES:
            pool.add(s, f"openai:{n}", {"base_url": f"http://127.0.0.1:{servers[n].port}/v1", "api_key_env": "",
                                        "max_retries": 0}, label=n)
    recorder = Recorder(app)
    with serve(recorder) as base:
        yield base, app, servers, recorder


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _leaks(text: str) -> list[str]:
    low = text.lower()
    return [n for n in NAMES if n in low or n.split("-")[0] in low]


def test_live_battle_streams_votes_reveals_and_limits(live, browser, tmp_path):
    base, app, servers, recorder = live
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/arena/chat")
    from harness.leaderboard.arena.demo import png_bytes

    picture = tmp_path / "picture.png"
    picture.write_bytes(png_bytes(16, 16, (20, 120, 200)))
    page.set_input_files("#image", str(picture))
    page.fill("#prompt", "Count for me, please.")
    page.click("#send")

    # incremental: some words are on the page while the rest are still being generated
    page.wait_for_function("() => document.querySelectorAll('#side-a .reply')[0]?.textContent.length > 0")
    partial = [page.inner_text("#side-a .reply"), page.inner_text("#side-b .reply")]
    full = {" ".join(w) for w in WORDS.values()}
    assert any(p and p not in full for p in partial), partial
    page.wait_for_function("() => !document.querySelector('#vote-left').disabled")
    shown = {page.inner_text("#side-a .reply"), page.inner_text("#side-b .reply")}
    assert shown == full
    # the image went to both models with the first prompt, and the page shows the server's copy
    page.wait_for_function("() => document.querySelector('#prompt-image img')?.naturalWidth === 16")
    for n in NAMES:
        parts = servers[n].requests[0]["messages"][0]["content"]
        assert [p["type"] for p in parts] == ["text", "image_url"]

    # second turn: each model gets its own first reply back in the conversation
    page.fill("#prompt", "And again?")
    page.keyboard.press("Control+Enter")
    page.wait_for_function("() => document.querySelectorAll('#side-b .reply').length === 2 "
                           "&& !document.querySelector('#vote-left').disabled")
    for n in NAMES:
        last = servers[n].requests[-1]["messages"]
        assert [m["role"] for m in last] == ["user", "assistant", "user"]
        assert last[1]["content"] == " ".join(WORDS[n]) and last[2]["content"] == "And again?"

    # before the vote: no name in the page, in anything the server sent, or in the ids
    assert not _leaks(page.content())
    assert not _leaks(b"".join(recorder.sent).decode("utf-8", "replace"))
    battle_events = [json.loads(line[5:]) for chunk in recorder.sent for line in chunk.decode(errors="replace")
                     .splitlines() if line.startswith("data:") and '"battle"' in line]
    assert battle_events and not _leaks(battle_events[0]["battle"] + battle_events[0]["token"])

    page.locator("body").click(position={"x": 5, "y": 5})  # focus off the prompt: digits are votes
    page.keyboard.press("1")
    page.wait_for_selector("#reveal:not([hidden])")
    a, b = page.inner_text("#reveal-a .name"), page.inner_text("#reveal-b .name")
    assert {a, b} == set(NAMES)
    assert "your pick" in page.inner_text("#reveal-a") and "A is better" in page.inner_text("#your-vote")
    # the left side's text is the revealed left model's words
    assert page.locator("#side-a .reply").first.inner_text() == " ".join(WORDS[a])

    with app.state.sessions() as s:
        vote = s.scalar(select(ArenaVoteRow))
        assert vote is not None and vote.outcome == "left" and vote.left_model == a and vote.task == "chat"
        assert vote.categories and vote.categories["language"] == "en"
        chat = s.scalar(select(ArenaChatRow))
        assert chat is not None and chat.n_turns == 2
        assert [t["prompt"] for t in chat.turns] == ["Count for me, please.", "And again?"]
        for t in chat.turns:
            assert t["a"]["text"] == " ".join(WORDS[a]) and t["b"]["text"] == " ".join(WORDS[b])
            assert t["a"]["usage"]["output_tokens"] == 10 and t["a"]["latency_s"] > 0  # recorded
            assert t["a"]["first_token_s"] is not None and t["a"]["first_token_s"] < t["a"]["latency_s"]
        battles_before = s.scalar(select(func.count()).select_from(ArenaBattleRow))

    # the limit (1 vote a minute here) refuses the next battle before it is served, with the wait
    calls_before = sum(len(v.requests) for v in servers.values())
    page.keyboard.press("n")
    page.fill("#prompt", "One more?")
    page.click("#send")
    page.wait_for_selector("#arena-message:not([hidden])")
    message = page.inner_text("#arena-message")
    assert "voting limit" in message and " s." in message
    time.sleep(0.3)
    assert sum(len(v.requests) for v in servers.values()) == calls_before
    with app.state.sessions() as s:
        assert s.scalar(select(func.count()).select_from(ArenaBattleRow)) == battles_before
    assert not errors, errors
