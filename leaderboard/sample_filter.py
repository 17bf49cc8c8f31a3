"""The sample browser's query language: free text plus typed terms, parsed once, applied in SQL.

``q`` is split like a shell line (quotes group words). Terms:

- ``score:NAME<OP>NUMBER`` (OP one of ``< <= > >= = !=``): samples whose score NAME compares so;
  ``score:NAME`` alone: samples that have that score at all.
- ``meta:KEY=VALUE`` / ``meta:KEY!=VALUE``: the sample's metadata (the keys breakdowns use); a list
  value matches when it contains VALUE.
- ``error:KIND``: samples that failed with that error kind (``error:any``: any error).

Everything else is literal text searched in the id, input, output, answer and error. ``sort`` is a
key (``id``, ``latency``, ``cost``, ``tokens``, ``input_tokens``, ``created``, ``score:NAME``), ``-`` in
front for descending. A term that cannot be read is reported and ignored, never an error page.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Text, and_, cast, func, not_, or_
from sqlalchemy.sql.elements import ColumnElement

from harness.store.schema import SampleResultRow

OPS = ("<=", ">=", "!=", "==", "<", ">", "=")
_SCORE = re.compile(r"^score:([^<>=!]+?)\s*(?:(<=|>=|!=|==|<|>|=)\s*(.+))?$")
_META = re.compile(r"^meta:([^=!]+?)\s*(!=|==|=)\s*(.*)$")
SORT_COLUMNS = {"latency": SampleResultRow.latency_s, "cost": SampleResultRow.cost,
                "tokens": SampleResultRow.output_tokens, "input_tokens": SampleResultRow.input_tokens,
                "created": SampleResultRow.id}
SORT_KEYS = ("id", *SORT_COLUMNS)


@dataclass(slots=True)
class ScoreTerm:
    name: str
    op: str | None  # None: the score exists
    value: float = math.nan


@dataclass(slots=True)
class MetaTerm:
    key: str
    value: str
    negate: bool = False


@dataclass(slots=True)
class SampleFilter:
    text: str = ""
    scores: list[ScoreTerm] = field(default_factory=list)
    meta: list[MetaTerm] = field(default_factory=list)
    error_kinds: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # terms that were not understood (shown, ignored)

    @property
    def typed(self) -> bool:
        return bool(self.scores or self.meta or self.error_kinds)


def _split(q: str) -> list[str]:
    try:
        return shlex.split(q)
    except ValueError:  # an unbalanced quote: plain words
        return q.split()


def parse_filter(q: str) -> SampleFilter:
    """``q`` as a :class:`SampleFilter` (see the module docstring)."""
    out = SampleFilter()
    words: list[str] = []
    for tok in _split(q or ""):
        low = tok.lower()
        if low.startswith("score:"):
            m = _SCORE.match(tok)
            if m is None or not m.group(1).strip():
                out.problems.append(f"{tok!r}: write score:NAME<0.5 (or <=, >, >=, =, !=)")
                continue
            name, op, raw = m.group(1).strip(), m.group(2), m.group(3)
            if op is None:
                out.scores.append(ScoreTerm(name, None))
                continue
            try:
                value = float(raw)
            except (TypeError, ValueError):
                value = math.nan
            if not math.isfinite(value):
                out.problems.append(f"{tok!r}: {raw!r} is not a number")
                continue
            out.scores.append(ScoreTerm(name, "=" if op == "==" else op, value))
        elif low.startswith("meta:"):
            m = _META.match(tok)
            if m is None or not m.group(1).strip():
                out.problems.append(f"{tok!r}: write meta:KEY=VALUE")
                continue
            out.meta.append(MetaTerm(m.group(1).strip(), m.group(3), m.group(2) == "!="))
        elif low.startswith("error:") and len(tok) > 6:
            out.error_kinds.append(tok[6:])
        else:
            words.append(tok)
    out.text = " ".join(words)
    return out


@dataclass(slots=True)
class SampleSort:
    key: str = "id"  # "id", a SORT_COLUMNS key, or "score:NAME"
    desc: bool = False
    problem: str = ""

    def __str__(self) -> str:
        return ("-" if self.desc else "") + self.key if self.key != "id" or self.desc else ""


def parse_sort(raw: str) -> SampleSort:
    """``sort`` (``-latency``, ``score:accuracy``, ...) as a :class:`SampleSort`; unknown keys sort by id."""
    raw = (raw or "").strip()
    desc = raw.startswith("-")
    key = raw.lstrip("+-").strip()
    if not key:
        return SampleSort()
    if key.lower().startswith("score:") and key[6:].strip():
        return SampleSort("score:" + key[6:].strip(), desc)
    if key.lower() in SORT_KEYS:
        return SampleSort(key.lower(), desc)
    return SampleSort(problem=f"unknown sort {raw!r}: use one of {', '.join(SORT_KEYS)} or score:NAME, '-' for "
                              "descending")


def _like(text: str) -> str:
    # the search text is literal: escape LIKE's wildcards so "%" and "_" match only themselves
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def score_value(name: str) -> ColumnElement[Any]:
    return SampleResultRow.scores[name].as_float()


def _compare(col: ColumnElement[Any], op: str, value: float) -> ColumnElement[bool]:
    if op == "<":
        return col < value
    if op == "<=":
        return col <= value
    if op == ">":
        return col > value
    if op == ">=":
        return col >= value
    if op == "!=":
        return and_(col.is_not(None), col != value)
    return col == value


def conditions(f: SampleFilter) -> list[ColumnElement[bool]]:
    """SQL conditions on ``sample_results`` for the filter (the run id is the caller's)."""
    cond: list[ColumnElement[bool]] = []
    if f.text:
        like = _like(f.text)
        cond.append(or_(*(col.ilike(like, escape="\\") for col in (
            SampleResultRow.sample_id, SampleResultRow.output, SampleResultRow.answer, SampleResultRow.error,
            cast(SampleResultRow.input, Text)))))
    for t in f.scores:
        col = score_value(t.name)
        cond.append(col.is_not(None) if t.op is None else _compare(col, t.op, t.value))
    for m in f.meta:
        path = SampleResultRow.input[("metadata", m.key)]
        # a scalar equal to the value, or a list holding it (as JSON text: '"value"' inside '[...]')
        hit = or_(path.as_string() == m.value, cast(path, Text).like(_like(f'"{m.value}"'), escape="\\"))
        cond.append(and_(path.as_string().is_not(None), not_(hit)) if m.negate else hit)
    if f.error_kinds:
        kinds = [k for k in f.error_kinds if k.lower() != "any"]
        any_error = SampleResultRow.error.is_not(None)
        cond.append(and_(any_error, SampleResultRow.error_kind.in_(kinds)) if len(kinds) == len(f.error_kinds)
                    else any_error)
    return cond


def order_by(sort: SampleSort) -> list[Any]:
    """ORDER BY clauses: the key (missing values last either way), then the natural id order."""
    natural = [func.length(SampleResultRow.sample_id), SampleResultRow.sample_id, SampleResultRow.epoch]
    if sort.key == "id":
        return [c.desc() for c in natural] if sort.desc else natural
    col: Any = score_value(sort.key[6:]) if sort.key.startswith("score:") else SORT_COLUMNS[sort.key]
    return [(col.desc() if sort.desc else col.asc()).nulls_last(), *natural]


def clamp_page(page: int, total: int, per_page: int) -> tuple[int, int]:
    """(page, pages): page forced into 1..pages, so page 99999 of 66 shows page 66."""
    pages = max(1, math.ceil(total / max(per_page, 1)))
    return max(1, min(page, pages)), pages


SORT_LABELS = {"id": "sample id", "latency": "latency", "cost": "cost", "tokens": "output tokens",
               "input_tokens": "input tokens", "created": "time stored"}


def sort_options(score_names: list[str]) -> list[tuple[str, str]]:
    """(value, label) of every sort the form offers: each column both ways, each score both ways."""
    out = [("", "sample id ↑"), ("-id", "sample id ↓")]
    for k, label in SORT_LABELS.items():
        if k != "id":
            out += [(k, f"{label} ↑"), (f"-{k}", f"{label} ↓")]
    for n in score_names:
        out += [(f"score:{n}", f"{n} ↑"), (f"-score:{n}", f"{n} ↓")]
    return out
