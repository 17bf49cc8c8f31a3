"""Final-number answers: reading the number a free-text reply ends on, and comparing it with a target.

Every task or operator that asks a model for a number reads it here, by one of three published or
stated rule sets (kept apart because they disagree on purpose, and each has its users):

1. **lm-evaluation-harness's ``gsm8k`` filters**, reproduced exactly (:func:`strict_match`,
   :func:`flexible_extract`, :func:`exact_match`): each filter is a regex read by ``findall`` and
   ``take_first`` of the (single) reply.

   - ``strict-match``: ``#### (\\-?[0-9\\.\\,]+)``, the *first* match (one space after ``####``, no ``$``);
   - ``flexible-extract``: ``(-?[$0-9.,]{2,})|(-?[0-9]+)``, the *last* match, its first non-empty group.

   A reply without a match becomes the fallback string ``[invalid]``; the match is stripped of
   whitespace. The metric is ``exact_match`` with ``ignore_case`` and ``regexes_to_ignore``
   ``[",", "\\$", "(?s).*#### ", "\\.$"]`` applied in that order to *both* the extracted answer and
   the full reference solution (so the reference reduces to the text after its last ``#### ``);
   the two strings are then compared as strings (``18.00`` is not ``18``, ``42..`` loses one dot).
2. **The forgiving numeric reading** (ours, not lm-eval's; :func:`extract_flexible`,
   :func:`extract_strict`, :func:`same_number`): the last number in the reply that parses as one
   (or the last ``#### <number>``), ``,``/``$``/trailing dots dropped, compared numerically
   (``18.00`` == ``18``).
3. **The canonical vote key** (:func:`canonical_final_number`): the number after the last ``####``
   if present, else the last number (lm-eval's strict-then-flexible order), canonicalised by
   :func:`canonical_number` so that answers that are the same number are the same string: what
   voting and clustering operators compare.

GSM8K's worked solutions (Cobbe et al., 2021, "Training Verifiers to Solve Math Word Problems") end
in a ``#### <number>`` line; :func:`final_answer` reads a reference target off such a solution.
:func:`score_final_number` scores a reply by all three exact matches of (1) and (2) at once.
"""

from __future__ import annotations

import math
import re
from typing import Any

from harness.types import MetricInfo, Output, Sample, Score, higher

# ---- 1. lm-evaluation-harness's filters and exact_match -------------------------------------------
FALLBACK = "[invalid]"
STRICT_MATCH = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE_EXTRACT = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
IGNORE = tuple(re.compile(p) for p in (",", r"\$", r"(?s).*#### ", r"\.$"))


def _select(pattern: re.Pattern[str], reply: str, index: int) -> str:
    found = pattern.findall(reply)
    if not found:
        return FALLBACK
    match = found[index]
    if isinstance(match, tuple):  # alternation: the first group that matched
        match = next((m for m in match if m), FALLBACK)
    return str(match).strip()


def strict_match(reply: str) -> str:
    """lm-eval's ``strict-match`` filter: the first ``#### <number>`` (one space, no ``$``), else ``[invalid]``."""
    return _select(STRICT_MATCH, reply, 0)


def flexible_extract(reply: str) -> str:
    """lm-eval's ``flexible-extract`` filter: the last number-like run (``$ , .`` included), else ``[invalid]``."""
    return _select(FLEXIBLE_EXTRACT, reply, -1)


def em_normalise(text: str) -> str:
    """lm-eval's ``exact_match`` normalisation: its ``regexes_to_ignore`` in order, then ``ignore_case``."""
    for pattern in IGNORE:
        text = pattern.sub("", text)
    # lm-eval compares numpy fixed-width unicode arrays, where trailing NULs do not count
    return text.lower().rstrip("\x00")


def exact_match(prediction: str, reference: str) -> bool:
    """lm-eval's ``exact_match``; ``reference``: the dataset's full ``answer`` field (solution and ``#### n`` line)."""
    return em_normalise(prediction) == em_normalise(reference)


# ---- 2. the forgiving numeric reading ------------------------------------------------------------
MARKED_NUMBER = re.compile(r"####\s*\$?(-?[0-9][0-9.,]*)")
NUMBER_RUN = re.compile(r"-?[$0-9.,]{2,}|-?[0-9]+")  # lm-eval's flexible-extract runs, without the groups
_PLAIN_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")


