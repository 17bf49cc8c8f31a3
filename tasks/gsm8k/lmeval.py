"""GSM8K answer extraction and exact match exactly as lm-evaluation-harness scores its ``gsm8k`` task.

Two filters, each a regex read by ``findall`` and then ``take_first`` of the (single) reply:
- ``strict-match``: ``#### (\\-?[0-9\\.\\,]+)``, the *first* match (one space after ``####``, no ``$``);
- ``flexible-extract``: ``(-?[$0-9.,]{2,})|(-?[0-9]+)``, the *last* match, its first non-empty group.
A reply without a match becomes the fallback string ``[invalid]``; the match is stripped of whitespace.
The metric is ``exact_match`` with ``ignore_case`` and ``regexes_to_ignore`` ``[",", "\\$", "(?s).*#### ",
"\\.$"]`` applied in that order to *both* the extracted answer and the full reference solution (so the
reference reduces to the text after its last ``#### ``); the two strings are then compared as strings
(``18.00`` is not ``18``, ``42..`` loses one dot).
"""

from __future__ import annotations

import re

FALLBACK = "[invalid]"
STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
IGNORE = tuple(re.compile(p) for p in (",", r"\$", r"(?s).*#### ", r"\.$"))


def _select(pattern: re.Pattern[str], reply: str, index: int) -> str:
    found = pattern.findall(reply)
    if not found:
        return FALLBACK
    match = found[index]
    if isinstance(match, tuple):  # alternation: the first group that matched
        match = next((m for m in match if m), FALLBACK)
    return match.strip()


def strict_match(reply: str) -> str:
    return _select(STRICT, reply, 0)


def flexible_extract(reply: str) -> str:
    return _select(FLEXIBLE, reply, -1)


def em_normalise(text: str) -> str:
    for pattern in IGNORE:
        text = pattern.sub("", text)
    # lm-eval compares numpy fixed-width unicode arrays, where trailing NULs do not count
    return text.lower().rstrip("\x00")


def exact_match(prediction: str, reference: str) -> bool:
    """``reference``: the dataset's full ``answer`` field (solution and ``#### n`` line)."""
    return em_normalise(prediction) == em_normalise(reference)
