"""3DCodeBench items: the shipped offline reference set, or the public benchmark from a folder.

Offline default: ``prompts.jsonl`` + ``references/*.py`` (procedural objects written for this
project, MIT like the repo), whose geometry and views come from running them through the same
executor as the models' code.

Public benchmark (``-T data_dir=PATH``, a download of HF ``YipengGao/3DCode`` folder
``3DCodeBench``): one folder per instance, ``<Category>_seed<k>/`` holding the reference script
(``<folder>.py`` or ``factory.py``), ``prompt_description.txt``, ``prompt_instruction.txt`` and, if
present, the reference views (``images/*.png``, or ``Image_005/015/025/035.png`` in the folder).
The repository's own layout ``benchmark/categories/<Category>_seed0/`` is the same. A folder
missing its prompt or script is kept as a sample with ``data_error`` set (scored as unscored with
that reason), never fatal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.data import DatasetError, read_jsonl, require

HERE = Path(__file__).parent
OFFLINE_PROMPTS = HERE / "prompts.jsonl"
REFERENCE_DIR = HERE / "references"
VIEW_NAMES = ("Image_005.png", "Image_015.png", "Image_025.png", "Image_035.png")


@dataclass
class Item:
    id: str
    category: str
    description: str
    instruction: str = ""
    script: str = ""  # reference script source
    script_path: str = ""
    reference_images: list[str] = field(default_factory=list)  # given views (public data)
    expected_parts: int | None = None
    expected_floating: int | None = None
    data_error: str | None = None


def load_offline() -> list[Item]:
    items = []
    for index, row in read_jsonl(OFFLINE_PROMPTS):
        where = f"{OFFLINE_PROMPTS}:{index + 1}"
        script_path = REFERENCE_DIR / require(row, "script", where)
        if not script_path.is_file():
            raise DatasetError(f"{where}: field 'script': no file {script_path}")
        items.append(
            Item(
                id=require(row, "id", where),
                category=require(row, "category", where),
                description=require(row, "description", where),
                script=script_path.read_text(),
                script_path=str(script_path),
                expected_parts=row.get("parts"),
                expected_floating=row.get("floating"),
            )  # fmt: skip
        )
    return items


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8", errors="replace").strip() if path.is_file() else None


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


def reference_views(folder: Path) -> list[str]:
    """The instance's reference views: ``images/*`` sorted (the reference's image-to-3D input), else
    the four ``Image_0x5.png`` turntable frames in the folder itself."""
    images = folder / "images"
    if images.is_dir():
        found = sorted(p for p in images.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if found:
            return [str(p) for p in found]
    views = [folder / v for v in VIEW_NAMES]
    return [str(v) for v in views] if all(v.is_file() for v in views) else []


def load_public(data_dir: str | Path) -> list[Item]:
    root = Path(data_dir)
    if not root.is_dir():
        raise DatasetError(f"{root}: no such folder (expected the benchmark's per-instance folders)")
    folders = sorted(p for p in root.iterdir() if p.is_dir() and (p / "prompt_description.txt").exists()
                     or p.is_dir() and any(p.glob("*.py")))  # fmt: skip
    if not folders:
        raise DatasetError(f"{root}: no instance folders with prompt_description.txt or a .py script")
    items = []
    for folder in folders:
        category = re.sub(r"_seed\d+$", "", folder.name)
        description = _read(folder / "prompt_description.txt")
        instruction = _read(folder / "prompt_instruction.txt") or ""
        script_path = next((p for p in (folder / f"{folder.name}.py", folder / "factory.py") if p.is_file()), None)
        item = Item(id=folder.name, category=category, description=description or instruction, instruction=instruction)
        if script_path is not None:
            item.script, item.script_path = script_path.read_text(encoding="utf-8", errors="replace"), str(script_path)
        item.reference_images = reference_views(folder)
        if not item.description:
            item.data_error = f"{folder}: no prompt_description.txt or prompt_instruction.txt"
        elif script_path is None and not item.reference_images:
            item.data_error = f"{folder}: no reference script ({folder.name}.py / factory.py) and no reference views"
        items.append(item)
    return items
