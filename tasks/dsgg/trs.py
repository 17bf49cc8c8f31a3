"""Temporal Relation Sets: the reason-then-locate prompt, the reply parser, and expansion to frames.

A TRS is a list of relations ``{"subject", "predicate", "object", "spans": [[start, end], ...],
"boxes": {"<frame>": {"subject": [x1,y1,x2,y2], "object": [...]}}}`` (spans inclusive, in annotated-frame
numbers; boxes optional). The model first reasons about what happens, then lists the set, then locates
each relation's subject and object (boxes) -- the top-down order the seed paper proposes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.tasks.dsgg.vocab import squash

OBJECTS_MARK = "OBJECTS_JSON:"


class ParseError(ValueError):
    """The reply holds no usable temporal relation set (the message says why, in one line)."""


def build_prompt(video: dict[str, Any], predicates: list[str], categories: list[str], setting: str) -> str:
    n = video["n_frames"]
    lines = [
        f"This video has {n} annotated frames, numbered 0 to {n - 1} in time order.",
        "Describe its dynamic scene graph as a Temporal Relation Set.",
        "First reason briefly about what the people are doing. Then list every relation that holds, each once,"
        " with the frame spans where it holds, and locate its subject and object with boxes [x1, y1, x2, y2]"
        " in the frames you can.",
        "Allowed predicates: " + ", ".join(predicates) + ".",
    ]
    if setting == "predcls":
        # given objects (PredCls-style): name them exactly so relations can be grounded to their boxes
        objects = sorted(video["objects"])
        lines.append("Objects in the video (use these names): " + ", ".join(objects) + ".")
        lines.append(OBJECTS_MARK + " " + json.dumps(objects))
    else:
        lines.append("Object categories: " + ", ".join(categories) + ". If a category appears more than once,"
                     " name the instances category#1, category#2, ...")
    lines.append(
        'End your reply with JSON: {"relations": [{"subject": "...", "predicate": "...", "object": "...", '
        '"spans": [[start, end]], "boxes": {"<frame>": {"subject": [x1, y1, x2, y2], "object": [x1, y1, x2, y2]}}}]}'
    )
    return "\n".join(lines)


def _json_candidates(text: str) -> list[Any]:
    """Every JSON object/array that decodes from a '{' or '[' in the text, fenced blocks first."""
    found: list[Any] = []
    blocks = re.findall(r"```(?:json)?\s*(.*?)```", text, flags=re.S)
    decoder = json.JSONDecoder()
    for chunk in [*blocks, text]:
        for m in re.finditer(r"[\[{]", chunk):
            try:
                value, _ = decoder.raw_decode(chunk[m.start():])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict | list):
                found.append(value)
    return found


def _relations_of(value: Any) -> list[Any] | None:
    if isinstance(value, dict):
        for key in ("relations", "trs", "temporal_relation_set", "scene_graph"):
            if isinstance(value.get(key), list):
                return value[key]
        return None
    if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        return value
    return None


def _spans(raw: Any, n_frames: int) -> list[tuple[int, int]]:
    if raw is None:
        return [(0, n_frames - 1)]
    if isinstance(raw, list | tuple) and len(raw) == 2 and all(isinstance(x, int | float) for x in raw):
        raw = [raw]
    out = []
    for span in raw:
        if isinstance(span, int | float):
            span = (span, span)
        a, b = int(span[0]), int(span[1])
        a, b = max(0, min(a, b)), min(n_frames - 1, max(a, b))
        if a <= b:
            out.append((a, b))
    return out


def _box(raw: Any) -> list[float] | None:
    if isinstance(raw, list | tuple) and len(raw) == 4 and all(isinstance(x, int | float) for x in raw):
        return [float(x) for x in raw]
    return None


def parse_reply(text: str, predicates: list[str], n_frames: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The TRS in a reply plus one line per dropped relation. Raises :class:`ParseError` when no JSON
    relation list is found. Predicates are matched spelling-insensitively; unknown ones are dropped."""
    table = {squash(p): p for p in predicates}
    relations = None
    for value in reversed(_json_candidates(text)):  # the final JSON wins (the prompt asks for it last)
        relations = _relations_of(value)
        if relations is not None:
            break
    if relations is None:
        raise ParseError("no JSON relation list in the reply")
    out, dropped = [], []
    for i, r in enumerate(relations):
        try:
            sub, pred, obj = str(r["subject"]).strip(), table.get(squash(r["predicate"])), str(r["object"]).strip()
            if pred is None:
                dropped.append(f"relation {i}: unknown predicate {r['predicate']!r}")
                continue
            spans = _spans(r.get("spans", r.get("span", r.get("frames"))), n_frames)
            boxes = {}
            for f, pair in (r.get("boxes") or {}).items():
                if isinstance(pair, dict):
                    boxes[str(int(f))] = {"subject": _box(pair.get("subject")), "object": _box(pair.get("object"))}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            dropped.append(f"relation {i}: malformed ({type(exc).__name__}: {exc})")
            continue
        out.append({"subject": sub, "predicate": pred, "object": obj, "spans": spans, "boxes": boxes})
    return out, dropped


def expand(trs: list[dict[str, Any]], video: dict[str, Any], ground: bool) -> list[tuple]:
    """Per-frame rows ``(frame, subject, predicate, object, sub_box, obj_box)`` in list order (= rank).

    A box the model gave for that frame wins; else, with ``ground`` (PredCls-style given objects), the
    named object's annotated box in that frame (oracle grounding); else None (matches on labels only)."""
    rows = []
    for r in trs:
        for a, b in r["spans"]:
            for f in range(a, b + 1):
                given = r["boxes"].get(str(f), {})
                sb, ob = given.get("subject"), given.get("object")
                if ground:
                    sb = sb or video["boxes"].get(r["subject"], {}).get(str(f))
                    ob = ob or video["boxes"].get(r["object"], {}).get(str(f))
                rows.append((f, r["subject"], r["predicate"], r["object"], sb, ob))
    return rows


def to_trs(video: dict[str, Any]) -> list[dict[str, Any]]:
    """The annotation as a TRS (runs of consecutive frames merged into spans), e.g. the training target."""
    by_triplet: dict[tuple[str, str, str], list[int]] = {}
    for f, s, p, o in video["relations"]:
        by_triplet.setdefault((s, p, o), []).append(int(f))
    out = []
    for (s, p, o), frames in by_triplet.items():
        frames = sorted(set(frames))
        spans, start = [], frames[0]
        for prev, cur in zip(frames, frames[1:], strict=False):
            if cur != prev + 1:
                spans.append([start, prev])
                start = cur
        spans.append([start, frames[-1]])
        out.append({"subject": s, "predicate": p, "object": o, "spans": spans})
    return out
