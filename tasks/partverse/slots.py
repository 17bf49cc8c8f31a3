"""Caption-to-slots (C2S) scoring exactly as 3D-PLOT-LLM's released ``eval_tools/compute_c2s_metrics.py``.

- prediction slots: every ``<part_N>`` in the reply (regex ``<part_(\\d+)>``, case-sensitive, as
  released), as a *set* of integers, so duplicates and order do not matter and malformed tokens
  (``<part_>``, ``<part 3>``, ``part_3``, ``<Part_3>``) are simply not slots;
- gold slots: ``meta.bcp_group_ids`` of the held-out row;
- Jaccard ``|G & P| / |G | P|``, 0 when either set is empty;
- exact match 1 only when ``G == P`` and ``G`` is non-empty;
- both are means over queries (the task's aggregate).

One choice made here: gold ids are compared in token space, ``bcp_group_ids + part_index_base``.
The released data uses ``part_index_base = 0`` (tokens ``<part_0>..<part_15>``), where this is the
released computation; the released script compares raw group ids and would mis-score a base-1 file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PART_RE = re.compile(r"<part_(\d+)>")


def parse_slots(text: str | None) -> set[int]:
    return {int(m.group(1)) for m in PART_RE.finditer(text or "")}


def gold_slots(group_ids: Iterable[int], part_index_base: int = 0) -> set[int]:
    return {int(g) + part_index_base for g in group_ids}


def jaccard(gold: set[int], pred: set[int]) -> float:
    if not gold or not pred:
        return 0.0
    return len(gold & pred) / len(gold | pred)


def exact_match(gold: set[int], pred: set[int]) -> float:
    return 1.0 if gold and gold == pred else 0.0


def format_slots(slots: Iterable[int]) -> str:
    """The answer format of the released data: ``<part_3>,<part_7>`` (sorted, comma-separated)."""
    return ",".join(f"<part_{s}>" for s in sorted(slots))
