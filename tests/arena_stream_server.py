"""A real OpenAI-compatible streaming server on 127.0.0.1 for live-arena tests (aiohttp in a thread).

``POST /v1/chat/completions`` with ``stream: true`` answers with one SSE chunk per piece of
``pieces(body)`` (a list of strings, or a function of the request body returning any iterable of
strings: it may be endless), ``delay`` seconds apart, then a usage chunk and ``[DONE]``. A piece is
sent as the JSON the server would write, so a piece holding a lone surrogate reaches the client as the
``\\udXXX`` escape a real server can send. Recorded: every request body, how many pieces were
written, and whether the client went away before the end (``cut``).

    with StreamingServer(["one", " two"]) as srv:
        pool.add(s, "openai:m", srv.settings(), label="m")
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

Pieces = list[str] | Callable[[dict[str, Any]], Iterable[str]]


class StreamingServer:
    def __init__(self, pieces: Pieces, delay: float = 0.0) -> None:
        self.pieces = pieces
        self.delay = delay
        self.requests: list[dict[str, Any]] = []
        self.sent = 0  # pieces written, over all requests
        self.cut = 0  # requests whose client disconnected before the end
        self.finished = 0  # requests answered to the end
        self.port = 0
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(20), "the streaming server did not start"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def settings(self) -> dict[str, Any]:
        """``-M`` settings for an ``openai:`` pool entry pointed at this server."""
        return {"base_url": self.base_url, "api_key_env": "", "max_retries": 0}

    def __enter__(self) -> StreamingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        from aiohttp import web

        async def chat(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            self.requests.append(body)
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            pieces = self.pieces(body) if callable(self.pieces) else self.pieces
            n = 0
            try:
                for piece in pieces:
                    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": body.get("model"),
                             "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                    # ensure_ascii: a lone surrogate goes out as its \\ud800 escape, as JSON allows
                    await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    n += 1
                    self.sent += 1
                    await asyncio.sleep(self.delay)
                usage = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n}
                await resp.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
                await resp.write(b"data: [DONE]\n\n")
            except (ConnectionError, asyncio.CancelledError):  # the client closed the connection
                self.cut += 1
                raise
            self.finished += 1
            return resp

        async def main() -> None:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", chat)
            runner = web.AppRunner(app, handler_cancellation=True)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self._stop = asyncio.Event()
            self._ready.set()
            await self._stop.wait()
            await runner.cleanup()

        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(main())
        finally:
            self._loop.close()
