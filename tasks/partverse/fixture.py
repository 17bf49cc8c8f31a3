"""A small synthetic PartVerse-QA-shaped data set, generated (deterministically) for tests and offline use.

Four objects (chair, table, lamp, mug) are built from primitive parts; each gets an 8192-point
xyz+rgb cloud in PointLLM's ``<oid>_8192.npy`` format, a K=16 region partition (k-means on xyz, a
stand-in for 3D-PLOT-LLM's Point-BERT patch partition) and, per semantic part, the regions that
mostly hold its points as ``meta.bcp_group_ids``. Captions are hand-written. Files, in the layouts
the loaders read:

    objaverse_data/<oid>_8192.npy                   clouds
    packs_k16/<oid>.pack.npz                        partition packs: patch_xyz (512 farthest-point
                                                    centres of the normalised cloud), patch_r16
                                                    (no Point-BERT features: patch_feat is absent)
    eval_c2s.json, eval_s2c.json                    PartVerse-QA held-out rows (released schema)
    PointLLM_brief_description_val_200_GT.json      Objaverse captioning rows (PointLLM schema)
    compat_grin.json                                3DCoMPaT-GrIn rows (raw schema, <p>..</p>[SEG])

The numbers it gives mean nothing about any model; it only exercises loading and scoring.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.tasks.partverse.points import normalise

VERSION = "2"
NUM_POINTS = 8192
K = 16


@dataclass(frozen=True, slots=True)
class Box:
    centre: tuple[float, float, float]
    size: tuple[float, float, float]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(self.centre) + (rng.random((n, 3)) - 0.5) * np.asarray(self.size)

    @property
    def volume(self) -> float:
        return float(np.prod(self.size))


@dataclass(frozen=True, slots=True)
class Cylinder:  # y-up; radius may taper from bottom to top
    centre: tuple[float, float, float]
    radius: float
    height: float
    top_radius: float | None = None

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        t = rng.random(n)
        r_top = self.radius if self.top_radius is None else self.top_radius
        radius = (self.radius + (r_top - self.radius) * t) * np.sqrt(rng.random(n))
        angle = rng.random(n) * 2 * np.pi
        c = np.asarray(self.centre)
        return np.stack([c[0] + radius * np.cos(angle), c[1] + (t - 0.5) * self.height,
                         c[2] + radius * np.sin(angle)], axis=1)

    @property
    def volume(self) -> float:
        r2 = self.radius if self.top_radius is None else self.top_radius
        return float(np.pi * self.height * (self.radius**2 + self.radius * r2 + r2**2) / 3)


@dataclass(frozen=True, slots=True)
class PartSpec:
    name: str
    shapes: tuple[Box | Cylinder, ...]
    colour: tuple[float, float, float]
    short: str
    long: str


def _legs(xs: float, zs: float, y: float, h: float, w: float) -> tuple[Box, ...]:
    return tuple(Box((sx * xs, y, sz * zs), (w, h, w)) for sx in (-1, 1) for sz in (-1, 1))


OBJECTS: dict[str, tuple[str, tuple[PartSpec, ...]]] = {
    "fixture_chair": ("A red wooden chair with a tall slatted back and four straight legs.", (
        PartSpec("seat", (Box((0, 0.45, 0), (0.5, 0.06, 0.5)),), (0.8, 0.1, 0.1),
                 "a flat square red seat", "the flat square seat of the chair, painted red"),
        PartSpec("back", (Box((0, 0.8, -0.22), (0.5, 0.65, 0.06)),), (0.7, 0.15, 0.1),
                 "a tall red backrest", "a tall upright backrest rising from the rear of the seat"),
        PartSpec("legs", _legs(0.21, 0.21, 0.21, 0.42, 0.05), (0.35, 0.2, 0.1),
                 "four straight brown legs", "four thin straight wooden legs under the seat"),
    )),
    "fixture_table": ("A low round-cornered wooden coffee table with four thick legs.", (
        PartSpec("top", (Box((0, 0.42, 0), (1.2, 0.06, 0.7)),), (0.6, 0.4, 0.2),
                 "a wide rectangular wooden tabletop", "a wide flat rectangular top made of light wood"),
        PartSpec("legs", _legs(0.52, 0.28, 0.2, 0.4, 0.08), (0.3, 0.2, 0.1),
                 "four thick dark legs", "four thick dark wooden legs at the corners of the top"),
    )),
    "fixture_lamp": ("A desk lamp with a heavy round base, a thin metal pole and a cone-shaped shade.", (
        PartSpec("base", (Cylinder((0, 0.03, 0), 0.25, 0.06),), (0.1, 0.1, 0.1),
                 "a heavy round black base", "a heavy flat round base in black metal"),
        PartSpec("pole", (Cylinder((0, 0.5, 0), 0.025, 0.9),), (0.7, 0.7, 0.7),
                 "a thin silver pole", "a thin vertical silver metal pole"),
        PartSpec("shade", (Cylinder((0, 1.05, 0), 0.3, 0.3, top_radius=0.1),), (0.95, 0.9, 0.6),
                 "a cone-shaped cream lampshade", "a cream fabric lampshade shaped like a cone"),
    )),
    "fixture_mug": ("A blue ceramic mug with a curved handle on one side.", (
        PartSpec("body", (Cylinder((0, 0.25, 0), 0.2, 0.5),), (0.1, 0.3, 0.8),
                 "a blue cylindrical body", "a tall blue cylindrical ceramic body"),
        PartSpec("handle", (Box((0.28, 0.25, 0), (0.12, 0.3, 0.05)),), (0.1, 0.25, 0.7),
                 "a curved blue handle", "a curved handle attached to the side of the mug"),
    )),
}
GRIN = {
    "fixture_chair": ("What parts does this object have? Describe them.",
                      "This chair has a <p>seat</p>[SEG], a <p>back</p>[SEG] and four <p>legs</p>[SEG]."),
    "fixture_lamp": ("Describe the parts of this object.",
                     "A lamp with a round <p>base</p>[SEG], a thin <p>pole</p>[SEG] and a <p>shade</p>[SEG]."),
}


def build_cloud(parts: tuple[PartSpec, ...], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(cloud (N, 6) float32, part index per point)."""
    volumes = np.array([sum(s.volume for s in p.shapes) for p in parts])
    # at least 5% of the points per part, so thin parts (poles, legs) are visible
    share = np.maximum(volumes / volumes.sum(), 0.05)
    counts = np.floor(share / share.sum() * NUM_POINTS).astype(int)
    counts[0] += NUM_POINTS - counts.sum()
    xyz, rgb, label = [], [], []
    for i, (part, n) in enumerate(zip(parts, counts, strict=True)):
        shape_vol = np.array([s.volume for s in part.shapes])
        per_shape = np.floor(shape_vol / shape_vol.sum() * n).astype(int)
        per_shape[0] += n - per_shape.sum()
        for shape, m in zip(part.shapes, per_shape, strict=True):
            xyz.append(shape.sample(int(m), rng))
        colour = np.clip(np.asarray(part.colour) + rng.normal(0, 0.03, (n, 3)), 0, 1)
        rgb.append(colour)
        label.append(np.full(n, i))
    cloud = np.concatenate([np.concatenate(xyz), np.concatenate(rgb)], axis=1).astype(np.float32)
    return cloud, np.concatenate(label)


