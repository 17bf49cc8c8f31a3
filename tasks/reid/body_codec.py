"""The lifting model's targets: a procedural identity and its source camera as flat vectors, and back.

Layout of one target (what ``lifting.py``'s heads predict):

- ``body`` [4]: height, build, leg ratio, head scale, each mapped to [0, 1] over its range;
- ``colours`` [27]: the 9 colours' RGB, with ``colour_mask`` [27] saying which of them the image can
  show (the stripe/logo colour only on a patterned top, hat/backpack/bag colours only when worn);
- ``cats``: the index of pattern, sleeves, lower and hair in ``figures.CATEGORIES``;
- ``flags`` [3]: hat, backpack, bag;
- ``camera`` [3]: sin and cos of the azimuth, the elevation mapped to [0, 1] over the ground range.

:func:`decode` turns one prediction back into the body model's parameters (clamped to its ranges,
as a parametric body prior does) and a camera ``[azimuth, elevation, distance]``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from harness.tasks.reid.figures import BODY, CAMERA_DISTANCE, CATEGORIES, COLOURS, FLAGS, GROUND_ELEVATION

N_BODY, N_COLOURS, N_FLAGS, N_CAMERA = len(BODY), 3 * len(COLOURS), len(FLAGS), 3
# colours only drawn on a figure that has the part; skin is always visible (face, hands)
_COLOUR_NEEDS = {"pattern": lambda p: p["pattern"] != "solid", "hat": lambda p: bool(p["hat"]),
                 "backpack": lambda p: bool(p["backpack"]), "bag": lambda p: bool(p["bag"])}


def encode(params: dict[str, Any], cam: list[float]) -> dict[str, Any]:
    body = np.asarray([(params[k] - lo) / (hi - lo) for k, (lo, hi) in BODY.items()], dtype=np.float32)
    colours = np.asarray([c for k in COLOURS for c in params["colours"][k]], dtype=np.float32)
    mask = np.repeat(np.asarray([_COLOUR_NEEDS.get(k, lambda p: True)(params) for k in COLOURS],
                                dtype=np.float32), 3)
    cats = {k: CATEGORIES[k].index(params[k]) for k in CATEGORIES}
    flags = np.asarray([float(params[k]) for k in FLAGS], dtype=np.float32)
    az = math.radians(cam[0])
    lo, hi = GROUND_ELEVATION
    camera = np.asarray([math.sin(az), math.cos(az), (cam[1] - lo) / (hi - lo)], dtype=np.float32)
    return {"body": body, "colours": colours, "colour_mask": mask, "cats": cats, "flags": flags, "camera": camera}


def decode(body: np.ndarray, colours: np.ndarray, cats: dict[str, int], flags: np.ndarray,
           camera: np.ndarray) -> tuple[dict[str, Any], list[float]]:
    """(identity parameters, [azimuth deg, elevation deg, distance]) of one prediction."""
    params: dict[str, Any] = {}
    for (k, (lo, hi)), v in zip(BODY.items(), np.clip(body, 0.0, 1.0), strict=True):
        params[k] = round(float(lo + v * (hi - lo)), 4)
    rgb = np.clip(colours, 0.0, 1.0).reshape(len(COLOURS), 3)
    params["colours"] = {k: [round(float(c), 4) for c in rgb[i]] for i, k in enumerate(COLOURS)}
    for k, values in CATEGORIES.items():
        params[k] = values[int(cats[k])]
    for k, v in zip(FLAGS, flags, strict=True):
        params[k] = bool(v > 0.5)
    az = math.degrees(math.atan2(float(camera[0]), float(camera[1]))) % 360.0
    lo, hi = GROUND_ELEVATION
    el = lo + float(np.clip(camera[2], 0.0, 1.0)) * (hi - lo)
    return params, [round(az, 3), round(el, 3), CAMERA_DISTANCE]


def azimuth_error(a: float, b: float) -> float:
    """Absolute angle between two azimuths in degrees, in [0, 180]."""
    d = abs(a - b) % 360.0
    return min(d, 360.0 - d)
