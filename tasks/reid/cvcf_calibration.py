"""The CVCF threshold, measured on the lifting model's own held-out pretraining figures.

Each held-out render is lifted, the predicted mesh re-rendered from the predicted camera, and the
consistency error (``consistency.py``) computed against the render, as CVCF does at fit time. Those
figures' true parameters are the lifting model's own labels, so which lifts failed is known
(``lift_quality.failed``). The threshold is the ``KEEP_GOOD`` (90th) percentile of the errors of the
lifts that did not fail: CVCF then drops a tenth of good reconstructions and every failure that
re-renders worse than nine in ten good ones. (A threshold that best separates the two groups, such as
Youden's, is unstable when their errors overlap as much as they do here: on an earlier lifting model
it removed nine in ten good lifts.) Nothing of the ReID task's data is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.tasks.reid.consistency import consistency_error
from harness.tasks.reid.lift_quality import compact, failed, removal_rates, summarise
from harness.tasks.reid.lift_render import render_lifts

if TYPE_CHECKING:
    from harness.tasks.reid.lifting import Lifter


KEEP_GOOD = 0.9


def good_quantile_threshold(errors: np.ndarray, is_failed: np.ndarray, keep: float = KEEP_GOOD) -> float:
    """The ``keep`` quantile of the good lifts' errors (all failed: above every error, removing none)."""
    good = errors[~is_failed]
    return float(np.quantile(good, keep)) if len(good) else float(errors.max() + 1e-3)


def calibrate(lifter: Lifter, root: Path, labels: dict[str, Any]) -> dict[str, Any]:
    """``cvcf_tau`` and the held-out record (accuracy, failures, the filter's removal rates at tau)."""
    held = [im for im in labels["images"] if im["split"] == "heldout"]
    paths = [str(root / im["path"]) for im in held]
    preds = lifter.lift(paths)
    lifts = [{"name": f"h{im['figure']:05d}", "params": p, "source_cam": c}
             for im, (p, c) in zip(held, preds, strict=True)]
    renders = render_lifts(lifts)
    errors = np.asarray([consistency_error(src, r["reprojection"]) for src, r in zip(paths, renders, strict=True)])
    truths = [labels["figures"][im["figure"]] for im in held]
    azimuths = [im["cam"][0] for im in held]
    small = [compact(p, c) for p, c in preds]
    is_failed = np.asarray([failed(s, t, a) for s, t, a in zip(small, truths, azimuths, strict=True)])
    tau = round(good_quantile_threshold(errors, is_failed), 4)
    failed_removed, clean_removed = removal_rates(is_failed, errors <= tau)
    med = lambda m: round(float(np.median(errors[m])), 4) if m.any() else None  # noqa: E731
    heldout = {**summarise(small, truths, azimuths), "n": len(held), "error_failed_median": med(is_failed),
               "error_good_median": med(~is_failed), "failed_removed": failed_removed,
               "clean_removed": clean_removed}
    return {"cvcf_tau": float(tau), "heldout": heldout}
