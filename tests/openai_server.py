"""A scripted OpenAI-compatible HTTP server for tests and benchmarks (127.0.0.1 only).

It speaks enough of the OpenAI API for clients to work unchanged: ``POST /v1/chat/completions``,
``POST /v1/completions`` and ``GET /v1/models``, with ``usage`` and (when asked) ``logprobs``.
What it answers is programmable, and every request it gets is recorded.

Use it from a test through the ``scripted_server`` fixture, which a test module gets by naming this
file as a plugin (tests/ is on sys.path under pytest)::

    from openai_server import Reply, correct_with_probability

    pytest_plugins = ("openai_server",)  # provides the scripted_server fixture

    def test_something(scripted_server):
        srv = scripted_server
        srv.set_reply("#### 42")                 # fixed text for every request ...
        srv.set_reply(lambda body: "yes")        # ... or a function of the request body (a dict)
        srv.fail(429, times=2, retry_after=0.2)  # the next 2 requests get 429 with Retry-After
        srv.fail(500)                            # then one 500
        srv.garble(times=1)                      # a 200 whose body is not JSON
        srv.slow(5.0, times=1)                   # one reply that waits 5 s (client time-outs)
        srv.delay = 0.05                         # every reply waits 50 ms
        ... point a client at srv.base_url ("http://127.0.0.1:PORT/v1") ...
        assert len(srv.requests) == 5
        assert srv.requests[0].body["messages"][0]["role"] == "user"
        assert srv.max_in_flight <= 4

Behaviour rules (``fail``/``garble``/``slow``) are checked in the order they were added; each one
takes ``times`` (``None`` = for ever) and an optional ``match(body) -> bool`` that limits it to
some requests (e.g. one sample's prompt). A request that no rule takes gets the reply.

A reply function returns a ``str`` or a :class:`Reply` (text, token counts, finish reason, explicit
logprobs, or ``raw``: a whole response dict sent as is). ``correct_with_probability(p, right, wrong)``
builds a reply function that is right for a deterministic fraction ``p`` of prompts (keyed on the
prompt text, so a rerun gets the same answers).

Recorded per request (:class:`RecordedRequest`): path, JSON body, headers, arrival time, the status
sent back. Counters: ``in_flight``, ``max_in_flight``, ``n_ok``. ``reset()`` clears rules, records and
the delay (the reply function stays).

Token counts: prompt tokens are the whitespace-separated words of the text parts plus 10 per media
part; completion tokens are the reply's words (``Reply`` may set both explicitly).

Outside pytest: ``python tests/openai_server.py --port 8000 --delay 0.1 [--no-record]`` serves in
the foreground and prints ``READY <port>`` once it listens (the throughput benchmark uses this).

PYTEST_DONT_REWRITE (test modules import this file before pytest registers it as a plugin)
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

__all__ = [
    "RecordedRequest",
    "Reply",
    "ScriptedServer",
    "correct_with_probability",
    "last_user_text",
    "scripted_server",
]


@dataclass
class Reply:
    """What a reply function may return instead of a plain string."""

    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"
    logprobs: list[dict[str, Any]] | None = None  # chat-format "content" entries; default: made up
    raw: dict[str, Any] | None = None  # a complete response body, sent unchanged


@dataclass
class RecordedRequest:
    path: str
    body: dict[str, Any] | None
    headers: dict[str, str]
    received_at: float
    status: int = 0  # filled in when the response is sent


@dataclass
class _Rule:
    kind: str  # "status" | "garble" | "slow"
    times: int | None
    match: Callable[[dict[str, Any]], bool] | None = None
    status: int = 500
    retry_after: float | str | None = None
    body: Any = None
    seconds: float = 0.0

    def takes(self, body: dict[str, Any]) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        return self.match is None or bool(self.match(body))


ReplyFn = Callable[[dict[str, Any]], "str | Reply"]


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message of a chat body (or the prompt of a completions body)."""
    if "prompt" in body:
        prompt = body["prompt"]
        return prompt if isinstance(prompt, str) else " ".join(map(str, prompt))
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return " ".join(p.get("text", "") for p in content or [] if p.get("type") == "text")
    return ""


