"""Typed values for ``-T``/``-M``/``-J key=value`` and operator parameters (``vote(m, n=5)``).

A small hand-written parser rather than ``ast.literal_eval``: Python's tokenizer treats ``#`` as
the start of a comment, so ``-J text=60#ok`` used to be stored as ``60``. Here a value is, in order:

- a quoted string, ``'...'`` or ``"..."`` (backslash escapes ``\\\\``, ``\\'``, ``\\"``, ``\\n``, ``\\t``):
  its contents, always a string (``-T name="007"`` keeps the zeros);
- ``true``/``True``, ``false``/``False``, ``None``/``null`` (``none`` stays a string);
- an int (``12``, ``-3``, ``1_000``, ``0x1f``) or a float (``0.7``, ``1e-3``, ``.5``, ``-2.``);
- a list ``[a, b]``, a tuple ``(a, b)`` (read as a list) or a mapping ``{k: v}`` whose items are
  values by these same rules; inside them a bare word (``[text, image]``) is a string;
- anything else: the text itself, unchanged (``60#ok``, ``http://host:8000/v1``, ``a=b``).

- comma-separated literals (``0.5,0.9``, ``1, 'a'``): a list, as ``literal_eval`` read them (a
  tuple); ``a,b`` or ``1, x`` stay text.

Only a whole value is read as a literal: ``[1, 2] x`` or ``'a' b`` are plain strings, never a
partial parse. Leading and trailing whitespace outside quotes is dropped.

Some values are refused (:class:`OptionValueError`, one line) rather than read: a value longer than
:data:`MAX_LENGTH` characters or nesting brackets deeper than :data:`MAX_DEPTH` (checked before
parsing, so a value can neither exhaust the parser's recursion nor fill a run's stored settings), and
a number that is not finite or does not fit 64 bits (``nan``, ``inf``, ``1e309``,
``99999999999999999999``): stored settings are JSON, which has neither, and a value silently turned
into ``inf`` or ``null`` would change what a run measures. To pass such a word as text, quote it
(``-T label='inf'``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from harness.errors import UserError

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "OptionValueError", "check_bounds", "parse_value", "split_top"]

# Generous for settings (a system prompt, a list of stop strings), far below what exhausts anything;
# a longer text belongs in a file the task reads.
MAX_LENGTH = 65_536
# A setting nests a few levels ([{"k": [1]}]); the parser recurses once per level.
MAX_DEPTH = 32
# what JSON columns (orjson) and every engine's integers hold
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1

_INT = re.compile(r"[+-]?(?:0|[1-9](?:_?\d)*)")
_BASED = re.compile(r"[+-]?0(?:[xX][0-9a-fA-F](?:_?[0-9a-fA-F])*|[oO][0-7](?:_?[0-7])*|[bB][01](?:_?[01])*)")
_DIGITS = r"\d(?:_?\d)*"
_FLOAT = re.compile(rf"[+-]?(?:(?:{_DIGITS}\.(?:{_DIGITS})?|\.{_DIGITS})(?:[eE][+-]?\d+)?|{_DIGITS}[eE][+-]?\d+)")
# the spellings literal_eval (or JSON) took; "none" and "NULL" stay strings, as before (-T filter=none)
_WORDS = {"true": True, "True": True, "false": False, "False": False, "None": None, "null": None}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", "'": "'", '"': '"'}
_CLOSE = {"[": "]", "(": ")", "{": "}"}
# what ends a bare word inside a container
_BARE_END = set(",:]})")
# the words Python's float() reads as non-finite numbers
_NON_FINITE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)


class OptionValueError(UserError, ValueError):
    """A value that is refused rather than read (too long, too deep, a number JSON cannot hold).
    The message says what is wrong with the value; the caller prefixes the option's name."""


class _NoLiteral(Exception):
    """The text is not one whole literal (the caller keeps it as a string)."""


def scalar(text: str) -> Any:
    """A bare scalar: bool, None, int, float, or the text itself."""
    if text in _WORDS:
        return _WORDS[text]
    if _INT.fullmatch(text) or _BASED.fullmatch(text):
        digits = text.replace("_", "")
        # the length test first: int() of over 4300 decimal digits raises ValueError itself
        number = int(digits, 0 if _BASED.fullmatch(text) else 10) if len(digits) <= 80 else None
        if number is None or not _INT_MIN <= number <= _INT_MAX:
            raise OptionValueError(f"{_short(text)} does not fit a 64-bit integer")
        return number
    if _FLOAT.fullmatch(text):
        value = float(text.replace("_", ""))
        if not math.isfinite(value):  # 1e309 overflows to inf
            raise OptionValueError(f"{_short(text)} is not a finite number (it overflows a float)")
        return value
    if _NON_FINITE.fullmatch(text):
        raise OptionValueError(f"{text} is not a finite number; quote it ('{text}') to pass the word as text")
    return text


