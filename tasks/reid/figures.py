"""Procedural identities and their cameras (plain Python: the Blender script builds the meshes).

An identity is a set of body proportions (height, build, leg ratio, head size), clothing colours
(top, bottom, shoes, hair, skin), a top pattern (solid, horizontal or vertical stripes, a front logo),
sleeve and trouser length and accessories (hat, backpack, bag). Cameras: ground views at elevation
0-20 degrees, aerial views at 60-88 (90 is a degenerate look-at), azimuths at random, each view its
own camera id (ground 0..G-1, aerial G..G+A-1).

The ranges and category lists below are the body model's parameter space: the lifting model
(``lifting.py``) regresses exactly these, so they are named once here.
"""

from __future__ import annotations

import colorsys
from typing import Any

import numpy as np

GROUND_ELEVATION = (0.0, 20.0)
AERIAL_ELEVATION = (60.0, 88.0)
NOVEL_ELEVATION = (40.0, 88.0)  # the views 3D-VITAL renders from each lifted training image
CAMERA_DISTANCE = 6.0
SKIN = [(0.95, 0.8, 0.68), (0.82, 0.62, 0.48), (0.6, 0.42, 0.3), (0.38, 0.26, 0.18)]
HAIR = [(0.08, 0.06, 0.05), (0.35, 0.22, 0.1), (0.75, 0.62, 0.35), (0.55, 0.55, 0.55), (0.5, 0.15, 0.07)]
# continuous body parameters and their uniform ranges
BODY: dict[str, tuple[float, float]] = {"height": (1.55, 1.95), "build": (0.8, 1.25), "leg_ratio": (0.44, 0.52),
                                        "head_scale": (0.9, 1.15)}
COLOURS = ("top", "bottom", "shoe", "pattern", "skin", "hair", "hat", "backpack", "bag")
CATEGORIES: dict[str, tuple[str, ...]] = {"pattern": ("solid", "hstripes", "vstripes", "logo"),
                                          "sleeves": ("short", "long"), "lower": ("trousers", "shorts"),
                                          "hair": ("short", "long")}
FLAGS: dict[str, float] = {"hat": 0.3, "backpack": 0.4, "bag": 0.25}  # flag -> probability of having it


def _colour(rng: np.random.Generator) -> list[float]:
    h, s, v = rng.uniform(0, 1), rng.uniform(0.2, 0.95), rng.uniform(0.15, 0.95)
    return [round(c, 4) for c in colorsys.hsv_to_rgb(h, s, v)]


def identity(rng: np.random.Generator) -> dict[str, Any]:
    # the draw order is part of every seeded data set: keep it
    colours = {"top": _colour(rng), "bottom": _colour(rng), "shoe": _colour(rng), "pattern": _colour(rng),
               "skin": list(SKIN[rng.integers(len(SKIN))]), "hair": list(HAIR[rng.integers(len(HAIR))]),
               "hat": _colour(rng), "backpack": _colour(rng), "bag": _colour(rng)}
    body = {k: round(float(rng.uniform(*r)), 4) for k, r in BODY.items()}
    cats = {k: str(rng.choice(list(v))) for k, v in CATEGORIES.items()}
    flags = {k: bool(rng.random() < p) for k, p in FLAGS.items()}
    return {**body, "colours": colours, **cats, **flags}


def camera(rng: np.random.Generator, elevation: tuple[float, float]) -> list[float]:
    return [round(float(rng.uniform(0, 360)), 3), round(float(rng.uniform(*elevation)), 3), CAMERA_DISTANCE]