def correct_with_probability(
    p: float, right: Callable[[dict[str, Any]], str], wrong: Callable[[dict[str, Any]], str], seed: int = 0
) -> ReplyFn:
    """A reply function that answers ``right(body)`` for a fraction ``p`` of prompts, else ``wrong(body)``.

    The choice is a hash of (seed, last user text), so the same prompt always gets the same answer."""

    def reply(body: dict[str, Any]) -> str:
        digest = hashlib.sha256(f"{seed}\0{last_user_text(body)}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        return right(body) if u < p else wrong(body)

    return reply


_TOKEN = re.compile(r"\s*\S+")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text) or ([text] if text else [])


def _prompt_tokens(body: dict[str, Any]) -> int:
    if "prompt" in body:
        return len(last_user_text(body).split())
    n = 0
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            n += len(content.split())
            continue
        for part in content or []:
            n += len(part.get("text", "").split()) if part.get("type") == "text" else 10
    return n


def _chat_logprobs(tokens: list[str], top: int) -> dict[str, Any]:
    # made-up but deterministic values: the i-th token gets -0.01*(1 + i % 5)
    content = []
    for i, tok in enumerate(tokens):
        lp = -0.01 * (1 + i % 5)
        alts = [{"token": tok, "logprob": lp, "bytes": list(tok.encode())}]
        alts += [{"token": f"{tok}#{k}", "logprob": lp - 1.0 - k, "bytes": None} for k in range(1, top)]
        content.append({"token": tok, "logprob": lp, "bytes": list(tok.encode()), "top_logprobs": alts[:top]})
    return {"content": content}


def _completion_logprobs(tokens: list[str], top: int) -> dict[str, Any]:
    offsets, pos = [], 0
    for tok in tokens:
        offsets.append(pos)
        pos += len(tok)
    lps = [-0.01 * (1 + i % 5) for i in range(len(tokens))]
    return {
        "tokens": tokens,
        "token_logprobs": lps,
        "top_logprobs": [{t: lp} for t, lp in zip(tokens, lps, strict=True)] if top else None,
        "text_offset": offsets,
    }


