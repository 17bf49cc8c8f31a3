"""Text folded for matching (the moderation word list, a reply naming its own model).

Matching the raw text is beaten by characters a reader does not see or does not tell apart: a
zero-width space or a soft hyphen inside a word, full-width or mathematical letters, combining
accents, Cyrillic or Greek letters that look like Latin ones. :func:`fold` maps all of those to
plain lower-case letters, so a list entry matches however its letters were dressed up:

1. NFKC (compatibility forms: full-width and mathematical letters, ligatures, NBSP -> space);
2. canonical decomposition, then every format character (Unicode category Cf: zero-width spaces and
   joiners, soft hyphens, bidi controls) and every combining mark (Mn, Me) is dropped;
3. look-alike Cyrillic and Greek letters become the Latin letter they imitate;
4. casefold, then NFKC again (casefolding can produce compatibility forms).

The folded text is only ever matched against, never shown or stored.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

_DROP = frozenset({"Cf", "Mn", "Me"})

# Cyrillic and Greek letters a Latin reader takes for Latin ones (Unicode's confusables for the letters
# of these scripts, upper and lower case, as each case looks); applied before casefolding, because
# some look alike in one case only (Cyrillic В is B, в is not b)
_LOOKALIKES = {
    # Cyrillic capitals
    "А": "a", "В": "b", "С": "c", "Е": "e", "Н": "h", "І": "i", "Ј": "j", "К": "k", "М": "m", "О": "o",
    "Р": "p", "Ѕ": "s", "Т": "t", "Х": "x", "У": "y", "Ү": "y", "Ԛ": "q", "Ԝ": "w", "Ԁ": "d", "Һ": "h",
    "Ӏ": "l",
    # Cyrillic small letters
    "а": "a", "с": "c", "е": "e", "һ": "h", "і": "i", "ј": "j", "о": "o", "р": "p", "ѕ": "s", "х": "x",
    "у": "y", "ү": "y", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "ь": "b", "г": "r", "п": "n", "т": "t",
    "к": "k", "м": "m", "в": "b", "н": "h",
    # Greek capitals
    "Α": "a", "Β": "b", "Ε": "e", "Ζ": "z", "Η": "h", "Ι": "i", "Κ": "k", "Μ": "m", "Ν": "n", "Ο": "o",
    "Ρ": "p", "Τ": "t", "Υ": "y", "Χ": "x",
    # Greek small letters
    "α": "a", "β": "b", "γ": "y", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ϲ": "c", "ϳ": "j",
}
_TABLE = str.maketrans(_LOOKALIKES)


def fold(text: str) -> str:
    """``text`` as it reads: invisible characters and accents gone, look-alikes Latin, lower case."""
    if text.isascii():  # the common case: only case matters (and ASCII has no format characters)
        return text.casefold()
    decomposed = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text))
    kept = "".join(ch for ch in decomposed if unicodedata.category(ch) not in _DROP)
    return unicodedata.normalize("NFKC", kept.translate(_TABLE).casefold())


_SEPARATORS = re.compile(r"[\s\-_./:]+")


def _loose(text: str) -> str:
    """Folded, with every run of separators one space: ``GPT-4o mini`` and ``gpt 4o-mini`` read alike."""
    return _SEPARATORS.sub(" ", fold(text)).strip()


def mentions(text: str, names: Iterable[str], min_len: int = 4) -> bool:
    """Whether ``text`` contains one of ``names`` (folded; names shorter than ``min_len`` are too
    common to tell anything, ``gpt`` in a reply says nothing about which model wrote it)."""
    loose = f" {_loose(text)} "
    for name in names:
        n = _loose(name)
        if len(n.replace(" ", "")) >= min_len and n in loose:
            return True
    return False
