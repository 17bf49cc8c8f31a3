"""The released aerial-ground ReID sets, read in their own folder layouts (not shipped: bring them).

- AG-ReID (``root/AG-ReID/`` or ``root/``): ``bounding_box_train``; A2G query ``query_all_c0`` with gallery
  ``bounding_box_test_all_c3``; G2A query ``query_all_c3`` with gallery ``bounding_box_test_all_c0``.
- AG-ReID.v2 (``root/``): ``train_all``, ``query``, ``gallery`` (JPEGs searched recursively); the protocol's
  split is the folder the caller names (``query``/``gallery``), as in the released loaders.

File names follow the datasets' ``P<a>T<b>A<c>...C<cam>F<frame>`` convention: the identity is the
integer of the three concatenated digit groups, the camera the ``C`` number; camera 0 is the aerial
(UAV) camera. Single-view training keeps the ground images of the train folder only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

PID = re.compile(r"P([-\d]+)T([-\d]+)A([-\d]+)")
CAM = re.compile(r"C([-\d]+)F([-\d]+)")
AERIAL_CAMS = frozenset({0})
LAYOUTS: dict[str, dict[str, Any]] = {
    "agreid": {"train": "bounding_box_train", "A2G": ("query_all_c0", "bounding_box_test_all_c3"),
               "G2A": ("query_all_c3", "bounding_box_test_all_c0")},
    "agreid2": {"train": "train_all", "A2G": ("query", "gallery"), "G2A": ("query", "gallery")},
}


class DatasetMissing(FileNotFoundError):
    pass


def parse_name(name: str) -> tuple[int, int]:
    pid, cam = PID.search(name), CAM.search(name)
    if pid is None or cam is None:
        raise ValueError(f"{name!r} does not follow the P..T..A..C..F.. naming of AG-ReID")
    return int("".join(pid.groups())), int(cam.group(1))


def dataset_root(kind: str, root: str | None) -> Path:
    if kind not in LAYOUTS:
        raise ValueError(f"unknown dataset {kind!r}; choose synth, agreid or agreid2")
    if not root:
        raise DatasetMissing(f"{kind} needs -T root=DIR (the dataset is not shipped)")
    base = Path(root).expanduser()
    if kind == "agreid" and (base / "AG-ReID").is_dir():
        base = base / "AG-ReID"
    needed = [LAYOUTS[kind]["train"], *LAYOUTS[kind]["A2G"], *LAYOUTS[kind]["G2A"]]
    absent = [d for d in needed if not (base / d).is_dir()]
    if absent:
        raise DatasetMissing(f"{kind} not found at {base}: missing folder(s) {', '.join(sorted(set(absent)))}")
    return base


def read_folder(folder: Path, role: str, split: str) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(folder.rglob("*.jpg")):
        pid, cam = parse_name(path.name)
        if pid == -1:  # junk boxes, as the released loaders skip them
            continue
        rows.append({"path": str(path), "pid": pid, "camid": cam, "role": role, "split": split,
                     "view": "aerial" if cam in AERIAL_CAMS else "ground"})
    return rows


def load_real(kind: str, root: str | None, protocol: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train rows: ground images only, test rows: query + gallery) of a released dataset."""
    base = dataset_root(kind, root)
    layout = LAYOUTS[kind]
    train = [r for r in read_folder(base / layout["train"], "train", "train") if r["view"] == "ground"]
    q_dir, g_dir = layout[protocol]
    test = read_folder(base / q_dir, "query", "test") + read_folder(base / g_dir, "gallery", "test")
    if kind == "agreid2":  # one query folder for both directions: keep the protocol's view family
        want = "aerial" if protocol == "A2G" else "ground"
        test = [r for r in test if (r["role"] == "query") == (r["view"] == want)]
    return train, test
