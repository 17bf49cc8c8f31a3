"""Loaders: PartVerse-QA held-out queries, PointLLM Objaverse captions, 3DCoMPaT-GrIn, as Samples.

All three use PointLLM's conversation rows ``{object_id, conversations: [{from: human, value:
"<point>\\n..."}, {from: gpt, value: ...}], meta?}`` and a folder of ``<object_id>_<N>.npy`` clouds.
A malformed row does not stop the load: it becomes a sample carrying ``metadata["input_error"]``,
which ``prompt`` raises, so the runner records it as that sample's error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.data import DatasetError, read_jsonl
from harness.types import Message, Part, Sample

POINT_TOKEN = re.compile(r"\s*<point>\s*")
# 3DCoMPaT-GrIn answers mark parts as <p>seat frame</p>[SEG]; language-only scoring keeps the words
# (3D-PLOT-LLM's data_tools/compat_grin/02_convert_anno.py does the same).
_GRIN_PART = re.compile(r"<p>\s*(.*?)\s*</p>(?:\[SEG\])?", re.IGNORECASE)
_GRIN_SEG = re.compile(r"\[SEG\]", re.IGNORECASE)
# Objaverse captioning prompts of PointLLM's eval_objaverse.py; the papers use index 2.
OBJAVERSE_PROMPTS = ("What is this?", "This is an object of ", "Caption this 3D model in detail.")


@dataclass(frozen=True, slots=True)
class CloudSource:
    """Where the point clouds (and optional K=16 partition packs and meshes) of a data set are."""

    points_dir: Path
    packs_dir: Path | None = None
    num_points: int = 8192
    mesh_dir: Path | None = None
    MESH_SUFFIXES = (".glb", ".obj", ".ply")

    def cloud(self, object_id: str) -> Path:
        return self.points_dir / f"{object_id}_{self.num_points}.npy"

    def pack(self, object_id: str) -> Path | None:
        if self.packs_dir is None:
            return None
        path = self.packs_dir / f"{object_id}.pack.npz"
        return path if path.exists() else None

    def part(self, object_id: str) -> Part:
        options: dict[str, Any] = {"format": "xyz+rgb", "num_points": self.num_points, "object_id": object_id}
        pack = self.pack(object_id)
        if pack is not None:
            options["pack"] = str(pack)
        return Part("points", path=str(self.cloud(object_id)), options=options)

    def mesh(self, object_id: str) -> Part:
        """``<mesh_dir>/<object_id>.{glb,obj,ply}`` (PartVerse's source meshes) for mesh-capable models."""
        assert self.mesh_dir is not None
        found = [self.mesh_dir / f"{object_id}{s}" for s in self.MESH_SUFFIXES]
        path = next((p for p in found if p.exists()), found[0])
        return Part("mesh", path=str(path), options={"object_id": object_id})

    def parts(self, object_id: str) -> list[Part]:
        return [self.part(object_id)] + ([self.mesh(object_id)] if self.mesh_dir is not None else [])


def read_rows(path: str | Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) pairs from a JSON array (the released files), ``{"results": [...]}`` or JSONL."""
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: file not found")
    if path.suffix == ".jsonl":
        return [(f"{path}:{lineno}", row) for lineno, row in read_jsonl(path)]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        data = data["results"]
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON array of rows, got {type(data).__name__}")
    return [(f"{path}[{i}]", row) for i, row in enumerate(data)]


def strip_point_token(text: str) -> str:
    return POINT_TOKEN.sub(" ", text).strip()


def strip_grin_markup(text: str) -> str:
    previous = None
    while text != previous:
        previous = text
        text = _GRIN_SEG.sub("", _GRIN_PART.sub(r"\1", text))
    return text


def _turns(row: dict[str, Any], where: str) -> tuple[str, str]:
    conv = row.get("conversations")
    if not isinstance(conv, list) or len(conv) < 2:
        raise DatasetError(f"{where}: field 'conversations' should hold a human and a gpt turn")
    human, gpt = conv[0], conv[1]
    if not isinstance(human, dict) or not isinstance(gpt, dict) or gpt.get("from") != "gpt":
        raise DatasetError(f"{where}: conversations[1] should be the gpt turn")
    if not isinstance(human.get("value"), str) or not isinstance(gpt.get("value"), str):
        raise DatasetError(f"{where}: conversation turns need a string 'value'")
    return human["value"], gpt["value"]


def _object_id(row: dict[str, Any], where: str) -> str:
    oid = row.get("object_id", row.get("id"))
    if not isinstance(oid, str) or not oid:
        raise DatasetError(f"{where}: missing field 'object_id'")
    return oid


def bad_sample(sample_id: str, error: str) -> Sample:
    return Sample(id=sample_id, messages=[Message.text("user", "")], metadata={"input_error": error})


def unique_ids(samples: Iterable[Sample]) -> list[Sample]:
    """Sample ids must be unique in a run: repeated keys get ``#2``, ``#3`` suffixes in file order."""
    seen: dict[str, int] = {}
    out = []
    for s in samples:
        n = seen.get(s.id, 0) + 1
        seen[s.id] = n
        if n > 1:
            s.id = f"{s.id}#{n}"
        out.append(s)
    return out


# ---- PartVerse-QA -------------------------------------------------------------------------------
def partverse_sample(row: dict[str, Any], where: str, kind: str, clouds: CloudSource) -> Sample:
    """One held-out query; ``kind`` is ``c2s`` (caption -> slots) or ``s2c`` (slots -> caption).

    The sample id is the released scorer's matching key: object, semantic part, caption source."""
    try:
        oid = _object_id(row, where)
        meta = row.get("meta") or {}
        if not isinstance(meta, dict):
            raise DatasetError(f"{where}: field 'meta' should be an object")
        human, gpt = _turns(row, where)
        ids = meta.get("bcp_group_ids")
        if not isinstance(ids, list) or not all(isinstance(g, int) and not isinstance(g, bool) for g in ids):
            raise DatasetError(f"{where}: field 'meta.bcp_group_ids' should be a list of integers")
        base = meta.get("part_index_base", 0)
        if not isinstance(base, int):
            raise DatasetError(f"{where}: field 'meta.part_index_base' should be an integer")
    except DatasetError as exc:
        return bad_sample(f"{where}", str(exc))
    sid = "/".join(str(x) for x in (oid, meta.get("semantic_part_id"), meta.get("caption_source")) if x is not None)
    metadata = {
        "object_id": oid, "task": kind, "conversation_type": row.get("conversation_type", ""),
        "bcp_group_ids": ids, "part_index_base": base,
        **{k: meta[k] for k in ("semantic_part_id", "caption_source", "caption_view_key", "union_iou") if k in meta},
    }
    target: Any = gpt if kind == "s2c" else {"slots_text": gpt, "bcp_group_ids": ids}
    message = Message("user", [*clouds.parts(oid), Part("text", strip_point_token(human))])
    return Sample(id=sid or oid, messages=[message], target=target, metadata=metadata)


# ---- whole-object captions (PointLLM Objaverse val 200) and 3DCoMPaT-GrIn ----------------------------
def objaverse_sample(row: dict[str, Any], where: str, clouds: CloudSource, prompt_index: int) -> Sample:
    try:
        oid = _object_id(row, where)
        _, gpt = _turns(row, where)
    except DatasetError as exc:
        return bad_sample(where, str(exc))
    # the reference asks every object the same prompt, not the annotation's human turn
    message = Message("user", [*clouds.parts(oid), Part("text", OBJAVERSE_PROMPTS[prompt_index])])
    return Sample(id=oid, messages=[message], target=gpt, metadata={"object_id": oid, "task": "caption"})


def grin_sample(row: dict[str, Any], where: str, clouds: CloudSource) -> Sample:
    try:
        oid = _object_id(row, where)
        human, gpt = _turns(row, where)
    except DatasetError as exc:
        return bad_sample(where, str(exc))
    ctype = str(row.get("conversation_type", ""))
    parts = row.get("parts") or (row.get("meta") or {}).get("parts") or []
    message = Message("user", [*clouds.parts(oid), Part("text", strip_grin_markup(strip_point_token(human)))])
    return Sample(id=oid, messages=[message], target=strip_grin_markup(gpt),
                  metadata={"object_id": oid, "task": "grin", "conversation_type": ctype, "parts": parts})
