"""A cap on request bodies, enforced before anything parses them (pure ASGI middleware).

Without it an unauthenticated client can post a body of any size to any endpoint that takes one,
and the framework reads and parses all of it (a 64 MiB JSON body costs several times that in
memory). :class:`BodyLimit` asks ``limit_for(scope)`` for the request's cap (``None``: not capped
here, e.g. an authenticated upload with its own limit checked after the token) and answers 413 with
a one-line problem document

* at once, when ``Content-Length`` declares more (nothing is read: a client sending
  ``Expect: 100-continue`` never sends the body at all), or
* as soon as the bytes actually received pass the cap (a chunked body has no length to check): the
  application's own answer to the cut body is replaced by the 413.

:func:`arena_limit` is the arena's cap: a new live battle may carry a prompt image (base64) and a
prompt; every other arena request at most a prompt, a token and a few fields.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException

from .config import config_from_app

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DEFAULT_MAX_BODY_BYTES = 64 * 1024  # pages and the read API take no body to speak of
JSON_BYTES_PER_CHAR = 12  # the most a character costs in a JSON body (an escaped surrogate pair, \uXXXX\uXXXX)
SLACK_BYTES = 8 * 1024  # field names, the token, the kind, the data-URL header


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once the body passes its cap. An HTTPException, so the framework's body
    parsing passes it on rather than making it a 400; the middleware answers for it."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, too_large_message(limit))
        self.limit = limit


def too_large_message(limit: int) -> str:
    return f"request body larger than this endpoint's limit of {limit} bytes"


def problem_413(limit: int) -> tuple[dict[str, Any], bytes]:
    body = json.dumps({"type": "about:blank", "title": "Content Too Large", "status": 413,
                       "detail": too_large_message(limit), "error": too_large_message(limit)}).encode()
    start = {"type": "http.response.start", "status": 413,
             "headers": [(b"content-type", b"application/problem+json"), (b"content-length", str(len(body)).encode()),
                         (b"cache-control", b"no-store"), (b"connection", b"close")]}
    return start, body


def declared_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == b"content-length":
            raw = value.decode("latin-1").strip()
            return int(raw) if raw.isdigit() else None
    return None


class BodyLimit:
    def __init__(self, app: Any, limit_for: Callable[[Scope], int | None]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        if limit is None:
            await self.app(scope, receive, send)
            return
        declared = declared_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(send, limit)
            return
        received = 0
        over = False
        started = False

        async def capped_receive() -> Message:
            nonlocal received, over
            if over:  # the body was refused: whatever asks again gets no more of it
                raise BodyTooLarge(limit)
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body") or b"")
                if received > limit:
                    over = True
                    raise BodyTooLarge(limit)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if over and not started:  # the application's answer to a cut body: ours goes instead
                return
            if message.get("type") == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, capped_receive, guarded_send)
        except Exception:  # the framework may turn the cut body into any error: the answer is ours
            if not over or started:
                raise
        if over and not started:
            await self._refuse(send, limit)

    @staticmethod
    async def _refuse(send: Send, limit: int) -> None:
        start, body = problem_413(limit)
        await send(start)
        await send({"type": "http.response.body", "body": body, "more_body": False})


LIVE_START = "/api/arena/chat"


def arena_limit(scope: Scope) -> int:
    """The arena's cap for this request (from the app's arena settings: image and prompt sizes)."""
    cfg = config_from_app(scope["app"])
    prompt = cfg.max_prompt_chars * JSON_BYTES_PER_CHAR + SLACK_BYTES
    if scope.get("path") == LIVE_START:
        return prompt + (cfg.max_image_bytes + 2) // 3 * 4  # the image as base64
    return prompt
