"""Annotation loaders (Action Genome pickles, VidVRD JSON, PVSG JSON) and the synthetic fixture.

Every loader returns videos in one plain, JSON-serialisable layout (it becomes ``Sample.target``)::

    {"video_id": str, "dataset": str, "n_frames": int, "frame_names": [str, ...],
     "objects": {name: category},               # name = category, or "category#k" when repeated
     "boxes": {name: {"<frame>": [x1, y1, x2, y2]}},
     "relations": [[frame, subject name, predicate, object name], ...],   # frame = 0..n_frames-1
     "video": path or None}

Frames are the annotated frames in time order (Action Genome: its sampled frames; VidVRD/PVSG: all).
"""

from __future__ import annotations

import json
import pickle
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.data import DatasetError
from harness.safeload import load_pickle
from harness.tasks.dsgg.vocab import ag_objects, ag_predicates, lookup_table, squash

DATASETS = ("action-genome", "vidvrd", "pvsg")


def _frame_number(key: str) -> int:
    stem = key.rsplit("/", 1)[-1].split(".")[0]
    return int(stem) if stem.isdigit() else 0


def _ag_name(raw: str, table: dict[str, int], names: tuple[str, ...], where: str) -> str:
    i = table.get(squash(raw))
    if i is None:
        raise DatasetError(f"{where}: unknown Action Genome name {raw!r}")
    return names[i]


def load_action_genome(data_dir: str | Path, split: str = "test") -> list[dict[str, Any]]:
    """Action Genome ``annotations/person_bbox.pkl`` + ``object_bbox_and_relationship.pkl`` (or both
    in ``data_dir`` itself). Like STTran's test loader: visible objects only; frames without a person box
    or without a visible object are dropped; object boxes are (x, y, w, h) in the pickle -> x1y1x2y2."""
    root = Path(data_dir)
    ann = root / "annotations" if (root / "annotations").is_dir() else root
    files = [ann / "person_bbox.pkl", ann / "object_bbox_and_relationship.pkl"]
    for file in files:
        if not file.exists():
            raise DatasetError(f"{file}: file not found (expected Action Genome annotation pickles)")
    # the annotation pickles are data (dicts of lists, strings and numpy arrays): read them with the
    # allow-list of harness.safeload, so a file whose pickle names a function never runs it
    person, objects = (load_pickle(file) for file in files)
    for file, table in zip(files, (person, objects), strict=True):
        if not isinstance(table, dict):
            raise DatasetError(f"{file}: expected a dict of frame key -> annotation, got {type(table).__name__}")
    try:
        return _action_genome_videos(root, files, person, objects, split)
    except DatasetError:
        raise
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:  # a field of the wrong type
        raise DatasetError(f"{ann}: malformed Action Genome annotation pickles ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0] if str(exc) else ''})") from None


def _action_genome_videos(root: Path, files: list[Path], person: dict[str, Any], objects: dict[str, Any],
                          split: str) -> list[dict[str, Any]]:
    obj_names, pred_names = ag_objects(), ag_predicates()
    obj_table, pred_table = lookup_table(obj_names), lookup_table(pred_names)
    by_video: dict[str, list[str]] = {}
    for key, objs in objects.items():
        if not objs or (objs[0].get("metadata") or {}).get("set", split) != split:
            continue
        by_video.setdefault(key.split("/")[0], []).append(key)
    videos = []
    for vid, keys in sorted(by_video.items()):
        keys.sort(key=_frame_number)
        video: dict[str, Any] = {"video_id": vid, "dataset": "action-genome", "frame_names": [], "objects": {},
                                 "boxes": {}, "relations": [], "video": None}
        for key in keys:
            pbox = person.get(key, {}).get("bbox")
            visible = [o for o in objects[key] if o.get("visible") and o.get("bbox") is not None]
            if pbox is None or len(pbox) == 0 or not visible:
                continue
            f = len(video["frame_names"])
            video["frame_names"].append(key)
            video["objects"]["person"] = "person"
            video["boxes"].setdefault("person", {})[str(f)] = [float(v) for v in list(pbox[0])[:4]]
            for o in visible:
                where = f"{files[1]}[{key}]"
                name = _ag_name(o["class"], obj_table, obj_names, where)
                x, y, w, h = (float(v) for v in o["bbox"])
                video["objects"][name] = name
                video["boxes"].setdefault(name, {})[str(f)] = [x, y, x + w, y + h]
                for r in o.get("attention_relationship") or []:
                    video["relations"].append([f, "person", _ag_name(r, pred_table, pred_names, where), name])
                for r in o.get("spatial_relationship") or []:
                    video["relations"].append([f, name, _ag_name(r, pred_table, pred_names, where), "person"])
                for r in o.get("contacting_relationship") or []:
                    video["relations"].append([f, "person", _ag_name(r, pred_table, pred_names, where), name])
        video["n_frames"] = len(video["frame_names"])
        if video["n_frames"]:
            media = root / "videos" / vid
            video["video"] = str(media) if media.exists() else None
            videos.append(video)
    return videos


