"""JSON column values encoded and decoded fast (orjson), with exactly the standard library's values.

What a JSON column stores is read back with ``json.loads``, so any encoder producing the same
value is interchangeable; orjson takes a tenth of ``json.dumps``'s time. Where orjson would store
something else, or refuses a value, the value goes through ``json.dumps`` as SQLAlchemy's JSON type
does, so every value stores (or fails to) as it did: orjson writes NaN and infinities as ``null``
(``json.dumps`` as ``NaN``, which reads back as NaN), and refuses non-string keys, integers beyond
64 bits, lone surrogates, float subclasses (numpy scalars) and, with the passthrough options,
dataclasses and datetimes (``json.dumps`` refuses those too, so the write fails as before). The one
difference: orjson encodes enums (by value) and UUIDs (as text), which ``json.dumps`` refuses, so
such a value now stores where its write used to fail.

Reading is the mirror image: ``loads`` decodes with orjson and hands the text to ``json.loads``
where orjson would refuse it (NaN and infinities, which ``json.dumps`` writes; lone surrogate
escapes; numbers beyond double range) or would decode it differently: orjson turns integers beyond
64 bits (above 2**64 - 1, below -2**63) into floats, so any text with a run of 19 digits (the
shortest such integer, -9223372036854775809, has 19) is decoded by ``json.loads``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

# every ASCII digit to "0", every other byte to " ": a run of 19 digits is then a plain substring
# test (a regular expression over the text cost four times orjson's whole decode)
_DIGITS_TO_ZERO = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_NINETEEN_DIGITS = b"0" * 19
_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS


def dumps(value: Any) -> str:
    """The JSON text of ``value``: what ``json.dumps`` would store, possibly spelt differently."""
    out = _orjson_same(value)
    return out.decode() if out is not None else json.dumps(value)


def dumps_utf8(value: Any) -> bytes:
    """``json.dumps(value, ensure_ascii=False).encode()`` (a request body), possibly spelt differently."""
    out = _orjson_same(value)
    return out if out is not None else json.dumps(value, ensure_ascii=False).encode()


def _orjson_same(value: Any) -> bytes | None:
    """orjson's encoding of ``value`` where it means what ``json.dumps``' does, else None."""
    try:
        out = orjson.dumps(value, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None
    # orjson spells a non-finite float "null": only text containing null can hide one
    if b"null" in out and _has_nonfinite(value):
        return None
    return out


def _has_nonfinite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_nonfinite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_nonfinite(v) for v in value)
    return False


def loads(text: str | bytes) -> Any:
    """The value ``json.loads`` reads from ``text``, decoded by orjson where that gives the same."""
    if text == "{}":  # most stored details and metadata: a fresh dict, without a decoder call
        return {}
    if isinstance(text, str):
        raw = text.encode("utf-8", "surrogatepass")
    elif isinstance(text, bytes):
        raw = text
    else:  # SQLite hands a number-like stored text back as a number: json.loads decides (it refuses)
        return json.loads(text)
    # only ASCII digits make JSON numbers, so the UTF-8 bytes tell whether a long integer is there
    if _NINETEEN_DIGITS not in raw.translate(_DIGITS_TO_ZERO):
        try:
            return orjson.loads(raw)  # the bytes already made: orjson need not encode the text again
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)
