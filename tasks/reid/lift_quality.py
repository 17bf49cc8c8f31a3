"""When a lift (a single-view reconstruction) counts as failed, and how good a set of lifts is.

This needs the true parameters, so only code that holds them calls it: the task's aggregate (from the
manifest) and the lifting model's own held-out check (its pretraining labels). A backend never does.

A lift is **failed** when its mesh is geometrically wrong, which is what CVCF is meant to catch:
its predicted source camera is more than ``AZIMUTH_FAILURE`` (45) degrees off in azimuth (the mesh
faces the wrong way, so its novel views show the wrong side), it adds or misses a part (hat, backpack
or bag), or its height is off by more than ``HEIGHT_FAILURE`` (0.10 m, about 6 pixels of the 128-pixel
render). Wrong texture (top pattern, sleeve and trouser length, hair length, colours) is not a
failure of the mesh: it is the hallucination VAAS is meant to discount, and is reported as the
attribute accuracy over all seven categorical attributes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.tasks.reid.body_codec import azimuth_error
from harness.tasks.reid.figures import BODY, CATEGORIES, FLAGS

AZIMUTH_FAILURE = 45.0
HEIGHT_FAILURE = 0.10
ATTRIBUTES = (*CATEGORIES, *FLAGS)
PARTS = tuple(FLAGS)  # the attributes that change the mesh's geometry


def compact(params: dict[str, Any], cam: Sequence[float]) -> dict[str, Any]:
    """What a fit record keeps of one prediction: the camera, the body, the attributes, two colours."""
    out: dict[str, Any] = {"azimuth": round(float(cam[0]), 2), "elevation": round(float(cam[1]), 2)}
    out.update({k: params[k] for k in (*BODY, *ATTRIBUTES)})
    out.update({k: params["colours"][k] for k in ("top", "bottom")})
    return out


def failed(pred: dict[str, Any], truth: dict[str, Any], true_azimuth: float) -> bool:
    """``pred`` as :func:`compact` writes it (or full parameters plus ``azimuth``)."""
    if azimuth_error(float(pred["azimuth"]), float(true_azimuth)) > AZIMUTH_FAILURE:
        return True
    if abs(float(pred["height"]) - float(truth["height"])) > HEIGHT_FAILURE:
        return True
    return any(pred[k] != truth[k] for k in PARTS)


def summarise(preds: Sequence[dict[str, Any]], truths: Sequence[dict[str, Any]],
              azimuths: Sequence[float]) -> dict[str, Any]:
    """Accuracy per attribute and on average, azimuth and height errors, and the share failed."""
    if not preds:
        return {}
    acc = {k: float(np.mean([p[k] == t[k] for p, t in zip(preds, truths, strict=True)])) for k in ATTRIBUTES}
    # chance: always answering the commonest value among these truths (an upper bound on any constant guess)
    chance = {k: max(Counter(str(t[k]) for t in truths).values()) / len(truths) for k in ATTRIBUTES}
    az = [azimuth_error(float(p["azimuth"]), float(a)) for p, a in zip(preds, azimuths, strict=True)]
    top = [np.abs(np.subtract(p["top"] if "top" in p else p["colours"]["top"], t["colours"]["top"])).mean()
           for p, t in zip(preds, truths, strict=True)]
    return {"attribute_accuracy": float(np.mean(list(acc.values()))), "accuracy": acc,
            "chance_attribute_accuracy": float(np.mean(list(chance.values()))), "chance_accuracy": chance,
            "azimuth_error_median": float(np.median(az)),
            "azimuth_within_45": float(np.mean([e <= AZIMUTH_FAILURE for e in az])),
            "height_error_mean": float(np.mean([abs(p["height"] - t["height"]) for p, t in zip(preds, truths,
                                                                                                  strict=True)])),
            "top_colour_error_mean": float(np.mean(top)),
            "failed_share": float(np.mean([failed(p, t, a) for p, t, a in zip(preds, truths, azimuths,
                                                                                strict=True)]))}


def removal_rates(is_failed: Sequence[bool] | np.ndarray, kept: Sequence[bool] | np.ndarray
                  ) -> tuple[float | None, float | None]:
    """(share of failed lifts the filter removed, share of good ones it removed); None where none."""
    f = np.asarray(is_failed, dtype=bool)
    removed = ~np.asarray(kept, dtype=bool)
    return (float(removed[f].mean()) if f.any() else None, float(removed[~f].mean()) if (~f).any() else None)