def _instance_names(objs: Iterable[tuple[Any, str]]) -> dict[Any, str]:
    """id -> display name: the category, with "#k" (k = 1, 2, ...) when the category repeats."""
    objs = list(objs)
    total: dict[str, int] = {}
    for _, cat in objs:
        total[cat] = total.get(cat, 0) + 1
    seen: dict[str, int] = {}
    out = {}
    for oid, cat in objs:
        seen[cat] = seen.get(cat, 0) + 1
        out[oid] = cat if total[cat] == 1 else f"{cat}#{seen[cat]}"
    return out


def load_vidvrd(data_dir: str | Path, split: str = "test") -> list[dict[str, Any]]:
    """ImageNet-VidVRD per-video JSON files (``<data_dir>/<split>/*.json`` or ``<data_dir>/*.json``):
    ``subject/objects`` (tid, category), ``trajectories`` (per frame: tid + bbox xmin..ymax),
    ``relation_instances`` (subject_tid, predicate, object_tid, begin_fid, end_fid exclusive)."""
    root = Path(data_dir)
    folder = root / split if (root / split).is_dir() else root
    paths = sorted(folder.glob("*.json"))
    if not paths:
        raise DatasetError(f"{folder}: no VidVRD annotation JSON files")
    videos = []
    for path in paths:
        try:
            anno = json.loads(path.read_text(encoding="utf-8"))
            names = _instance_names((so["tid"], so["category"]) for so in anno["subject/objects"])
            n = int(anno.get("frame_count") or len(anno["trajectories"]))
            boxes: dict[str, dict[str, list[float]]] = {v: {} for v in names.values()}
            for f, frame in enumerate(anno["trajectories"]):
                for box in frame:
                    b = box["bbox"]
                    boxes[names[box["tid"]]][str(f)] = [float(b["xmin"]), float(b["ymin"]), float(b["xmax"]),
                                                        float(b["ymax"])]
            relations = [[f, names[r["subject_tid"]], r["predicate"], names[r["object_tid"]]]
                         for r in anno["relation_instances"] for f in range(int(r["begin_fid"]), int(r["end_fid"]))]
        except (KeyError, TypeError, ValueError) as exc:
            raise DatasetError(f"{path}: malformed VidVRD annotation ({exc!r})") from None
        videos.append({"video_id": str(anno.get("video_id", path.stem)), "dataset": "vidvrd", "n_frames": n,
                       "frame_names": [str(i) for i in range(n)],
                       "objects": {names[so["tid"]]: so["category"] for so in anno["subject/objects"]},
                       "boxes": boxes, "relations": relations, "video": None})
    return videos


def load_pvsg(data_dir: str | Path, split: str = "val") -> list[dict[str, Any]]:
    """PVSG ``pvsg.json``: ``split`` -> source -> ids, ``data`` -> videos with ``objects`` (object_id,
    category) and ``relations`` [subject id, object id, predicate, [[start, end], ...]] (end inclusive,
    as OpenPVSG reads it). Masks are not read: objects have no boxes here (ground by name)."""
    root = Path(data_dir)
    path = root / "pvsg.json" if root.is_dir() else root
    if not path.exists():
        raise DatasetError(f"{path}: file not found (expected PVSG pvsg.json)")
    anno = json.loads(path.read_text(encoding="utf-8"))
    try:
        wanted = {v for src in anno["split"].values() for v in src.get(split, [])}
        videos = []
        for v in anno["data"]:
            if v["video_id"] not in wanted:
                continue
            names = _instance_names((o["object_id"], o["category"]) for o in v["objects"])
            n = int((v.get("meta") or {}).get("num_frames") or 1 + max(
                (e for r in v["relations"] for _, e in r[3]), default=0))
            relations = [[f, names[s], p, names[o]] for s, o, p, spans in v["relations"]
                         for a, b in spans for f in range(int(a), min(int(b) + 1, n))]
            videos.append({"video_id": v["video_id"], "dataset": "pvsg", "n_frames": n,
                           "frame_names": [str(i) for i in range(n)],
                           "objects": {names[o["object_id"]]: o["category"] for o in v["objects"]},
                           "boxes": {}, "relations": relations, "video": None})
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise DatasetError(f"{path}: malformed PVSG annotation ({exc!r})") from None
    return videos


# ----------------------------------------------------------------------------------------------
# synthetic Action Genome-like fixture (the offline default and the tests' data)

