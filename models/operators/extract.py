"""Answer extractors: turn a free-text reply into a comparable answer (or None).

Operators that vote or cluster (``vote``, ``wbon``, ``rateless(rule=agreement)``, answer-level
combining) compare *answers*, not texts, and what an answer is depends on the task. Pick one with
the operator parameter ``extract=NAME`` (default ``auto``):

- ``gsm8k`` / ``number``: the number after ``####`` if present, else the last number
  (lm-eval's strict-then-flexible filters), canonicalised so ``18.00`` and ``18`` agree: the core's
  :func:`harness.numbers.canonical_final_number`;
- ``mcq``: a choice letter A-J (``Answer: C``, ``(C)``, ``#### C``, ``the answer is C``, a lone letter);
- ``code``: the last fenced code block (or the whole reply), comments and blank lines dropped,
  whitespace collapsed, so cosmetic differences do not split votes;
- ``text``: the last non-empty line, lower-cased, punctuation-trimmed;
- ``auto``: ``####`` number, else an explicit MCQ answer, else the last number, else ``text``.

Other code can add one with :func:`register_extractor`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from harness.numbers import canonical_final_number, canonical_marked_number

Extractor = Callable[[str], "str | None"]
EXTRACTORS: dict[str, Extractor] = {}

# the prefix is case-insensitive, the letter is not ("the answer is a bit ..." is no answer)
_MCQ_EXPLICIT = re.compile(r"(?i:answer\s*(?:is|:)?\s*[:\-]?\s*|####\s*)\(?\**([A-J])\b\)?")
_MCQ_PAREN = re.compile(r"\(([A-J])\)")
_MCQ_LONE = re.compile(r"^\s*\(?([A-J])[\).:]?\s*$")
_FENCE = re.compile(r"```[a-zA-Z0-9_+-]*\n(.*?)```", re.DOTALL)


def register_extractor(name: str) -> Callable[[Extractor], Extractor]:
    def wrap(fn: Extractor) -> Extractor:
        EXTRACTORS[name] = fn
        return fn

    return wrap


def get_extractor(name: str) -> Extractor:
    try:
        return EXTRACTORS[name]
    except KeyError:
        raise ValueError(f"unknown extractor {name!r}; choose one of {', '.join(sorted(EXTRACTORS))}") from None


@register_extractor("gsm8k")
def extract_number(reply: str) -> str | None:
    # the core's canonical vote key (harness.numbers), so a vote here and a task's score read one rule
    return canonical_final_number(reply)


EXTRACTORS["number"] = extract_number


@register_extractor("mcq")
def extract_choice(reply: str) -> str | None:
    found = _MCQ_EXPLICIT.findall(reply)
    if found:
        return found[-1].upper()
    lines = [ln for ln in reply.strip().splitlines() if ln.strip()]
    if lines:
        lone = _MCQ_LONE.match(lines[-1])
        if lone:
            return lone.group(1).upper()
    paren = _MCQ_PAREN.findall(reply)
    return paren[-1].upper() if paren else None


@register_extractor("code")
def extract_code(reply: str) -> str | None:
    blocks = _FENCE.findall(reply)
    code = blocks[-1] if blocks else reply
    kept = []
    for line in code.splitlines():
        quoted = "'" in line or '"' in line  # a '#' inside a string is not a comment
        stripped = line.rstrip() if quoted else line.split("#", 1)[0].rstrip()
        if stripped.strip():
            kept.append(" ".join(stripped.split()))
    return "\n".join(kept) or None


@register_extractor("text")
def extract_text(reply: str) -> str | None:
    lines = [ln.strip() for ln in reply.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    return lines[-1].lower().strip(" .!?:;\"'`*") or None


@register_extractor("auto")
def extract_auto(reply: str) -> str | None:
    marked = canonical_marked_number(reply)
    if marked is not None:
        return marked
    explicit = _MCQ_EXPLICIT.findall(reply)
    if explicit:
        return explicit[-1].upper()
    return extract_number(reply) or extract_text(reply)
