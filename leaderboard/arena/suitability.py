"""Which stored tasks a human can judge in the arena, and what to show of them.

A battle is only fair when the voter sees what decides it. Each task has a *display*:

* ``text``: the prompt and the two replies as text (pairs whose shown text is the same are skipped,
  whatever their hidden predictions);
* ``image`` / ``render``: the outputs' images or renders (identical pixels are skipped);
* ``video+audio``: judging needs the prompt's video with its sound, which the arena page does not
  play, so such tasks are not served;
* ``none``: not judgeable by a person (feature vectors, class ids, scene graphs, numeric estimates).

The declaration comes from, in order: ``ArenaConfig.task_display`` (task name -> display), the
task's family (its manifest's ``arena_display``, :mod:`harness.families`), then the stored task's
modalities (text only: ``text``; images: ``image``; video or audio: ``video+audio``). Tasks stored
before families were named by their manifests carry a modality word as their family
(:data:`LEGACY_FAMILY_DISPLAY`); databases written then keep those rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harness import families

DISPLAYS = ("text", "image", "render", "video+audio", "none")
SERVABLE = frozenset({"text", "image", "render"})

# the modality words older versions stored as a task's family ("3d": its outputs were rendered); the
# arena demo's synthetic tasks (leaderboard/arena/demo.py), which no family owns, use them too
LEGACY_FAMILY_DISPLAY = {"text": "text", "3d": "render"}


def display_for(task: str, family: str, modalities: Iterable[Any] | None, overrides: dict[str, str]) -> str:
    if task in overrides:
        return overrides[task] if overrides[task] in DISPLAYS else "none"
    declared = families.arena_display(family) if family else None
    if declared is not None:
        return declared if declared in DISPLAYS else "none"
    if family in LEGACY_FAMILY_DISPLAY:
        return LEGACY_FAMILY_DISPLAY[family]
    mods = {str(m) for m in modalities or ()} or {"text"}
    if mods & {"video", "audio"}:
        return "video+audio"
    return "image" if "image" in mods else "text"


def servable(display: str) -> bool:
    return display in SERVABLE
