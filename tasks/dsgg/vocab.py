"""Action Genome class lists (shipped in ``data/``) with STTran's display names.

STTran renames the release's squashed names (``closetcabinet`` -> ``closet/cabinet``, ``lookingat`` ->
``looking_at``); we use those names in prompts and accept either spelling (and spaces) when parsing.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

DATA = Path(__file__).parent / "data"

_OBJECT_RENAMES = {"closetcabinet": "closet/cabinet", "cupglassbottle": "cup/glass/bottle",
                   "papernotebook": "paper/notebook", "phonecamera": "phone/camera", "sofacouch": "sofa/couch"}
_PREDICATE_RENAMES = {
    "lookingat": "looking_at", "notlookingat": "not_looking_at", "infrontof": "in_front_of",
    "onthesideof": "on_the_side_of", "coveredby": "covered_by", "drinkingfrom": "drinking_from",
    "haveitontheback": "have_it_on_the_back", "leaningon": "leaning_on", "lyingon": "lying_on",
    "notcontacting": "not_contacting", "otherrelationship": "other_relationship", "sittingon": "sitting_on",
    "standingon": "standing_on", "writingon": "writing_on",
}
# predicates that carry little information (the seed paper's "uninformative" relations)
AG_TRIVIAL = ("not_looking_at", "unsure", "not_contacting")


def _lines(name: str) -> list[str]:
    return [x.strip() for x in (DATA / name).read_text(encoding="utf-8").splitlines() if x.strip()]


@cache
def ag_objects() -> tuple[str, ...]:
    """36 object classes, person first (index 0 here; STTran's index = this + 1 after __background__)."""
    return tuple(_OBJECT_RENAMES.get(x, x) for x in _lines("object_classes.txt"))


@cache
def ag_predicates() -> tuple[str, ...]:
    """26 predicates: attention 0-2, spatial 3-8, contacting 9-25."""
    return tuple(_PREDICATE_RENAMES.get(x, x) for x in _lines("relationship_classes.txt"))


def squash(name: str) -> str:
    """Spelling-insensitive key: lower case, no spaces/underscores/hyphens/slashes."""
    return re.sub(r"[\s_\-/]+", "", str(name).strip().lower())


def lookup_table(names: tuple[str, ...] | list[str]) -> dict[str, int]:
    return {squash(n): i for i, n in enumerate(names)}