def normalise(text: str) -> str:
    """A number as written, ``,`` and ``$`` dropped, whitespace and *all* trailing dots stripped (ours)."""
    return text.replace(",", "").replace("$", "").strip().rstrip(".")


def final_answer(solution: str) -> str:
    """The reference answer of a worked solution ending in ``#### <number>`` (GSM8K's format): the text
    after its last ``####``, normalised by :func:`normalise`. A solution without ``####`` is the
    caller's data error to report; here it is read whole."""
    return normalise(solution.split("####")[-1])


def extract_strict(reply: str) -> str | None:
    """The last ``#### <number>`` of a reply (any spacing, one optional ``$``), normalised; None without one."""
    found = MARKED_NUMBER.findall(reply)
    return normalise(found[-1]) if found else None


def extract_flexible(reply: str) -> str | None:
    """The last number-like run of a reply that, normalised, is a plain decimal (``-12``, ``3.5``); None without one."""
    for candidate in reversed(NUMBER_RUN.findall(reply)):
        value = normalise(candidate)
        if _PLAIN_NUMBER.fullmatch(value):
            return value
    return None


def same_number(answer: str | None, target: str) -> bool:
    """Whether an extracted answer is the target: equal strings, or equal as floats within 1e-9."""
    if answer is None:
        return False
    if answer == target:
        return True
    try:
        return abs(float(answer) - float(target)) < 1e-9
    except ValueError:
        return False


# ---- 3. the canonical vote key -------------------------------------------------------------------
_VOTE_MARKED = re.compile(r"####\s*\$?\s*(-?[0-9][0-9.,]*)")  # a space after the ``$`` is allowed here
_VOTE_NUMBER = re.compile(r"-?\$?[0-9][0-9,]*(?:\.[0-9]+)?")


def canonical_number(raw: str) -> str | None:
    """A number written any way (``,``/``$``/trailing dots dropped) as one string per value: an integral
    value below 1e15 as its integer (``18.00`` -> ``18``), any other as ``repr(float)``; None when it
    is not a finite number (a run of digits too long for a float is no answer to vote on)."""
    text = raw.replace(",", "").replace("$", "").strip().rstrip(".")
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def canonical_marked_number(reply: str) -> str | None:
    """The number after the last ``####`` of a reply, canonical; None without one (or when it does not parse)."""
    found = _VOTE_MARKED.findall(reply)
    return canonical_number(found[-1]) if found else None


def canonical_final_number(reply: str) -> str | None:
    """The ``####`` number if it parses, else the last number that does, canonical; None without one."""
    marked = canonical_marked_number(reply)
    if marked is not None:
        return marked
    for candidate in reversed(_VOTE_NUMBER.findall(reply)):
        value = canonical_number(candidate)
        if value is not None:
            return value
    return None


# ---- scoring a reply by (1) and (2) --------------------------------------------------------------
FINAL_NUMBER_METRICS: dict[str, MetricInfo] = {
    "exact_match_flexible": higher("exact match (lm-eval flexible-extract)"),
    "exact_match_strict": higher("exact match (lm-eval strict-match)"),
    "exact_match_numeric": higher("exact match (last number, numeric)"),
}


def score_final_number(sample: Sample, output: Output) -> Score:
    """The three exact matches of :data:`FINAL_NUMBER_METRICS` for a reply: lm-eval's strict and flexible
    ones against the sample's full solution (``metadata["solution"]``; ``#### <target>`` when the
    sample carries only the number) and the forgiving numeric one against ``sample.target``."""
    metadata: dict[str, Any] = sample.metadata or {}
    solution = metadata.get("solution") or f"#### {sample.target}"
    strict = strict_match(output.text)
    flexible = flexible_extract(output.text)
    numeric = extract_flexible(output.text)
    return Score(
        values={
            "exact_match_flexible": float(exact_match(flexible, solution)),
            "exact_match_strict": float(exact_match(strict, solution)),
            "exact_match_numeric": float(same_number(numeric, sample.target)),
        },
        answer=flexible,
        explanation=f"strict={strict!r} flexible={flexible!r} numeric={numeric!r} target={sample.target!r}",
    )
