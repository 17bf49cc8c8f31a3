"""Which stored tasks a human can judge in the arena, and what to show of them.

A battle is only fair when the voter sees what decides it. Each task has a *display*:

* ``text``: the prompt and the two replies as text (pairs whose shown text is the same are skipped,
  whatever their hidden predictions);
* ``image`` / ``render``: the outputs' images or renders (identical pixels are skipped);
* ``video+audio``: judging needs the prompt's video with its sound, which the arena page does not
  play, so such tasks are not served;
* ``none``: not judgeable by a person (feature vectors, class ids, scene graphs, numeric estimates).

The declaration comes from, in order: ``ArenaConfig.task_display`` (task name -> display), the
task's family in :data:`FAMILY_DISPLAY`, then the stored task's modalities (text only: ``text``;
images: ``image``; video or audio: ``video+audio``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

DISPLAYS = ("text", "image", "render", "video+audio", "none")
SERVABLE = frozenset({"text", "image", "render"})

FAMILY_DISPLAY = {
    # judged by reading
    "gsm8k": "text", "qa": "text", "alignment": "text", "reliability": "text", "text": "text",
    # judged by looking at renders
    "code3d": "render", "3d": "render", "partverse": "render", "nvs": "image",
    # judged by watching and listening
    "longshot": "video+audio",
    # outputs a person cannot compare: feature vectors and class ids, estimates, graphs, embeddings
    "methods": "none", "conformal": "none", "causal": "none", "decision": "none", "selection": "none",
    "transport": "none", "spa3d": "none", "dsgg": "none", "reid": "none", "puzzles": "none", "agents": "none",
}


def display_for(task: str, family: str, modalities: Iterable[Any] | None, overrides: dict[str, str]) -> str:
    if task in overrides:
        return overrides[task] if overrides[task] in DISPLAYS else "none"
    if family in FAMILY_DISPLAY:
        return FAMILY_DISPLAY[family]
    mods = {str(m) for m in modalities or ()} or {"text"}
    if mods & {"video", "audio"}:
        return "video+audio"
    return "image" if "image" in mods else "text"


def servable(display: str) -> bool:
    return display in SERVABLE