def farthest_points(xyz: np.ndarray, k: int) -> np.ndarray:
    """Indices of k farthest-point samples starting from point 0."""
    chosen = [0]
    dist = np.linalg.norm(xyz - xyz[0], axis=1)
    for _ in range(1, k):
        chosen.append(int(dist.argmax()))
        dist = np.minimum(dist, np.linalg.norm(xyz - xyz[chosen[-1]], axis=1))
    return np.asarray(chosen)


def kmeans_regions(xyz: np.ndarray, k: int = K, iterations: int = 15) -> np.ndarray:
    """Region id per point: k-means seeded by farthest-point sampling (deterministic)."""
    c = xyz[farthest_points(xyz, k)]
    for _ in range(iterations):
        assign = ((xyz[:, None, :] - c[None]) ** 2).sum(-1).argmin(1)
        c = np.stack([xyz[assign == j].mean(0) if (assign == j).any() else c[j] for j in range(k)])
    return ((xyz[:, None, :] - c[None]) ** 2).sum(-1).argmin(1)


def part_groups(regions: np.ndarray, labels: np.ndarray, n_parts: int) -> list[list[int]]:
    """Per part, the regions where it holds the majority of points (or its largest region)."""
    out = []
    for p in range(n_parts):
        mine = []
        for r in range(K):
            in_r = labels[regions == r]
            if len(in_r) and (in_r == p).mean() > 0.5:
                mine.append(r)
        if not mine:
            mine = [int(np.bincount(regions[labels == p], minlength=K).argmax())]
        out.append(sorted(mine))
    return out