class ScriptedServer:
    """The server; see the module docstring. ``start()`` runs it on a background thread."""

    def __init__(self, reply: str | ReplyFn = "ok", *, delay: float = 0.0, host: str = "127.0.0.1",
                 port: int = 0, record: bool = True, model_name: str = "test") -> None:
        self.host, self.port = host, port
        self.delay = delay
        self.record = record
        self.model_name = model_name
        self.requests: list[RecordedRequest] = []
        self.rules: list[_Rule] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.n_ok = 0
        self._reply: ReplyFn = lambda body: "ok"
        self.set_reply(reply)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._counter = 0

    # ---- programming -------------------------------------------------------------------------
    def set_reply(self, reply: str | ReplyFn) -> None:
        self._reply = (lambda body: reply) if isinstance(reply, str) else reply

    def fail(self, status: int, *, times: int | None = 1, retry_after: float | str | None = None,
             body: Any = None, match: Callable[[dict[str, Any]], bool] | None = None) -> None:
        """Answer ``status`` (with an OpenAI-style error body and an optional Retry-After header)."""
        with self._lock:
            self.rules.append(_Rule("status", times, match, status=status, retry_after=retry_after, body=body))

    def garble(self, *, times: int | None = 1, match: Callable[[dict[str, Any]], bool] | None = None) -> None:
        """Answer 200 with a body that is not valid JSON."""
        with self._lock:
            self.rules.append(_Rule("garble", times, match))

    def slow(self, seconds: float, *, times: int | None = 1,
             match: Callable[[dict[str, Any]], bool] | None = None) -> None:
        """Wait ``seconds`` before replying normally (for client time-outs)."""
        with self._lock:
            self.rules.append(_Rule("slow", times, match, seconds=seconds))

    def reset(self) -> None:
        with self._lock:
            self.rules.clear()
            self.requests.clear()
            self.max_in_flight = self.in_flight
            self.n_ok = 0
        self.delay = 0.0

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def bodies(self, path: str = "/v1/chat/completions") -> list[dict[str, Any]]:
        return [r.body for r in list(self.requests) if r.path == path and r.body is not None]

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if len(self.requests) >= n:
                return True
            time.sleep(0.01)
        return False

    # ---- serving -------------------------------------------------------------------------------
    def _take_rule(self, body: dict[str, Any]) -> _Rule | None:
        with self._lock:
            for rule in self.rules:
                if rule.takes(body):
                    if rule.times is not None:
                        rule.times -= 1
                    return rule
        return None

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model_name, "object": "model",
                                                               "created": 0, "owned_by": "scripted"}]})

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        record = None
        try:
            raw = await request.read()
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            if self.record:
                record = RecordedRequest(request.path, body, dict(request.headers), time.time())
                self.requests.append(record)
            response = await self._respond(request.path, body)
            if record is not None:
                record.status = response.status
            return response
        finally:
            self.in_flight -= 1

    async def _respond(self, path: str, body: dict[str, Any] | None) -> web.StreamResponse:
        if not isinstance(body, dict):
            return _error(400, "request body is not a JSON object", "invalid_request_error")
        rule = self._take_rule(body)
        if rule is not None and rule.kind == "status":
            headers = {"Retry-After": str(rule.retry_after)} if rule.retry_after is not None else {}
            kind = "rate_limit_exceeded" if rule.status == 429 else "server_error"
            payload = rule.body if rule.body is not None else {"error": {"message": f"scripted {rule.status}",
                                                                         "type": kind, "code": kind}}
            return web.json_response(payload, status=rule.status, headers=headers)
        wait = self.delay + (rule.seconds if rule is not None and rule.kind == "slow" else 0.0)
        if wait > 0:
            await asyncio.sleep(wait)
        if rule is not None and rule.kind == "garble":
            return web.Response(text='{"id": "chatcmpl-garbled", "choices": [{"mess', content_type="application/json")
        try:
            reply = self._reply(body)
        except Exception as exc:  # a broken reply function is the test's bug: make it loud
            return _error(500, f"reply function failed: {exc!r}", "server_error")
        if isinstance(reply, str):
            reply = Reply(reply)
        self.n_ok += 1
        if reply.raw is not None:
            return web.json_response(reply.raw)
        return web.json_response(self._body(path, body, reply))

    def _body(self, path: str, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        self._counter += 1
        tokens = _tokens(reply.text)
        n_in = reply.prompt_tokens if reply.prompt_tokens is not None else _prompt_tokens(body)
        n_out = reply.completion_tokens if reply.completion_tokens is not None else len(reply.text.split())
        usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
        model = body.get("model", self.model_name)
        if path.endswith("/completions") and not path.endswith("/chat/completions"):
            want = body.get("logprobs")
            choice: dict[str, Any] = {"index": 0, "text": reply.text, "finish_reason": reply.finish_reason,
                                      "logprobs": _completion_logprobs(tokens, int(want)) if want is not None
                                      else None}
            return {"id": f"cmpl-{self._counter}", "object": "text_completion", "created": int(time.time()),
                    "model": model, "choices": [choice], "usage": usage}
        logprobs = None
        if body.get("logprobs"):
            logprobs = ({"content": reply.logprobs} if reply.logprobs is not None
                        else _chat_logprobs(tokens, int(body.get("top_logprobs") or 0)))
        choice = {"index": 0, "message": {"role": "assistant", "content": reply.text},
                  "finish_reason": reply.finish_reason, "logprobs": logprobs}
        return {"id": f"chatcmpl-{self._counter}", "object": "chat.completion", "created": int(time.time()),
                "model": model, "choices": [choice], "usage": usage}

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)  # base64 video frames are large
        app.router.add_post("/v1/chat/completions", self._generate)
        app.router.add_post("/v1/completions", self._generate)
        app.router.add_get("/v1/models", self._models)
        return app

    async def _start_async(self) -> None:
        # backlog: the benchmark opens hundreds of connections at once
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=4096, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]

    def start(self) -> ScriptedServer:
        """Serve on a background thread; returns once the port is bound."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._start_async())
            except BaseException as exc:  # surface bind errors in start()
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=serve, name="scripted-openai-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": None}}, status=status)


try:
    import pytest

    @pytest.fixture
    def scripted_server() -> Iterator[ScriptedServer]:
        """A started :class:`ScriptedServer` on a free 127.0.0.1 port, replying "ok"."""
        server = ScriptedServer().start()
        try:
            yield server
        finally:
            server.stop()

except ImportError:  # importable without pytest (the benchmark runs it as a script)
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible server (foreground)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before every reply")
    parser.add_argument("--text", default="ok", help="the reply text")
    parser.add_argument("--no-record", action="store_true", help="do not keep requests (long benchmarks)")
    args = parser.parse_args()
    server = ScriptedServer(args.text, delay=args.delay, host=args.host, port=args.port, record=not args.no_record)

    async def run() -> None:
        await server._start_async()
        print(f"READY {server.port}", flush=True)
        await asyncio.Event().wait()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
