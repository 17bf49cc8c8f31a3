"""Streaming replies of the OpenAI-compatible backend (``"stream": true``, server-sent events), for
the live arena: the request with its retries (only before the first delta: text already on a
voter's screen is never silently restarted) and the SSE parser."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from harness.models.openai import (
    RETRY_STATUS,
    OpenAIModel,
    _BadReply,
    _httpx,
    _one_line,
    error_kind,
    retry_after,
    status_error,
)
from harness.store import jsoncol
from harness.types import Output, Usage


async def stream_with_retries(model: OpenAIModel, http: Any, path: str, body: dict[str, Any],
                              started: float) -> AsyncIterator[str | Output]:
    """POST the streaming request, retrying as ``generate`` does but only before the first delta."""
    import aiohttp
    import openai

    url = model.settings.base_url + path
    payload = jsoncol.dumps_utf8(body)
    error: Exception | None = None
    yielded = False
    for attempt in range(model.settings.max_retries + 1):
        wait_hint: float | None = None
        try:
            async with http.post(url, data=payload, proxy=model._proxy) as resp:
                if resp.status == 200:
                    async for item in read_events(model, resp, started):
                        yielded = True
                        yield item
                    return
                raw = await resp.read()
                error = status_error(url, resp.status, dict(resp.headers), raw)
                retryable = resp.status in RETRY_STATUS or resp.status >= 500
                wait_hint = retry_after(resp.headers)
        except TimeoutError:
            error, retryable = openai.APITimeoutError(request=_httpx().Request("POST", url)), not yielded
        except aiohttp.ClientError as exc:
            error = openai.APIConnectionError(message=f"Connection error: {_one_line(exc)}",
                                              request=_httpx().Request("POST", url))
            retryable = not yielded  # part of the text is on the voter's screen: no restart
        if not retryable or attempt == model.settings.max_retries:
            break
        await asyncio.sleep(model._backoff(attempt, wait_hint))
    assert error is not None
    yield Output(error=_one_line(error), usage=Usage(seconds=time.perf_counter() - started),
                 details={"error_kind": error_kind(error)})

async def read_events(model: OpenAIModel, resp: Any, started: float) -> AsyncIterator[str | Output]:
    """Parse the SSE body: ``data: {chunk}`` lines until ``data: [DONE]`` (comments and other
    fields skipped). Chunks are read as plain dicts: compatible servers differ in which of the
    SDK's required chunk fields they send."""
    n_in = n_out = 0
    usage_seen = False
    details: dict[str, Any] = {"streamed": True}
    text_key = "delta" if model.settings.mode == "chat" else None
    async for raw_line in resp.content:
        line = raw_line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        try:
            chunk = jsoncol.loads(data)
        except ValueError:
            raise _BadReply(f"stream event is not JSON: {data[:80]!r}") from None
        if not isinstance(chunk, dict):
            continue
        if chunk.get("error"):
            err = chunk["error"]
            raise _BadReply(f"server error mid-stream: {err.get('message') if isinstance(err, dict) else err}")
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            usage_seen = True
            n_in = int(usage.get("prompt_tokens") or 0)
            n_out = int(usage.get("completion_tokens") or 0)
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason"):
                details["finish_reason"] = choice["finish_reason"]
            piece = (choice.get(text_key) or {}).get("content") if text_key else choice.get("text")
            if piece:
                yield str(piece)
    if not usage_seen:
        details["usage"] = "not reported by server"
    seconds = time.perf_counter() - started
    cost = (n_in * model.price_in + n_out * model.price_out) / 1_000_000
    yield Output(details=details,
                 usage=Usage(input_tokens=n_in, output_tokens=n_out, calls=1, seconds=seconds, cost=cost))
