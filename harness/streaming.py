"""Streamed replies: an async iterator of text deltas that also keeps the whole reply.

A backend that can stream has ``stream(request)``: an async iterator yielding ``str`` deltas as the
server sends them and, last, at most one :class:`~harness.types.Output` carrying usage, cost and
details (its text may be empty: the deltas are the text). A failure is such a final Output with
``error`` set. :class:`TextStream` is what :meth:`harness.client.ModelClient.stream` returns:
iterate it for the deltas; once it is exhausted ``.output`` holds the reply as ``generate`` would
have returned it (text joined; ``usage.seconds`` from the call to the last delta and
``details["first_token_s"]`` to the first, on the same clock).

The stream is the one reader of streamed replies, so the guarantees a caller needs live here, not
with each caller: a server's deltas are text (whatever it sends, the iteration never raises), are
*bounded* (at most ``max_chars`` characters in all, so at most 4 bytes each in UTF-8; past the cap
the backend is closed and ``details["truncated"]`` says where it was cut, whatever ``max_tokens`` the
server ignored) and are *sanitised* (every NUL and lone surrogate becomes U+FFFD, so a delta can be
UTF-8 encoded, sent and stored; a surrogate pair split over two deltas is joined into its
character; ``details["sanitized"]`` counts the replacements).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from harness.sanitize import REPLACEMENT
from harness.types import Output, Request, Usage

StreamItem = str | Output

DEFAULT_MAX_CHARS = 1_000_000  # no caller wants more of one streamed reply; callers may set less
MAX_ERROR_CHARS = 2_000
_BAD = re.compile("[\x00\ud800-\udfff]")


async def whole_reply(model: Any, request: Request) -> AsyncIterator[StreamItem]:
    """A backend that cannot stream: its whole reply as one delta (then the Output itself)."""
    (out,) = await model.generate([request])
    if out.error is None and out.text:
        yield out.text
    yield out


def clean_text(text: str) -> tuple[str, int]:
    """``text`` with surrogate pairs joined and every NUL and lone surrogate made U+FFFD; (text, replaced)."""
    if not _BAD.search(text):
        return text, 0
    # UTF-16 round trip: a high+low pair becomes its character, a lone half one U+FFFD
    joined = text.replace("\x00", REPLACEMENT).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    pairs = len(text) - len(joined)  # each joined pair is one character less
    return joined, sum(1 for ch in text if ch == "\x00" or "\ud800" <= ch <= "\udfff") - 2 * pairs


class TextStream:
    """Text deltas from ``source``; ``output`` once the iteration has ended (see module docstring)."""

    def __init__(self, source: AsyncIterator[StreamItem], on_done: Callable[[Output], None] | None = None, *,
                 max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self._source = source
        self._on_done = on_done
        self._parts: list[str] = []
        self._final: Output | None = None
        self._started = time.perf_counter()
        self._first: float | None = None
        self._chars = 0
        self._held = ""  # a delta's trailing high surrogate, waiting for the low half the next one may start with
        self._sanitized = 0
        self._truncated = False
        self.max_chars = max(0, int(max_chars))
        self.output: Output | None = None

    def limit(self, max_chars: int) -> TextStream:
        """At most ``max_chars`` characters of reply (only ever lowers the cap); returns the stream."""
        self.max_chars = max(0, min(self.max_chars, int(max_chars)))
        return self

    def __aiter__(self) -> TextStream:
        return self

    async def __anext__(self) -> str:
        while self.output is None:
            try:
                item = await self._source.__anext__()
            except StopAsyncIteration:
                return self._last_piece(None)
            except Exception as exc:  # a backend that raises mid-stream: the reply failed, the caller goes on
                return self._last_piece(f"{type(exc).__name__}: {' '.join(str(exc).split())}")
            if isinstance(item, Output):
                self._final = item
                continue
            piece = self._take(item)
            if piece:
                if self._first is None:
                    self._first = time.perf_counter() - self._started
                self._parts.append(piece)
            if self._truncated:  # the cap is reached: the backend is closed, this piece is the last
                await self._close_source()
                self._finish(None)
            if piece:
                return piece
        raise StopAsyncIteration

    def _last_piece(self, error: str | None) -> str:
        """The source has ended: finish the reply; a high surrogate still held (its pair never came)
        goes out as U+FFFD, as the last delta, so what was shown and what is stored stay the same."""
        tail = ""
        if self._held:
            self._held = ""
            self._sanitized += 1
            if self._chars < self.max_chars:
                tail = REPLACEMENT
                self._chars += 1
                self._parts.append(tail)
            else:  # one character more than the cap allows
                self._truncated = True
        self._finish(error)
        if not tail:
            raise StopAsyncIteration
        return tail

    def _take(self, item: object) -> str:
        """One delta as it may be shown and stored: text, sanitised, within what is left of the cap."""
        if isinstance(item, bytes | bytearray):
            text = bytes(item).decode("utf-8", "replace")
        elif isinstance(item, str):
            text = item
        else:  # not a delta at all (a backend bug): nothing to show
            return ""
        text, self._held = self._held + text, ""
        room = self.max_chars - self._chars
        cut = len(text) > 2 * room + 2  # never clean more than can be kept (a pair: 2 code points, 1 character)
        if cut:
            text = text[: 2 * room + 2]
        if text and "\ud800" <= text[-1] <= "\udbff":  # maybe half a pair: its other half may come next
            text, self._held = text[:-1], text[-1]
        text, n = clean_text(text)
        self._sanitized += n
        if cut or len(text) > room:
            text, self._truncated = text[:max(0, room)], True
            self._held = ""
        self._chars += len(text)
        return text

    async def _close_source(self) -> None:
        close = getattr(self._source, "aclose", None)
        if close is None:
            return
        try:
            await close()
        except Exception:  # noqa: S110  (the reply is complete as far as we take it; closing is best effort)
            pass

    def _finish(self, error: str | None) -> None:
        seconds = time.perf_counter() - self._started
        out = self._final or Output(usage=Usage(calls=1))
        self._held = ""  # closed early: half a pair nobody was shown is not kept either
        if self._parts or not out.text:
            out.text = "".join(self._parts)
        else:  # a backend that put its text only on the final Output: the same bounds apply
            text, n = clean_text(out.text)
            self._sanitized += n
            if len(text) > self.max_chars:
                text, self._truncated = text[: self.max_chars], True
            out.text = text
        if error is not None and out.error is None:
            out.error = error
        if out.error is not None:
            out.error = clean_text(out.error)[0][:MAX_ERROR_CHARS]
        # one clock for both: the seconds the caller waited for the whole reply and for its first text
        out.usage.seconds = seconds
        details = dict(out.details or {})
        if self._first is not None:
            details["first_token_s"] = self._first
        if self._truncated:
            details["truncated"] = {"max_chars": self.max_chars, "why": "the reply passed the stream's cap"}
            details["finish_reason"] = "length"
        if self._sanitized:
            details["sanitized"] = {"replaced": self._sanitized, "replacement": "U+FFFD",
                                    "why": "NUL bytes and lone surrogates cannot be sent or stored"}
        out.details = details or out.details
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
        await self._close_source()
        if self.output is None:
            self._finish("stream closed before the end")