# plausible (object, attention, spatial, contacting) options, so a frequency prior has signal to learn
_SCENES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "cup/glass/bottle": (("looking_at", "not_looking_at"), ("in_front_of",), ("holding", "drinking_from")),
    "chair": (("not_looking_at",), ("beneath", "behind"), ("sitting_on", "not_contacting")),
    "laptop": (("looking_at",), ("in_front_of",), ("touching", "holding")),
    "phone/camera": (("looking_at", "unsure"), ("in_front_of",), ("holding",)),
    "book": (("looking_at",), ("in_front_of",), ("holding", "touching")),
    "door": (("looking_at", "not_looking_at"), ("in_front_of", "on_the_side_of"), ("touching", "not_contacting")),
    "sofa/couch": (("not_looking_at",), ("beneath",), ("sitting_on", "lying_on")),
    "food": (("looking_at",), ("in_front_of",), ("eating", "holding")),
    "towel": (("not_looking_at", "looking_at"), ("on_the_side_of",), ("holding", "wiping")),
    "bed": (("not_looking_at",), ("beneath",), ("lying_on", "sitting_on")),
}


def synthetic_videos(n: int = 12, seed: int = 0, split: str = "test") -> list[dict[str, Any]]:
    """``n`` small Action Genome-like videos (one person, 1-3 objects, 5-10 annotated frames, relations
    that change half way), deterministic per (seed, split)."""
    rng = random.Random(f"{seed}-{split}")
    videos = []
    cats = sorted(_SCENES)
    for v in range(n):
        n_frames = rng.randint(5, 10)
        chosen = rng.sample(cats, rng.randint(1, 3))
        video: dict[str, Any] = {"video_id": f"SYN{split[:2].upper()}{v:03d}.mp4", "dataset": "action-genome",
                                 "n_frames": n_frames, "frame_names": [f"{f * 12:06d}.png" for f in range(n_frames)],
                                 "objects": {"person": "person", **{c: c for c in chosen}}, "boxes": {},
                                 "relations": [], "video": None}
        px, py = rng.uniform(100, 300), rng.uniform(50, 150)
        start = {c: (rng.uniform(0, 500), rng.uniform(0, 350), rng.uniform(40, 160), rng.uniform(40, 160))
                 for c in chosen}
        switch = n_frames // 2
        picks = {c: [tuple(rng.choice(opts) for opts in _SCENES[c]) for _ in range(2)] for c in chosen}
        for f in range(n_frames):
            video["boxes"].setdefault("person", {})[str(f)] = [round(px + 2 * f, 1), round(py, 1),
                                                              round(px + 2 * f + 150, 1), round(py + 300, 1)]
            for c in chosen:
                x, y, w, h = start[c]
                video["boxes"].setdefault(c, {})[str(f)] = [round(x + 3 * f, 1), round(y, 1), round(x + 3 * f + w, 1),
                                                           round(y + h, 1)]
                att, spa, con = picks[c][0 if f < switch else 1]
                video["relations"] += [[f, "person", att, c], [f, c, spa, "person"], [f, "person", con, c]]
        videos.append(video)
    return videos


def write_action_genome(videos: list[dict[str, Any]], out_dir: str | Path, split: str = "test") -> Path:
    """Write videos as Action Genome annotation pickles (the loader's round trip; used by the tests)."""
    import numpy as np

    out = Path(out_dir) / "annotations"
    out.mkdir(parents=True, exist_ok=True)
    person: dict[str, Any] = {}
    objects: dict[str, Any] = {}
    spatial = set(ag_predicates()[3:9])
    attention = set(ag_predicates()[:3])
    for v in videos:
        for f, fname in enumerate(v["frame_names"]):
            key = f"{v['video_id']}/{fname}"
            person[key] = {"bbox": np.array([v["boxes"]["person"][str(f)]]), "bbox_size": (640, 480)}
            entries = []
            for name in v["objects"]:
                if name == "person" or str(f) not in v["boxes"].get(name, {}):
                    continue
                x1, y1, x2, y2 = v["boxes"][name][str(f)]
                rels = [r for r in v["relations"] if r[0] == f and name in (r[1], r[3])]
                entries.append({
                    "class": name.replace("/", ""), "bbox": (x1, y1, x2 - x1, y2 - y1), "visible": True,
                    "attention_relationship": [r[2] for r in rels if r[2] in attention],
                    "spatial_relationship": [r[2] for r in rels if r[2] in spatial],
                    "contacting_relationship": [r[2] for r in rels if r[2] not in spatial | attention],
                    "metadata": {"tag": key, "set": split},
                })
            objects[key] = entries
    with (out / "person_bbox.pkl").open("wb") as fh:
        pickle.dump(person, fh)
    with (out / "object_bbox_and_relationship.pkl").open("wb") as fh:
        pickle.dump(objects, fh)
    return out
