"""The OpenAI adapter's streaming (``ModelClient.stream``): SSE deltas in order, usage and cost from
the final chunk, a retry on 429 before the first delta, and no restart once text has been sent."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from harness.client import ModelClient
from harness.models.openai import openai_backend
from harness.types import GenerationConfig, Message, Request


async def _serve(handler: Any) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    app.router.add_post("/v1/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/v1"


def _chunk(text: str, chat: bool = True) -> bytes:
    choice = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
    return f"data: {json.dumps({'choices': [choice]})}\n\n".encode()


def _run(handler: Any, mode: str = "chat", **settings: Any) -> tuple[list[str], Any, int]:
    calls = [0]

    async def counted(request: web.Request) -> web.StreamResponse:
        calls[0] += 1
        return await handler(request, calls[0])

    async def main() -> tuple[list[str], Any]:
        runner, url = await _serve(counted)
        model = openai_backend("m", base_url=url, api_key_env="", retry_base=0.01, mode=mode, price_in=1.0,
                               price_out=2.0, **settings)
        client = ModelClient(model)
        try:
            stream = client.stream(Request([Message.text("user", "hi")], GenerationConfig(max_tokens=8)))
            deltas = [d async for d in stream]
            return deltas, stream.output
        finally:
            await client.aclose()
            await runner.cleanup()

    deltas, out = asyncio.run(main())
    return deltas, out, calls[0]


def test_deltas_usage_cost_and_a_retry_before_the_first_delta():
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        body = await request.json()
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
        if n == 1:
            return web.json_response({"error": {"message": "slow down"}}, status=429)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b": keep-alive comment\n\n")
        for word in ("Hel", "lo", " there"):
            await resp.write(_chunk(word))
        usage = {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000}
        await resp.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())
        return resp

    deltas, out, calls = _run(handler)
    assert deltas == ["Hel", "lo", " there"] and calls == 2
    assert out.text == "Hello there" and out.error is None
    assert out.usage.output_tokens == 1_000_000 and out.usage.cost == 3.0  # $1 in + $2 out per 1M
    assert out.details["first_token_s"] <= out.usage.seconds


def test_a_cut_stream_ends_in_an_error_and_is_not_restarted():
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(_chunk("partial"))
        await resp.write(b"data: {not json\n\n")
        return resp

    deltas, out, calls = _run(handler)
    assert deltas == ["partial"] and calls == 1
    assert out.text == "partial" and out.error and "not JSON" in out.error


def test_completions_mode_streams_and_missing_usage_is_said():
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        assert request.path.endswith("/completions") and "prompt" in await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(_chunk("four", chat=False) + b"data: [DONE]\n\n")
        return resp

    deltas, out, _ = _run(handler, mode="completions")
    assert deltas == ["four"] and out.details["usage"] == "not reported by server"