def _c2s_row(oid: str, sem: int, caption: str, source: str, groups: list[int]) -> dict:
    answer = ",".join(f"<part_{g}>" for g in groups)
    return {"object_id": oid, "conversation_type": "partverse_caption2slots",
            "conversations": [{"from": "human", "value": f"<point>\nText: \"{caption}\" "
                               "Output only matching <part_n> tokens, comma-separated."},
                              {"from": "gpt", "value": answer}],
            "meta": {"bcp_k": K, "semantic_part_id": sem, "bcp_group_ids": groups, "caption_source": source,
                     "caption_view_key": str(sem), "part_index_base": 0, "task": "caption2slots"}}


def _s2c_row(oid: str, sem: int, caption: str, groups: list[int]) -> dict:
    toks = [f"<part_{g}>" for g in groups]
    phrase = toks[0] if len(toks) == 1 else (
        f"{toks[0]} and {toks[1]}" if len(toks) == 2 else ", ".join(toks[:-1]) + f", and {toks[-1]}")
    return {"object_id": oid, "conversation_type": "partverse_slots2caption",
            "conversations": [{"from": "human", "value": f"<point>\nDescribe region {phrase} in one short sentence."},
                              {"from": "gpt", "value": caption}],
            "meta": {"bcp_k": K, "semantic_part_id": sem, "bcp_group_ids": groups, "caption_source": "short",
                     "caption_view_key": str(sem), "part_index_base": 0, "task": "slots2caption"}}


def generate(root: str | Path) -> Path:
    root = Path(root)
    (root / "objaverse_data").mkdir(parents=True, exist_ok=True)
    (root / "packs_k16").mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    c2s, s2c, captions, grin = [], [], [], []
    for oid, (caption, parts) in OBJECTS.items():
        cloud, labels = build_cloud(parts, rng)
        np.save(root / "objaverse_data" / f"{oid}_{NUM_POINTS}.npy", cloud)
        regions = kmeans_regions(cloud[:, :3])
        groups = part_groups(regions, labels, len(parts))
        centres = farthest_points(cloud[:, :3], 512)
        np.savez(root / "packs_k16" / f"{oid}.pack.npz", patch_xyz=normalise(cloud[centres, :3]).astype(np.float32),
                 patch_r16=regions[centres].astype(np.int32))
        for sem, (part, g) in enumerate(zip(parts, groups, strict=True)):
            c2s.append(_c2s_row(oid, sem, part.short, "short", g))
            c2s.append(_c2s_row(oid, sem, part.long, "long", g))
        s2c.append(_s2c_row(oid, 0, parts[0].short, groups[0]))
        captions.append({"object_id": oid, "conversation_type": "simple_description",
                         "conversations": [{"from": "human", "value": "<point>\nCaption this 3D model in detail."},
                                           {"from": "gpt", "value": caption}]})
        if oid in GRIN:
            question, answer = GRIN[oid]
            grin.append({"id": oid, "conversations": [{"from": "human", "value": f"<point>\n{question}"},
                                                      {"from": "gpt", "value": answer}],
                         "parts": [p.name for p in parts]})
    for name, rows in (("eval_c2s.json", c2s), ("eval_s2c.json", s2c),
                       ("PointLLM_brief_description_val_200_GT.json", captions), ("compat_grin.json", grin)):
        (root / name).write_text(json.dumps(rows, indent=1))
    (root / "FIXTURE_VERSION").write_text(VERSION)
    return root


def default_root() -> Path:
    cache = Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache" / "harness"))
    return cache / "partverse" / f"fixture-v{VERSION}"


def ensure_fixture(root: str | Path | None = None) -> Path:
    """The generated fixture folder (generated on first use, ~1 s)."""
    root = Path(root) if root else default_root()
    marker = root / "FIXTURE_VERSION"
    if marker.exists() and marker.read_text() == VERSION:
        return root
    import shutil

    tmp = root.with_name(f"{root.name}.tmp{os.getpid()}")
    generate(tmp)
    if root.exists() and not marker.exists():
        shutil.rmtree(root, ignore_errors=True)  # an interrupted or older generation
    try:
        tmp.rename(root)
    except OSError:  # another process finished first: its copy is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return root