def _short(text: str) -> str:
    """The value as a message quotes it: a 5,000-digit number is not repeated in full."""
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def check_bounds(text: str, what: str = "the value") -> None:
    """Refuse a value longer than :data:`MAX_LENGTH` or nesting brackets deeper than :data:`MAX_DEPTH`
    (outside quotes, as :func:`split_top` counts them), before anything parses it. ``what`` names
    the text in the message (model specs are checked the same way)."""
    if len(text) > MAX_LENGTH:
        raise OptionValueError(f"{what} is {len(text):,} characters long, at most {MAX_LENGTH:,} are accepted "
                               "(put long text in a file)")
    if not any(ch in text for ch in "([{"):
        return
    depth = deepest = 0
    quote, escaped = "", False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in ("'", '"'):
            quote = ch
        elif ch in "([{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    raise OptionValueError(f"{what} nests brackets more than {MAX_DEPTH} deep")
        elif ch in ")]}" and depth:
            depth -= 1


class _Reader:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def quoted(self) -> str:
        quote, out = self.text[self.pos], []
        self.pos += 1
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "\\" and self.pos + 1 < len(self.text):
                nxt = self.text[self.pos + 1]
                out.append(_ESCAPES.get(nxt, "\\" + nxt))  # an unknown escape stays as written
                self.pos += 2
                continue
            self.pos += 1
            if ch == quote:
                return "".join(out)
            out.append(ch)
        raise _NoLiteral  # unterminated

    def item(self) -> Any:
        """One value inside a container."""
        self.skip_space()
        ch = self.peek()
        if ch in ("'", '"'):
            return self.quoted()
        if ch in _CLOSE:
            return self.container()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in _BARE_END and self.text[self.pos] not in "[{(":
            self.pos += 1
        word = self.text[start:self.pos].strip()
        if not word:
            raise _NoLiteral
        return scalar(word)

    def container(self) -> Any:
        opening = self.text[self.pos]
        close = _CLOSE[opening]
        self.pos += 1
        items: list[Any] = []
        pairs: dict[Any, Any] = {}
        while True:
            self.skip_space()
            if self.peek() == close:
                self.pos += 1
                break
            value = self.item()
            self.skip_space()
            if opening == "{":
                if self.peek() != ":":
                    raise _NoLiteral  # sets are not settings (and not JSON)
                self.pos += 1
                if isinstance(value, list | dict):
                    raise _NoLiteral  # an unhashable key
                pairs[value] = self.item()
                self.skip_space()
            else:
                items.append(value)
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != close:
                raise _NoLiteral
        return pairs if opening == "{" else items


def _whole(text: str) -> Any:
    """One whole literal, or ``_NoLiteral`` (quoted strings, containers, non-string scalars)."""
    if text[:1] in ("'", '"') or text[:1] in _CLOSE:
        reader = _Reader(text)
        value = reader.quoted() if text[0] in ("'", '"') else reader.container()
        reader.skip_space()
        if reader.pos != len(text):
            raise _NoLiteral
        return value
    value = scalar(text)
    if isinstance(value, str):
        raise _NoLiteral
    return value


def parse_value(raw: str) -> Any:
    """A ``key=value`` option's value, typed (see the module docstring); :class:`OptionValueError`
    for a value that is refused."""
    check_bounds(raw)
    text = raw.strip()
    if not text:
        return ""
    parts = split_top(text)
    if len(parts) > 1 or text.endswith(","):
        # "0.5,0.9" was a tuple to literal_eval (and is stored as a list in runs made so): every part
        # a literal -> a list; "a,b" or "1, x" stay text
        try:
            return [_whole(p) for p in parts]
        except _NoLiteral:
            return text
    if text[0] in ("'", '"') or text[0] in _CLOSE:
        reader = _Reader(text)
        try:
            value = reader.quoted() if text[0] in ("'", '"') else reader.container()
        except _NoLiteral:
            return text
        reader.skip_space()
        return value if reader.pos == len(text) else text
    return scalar(text)


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and quotes: ``m, text="a,b", k=[1, 2]`` is three parts."""
    parts: list[str] = []
    cur: list[str] = []
    depth, quote, i = 0, "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            cur.append(ch)
            if ch == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in ("'", '"'):
            quote = ch
            cur.append(ch)
        elif ch in "([{":
            depth += 1
            cur.append(ch)
        elif ch in ")]}":
            depth -= 1
            cur.append(ch)
        elif ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts
