"""Streamed replies: an async iterator of text deltas that also keeps the whole reply.

A backend that can stream has ``stream(request)``: an async iterator yielding ``str`` deltas as the
server sends them and, last, at most one :class:`~harness.types.Output` carrying usage, cost and
details (its text may be empty: the deltas are the text). A failure is such a final Output with
``error`` set. :class:`TextStream` is what :meth:`harness.client.ModelClient.stream` returns:
iterate it for the deltas; once it is exhausted ``.output`` holds the reply as ``generate`` would
have returned it (text joined; ``usage.seconds`` from the call to the last delta and
``details["first_token_s"]`` to the first, on the same clock).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from harness.types import Output, Request, Usage

StreamItem = str | Output


async def whole_reply(model: Any, request: Request) -> AsyncIterator[StreamItem]:
    """A backend that cannot stream: its whole reply as one delta (then the Output itself)."""
    (out,) = await model.generate([request])
    if out.error is None and out.text:
        yield out.text
    yield out


class TextStream:
    """Text deltas from ``source``; ``output`` once the iteration has ended (see module docstring)."""

    def __init__(self, source: AsyncIterator[StreamItem], on_done: Callable[[Output], None] | None = None) -> None:
        self._source = source
        self._on_done = on_done
        self._parts: list[str] = []
        self._final: Output | None = None
        self._started = time.perf_counter()
        self._first: float | None = None
        self.output: Output | None = None

    def __aiter__(self) -> TextStream:
        return self

    async def __anext__(self) -> str:
        while self.output is None:
            try:
                item = await self._source.__anext__()
            except StopAsyncIteration:
                self._finish(None)
                break
            except Exception as exc:  # a backend that raises mid-stream: the reply failed, the caller goes on
                self._finish(f"{type(exc).__name__}: {' '.join(str(exc).split())}")
                break
            if isinstance(item, Output):
                self._final = item
                continue
            if item:
                if self._first is None:
                    self._first = time.perf_counter() - self._started
                self._parts.append(item)
                return item
        raise StopAsyncIteration

    def _finish(self, error: str | None) -> None:
        seconds = time.perf_counter() - self._started
        out = self._final or Output(usage=Usage(calls=1))
        out.text = "".join(self._parts) if self._parts or not out.text else out.text
        if error is not None and out.error is None:
            out.error = error
        # one clock for both: the seconds the caller waited for the whole reply and for its first text
        out.usage.seconds = seconds
        if self._first is not None:
            out.details = {**(out.details or {}), "first_token_s": self._first}
        self.output = out
        if self._on_done is not None:
            self._on_done(out)

    async def collect(self) -> Output:
        """Drain the stream and return the whole reply."""
        async for _ in self:
            pass
        assert self.output is not None
        return self.output

    async def aclose(self) -> None:
        """Stop early (the voter left): the backend's generator is closed, its connection released."""
        close = getattr(self._source, "aclose", None)
        if close is not None:
            await close()
        if self.output is None:
            self._finish("stream closed before the end")
