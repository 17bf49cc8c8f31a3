"""3D-VITAL with a real single-view lifting model (tasks/reid/lifting.py), with Blender: the model
learns its attributes well above chance on held-out renders, CVCF's threshold is calibrated on its
real failures, the vital fit gives the same embeddings when the manifest (the ground truth) cannot be
opened, the task scores the lifts, and bad input is one line.

A small lifting model (160 figures x 2 views, 400 steps) keeps this to a few minutes; the backend's
default is 600 figures and 2000 steps."""

from __future__ import annotations

import asyncio
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import pytest

from harness.modelspec import build_model
from harness.runner import EvalConfig, Runner
from harness.store.db import open_db
from harness.tasks.reid.task import reid_aerial_ground
from harness.types import Request
from tests.reid_blender import blender_cache

TINY = {"ids": 4, "ground": 2, "aerial": 2, "seed": 3}
SMALL = {"lift_figures": 160, "lift_steps": 400}
FIT = {**SMALL, "steps": 15, "batch_p": 2, "batch_k": 4}
_GUARD = {"on": False, "opened": []}


def _audit(event: str, args: tuple) -> None:
    # installed once per process; only acts while a test holds the guard
    if _GUARD["on"] and event == "open" and str(args[0]).endswith("manifest.json"):
        _GUARD["opened"].append(str(args[0]))
        raise PermissionError(f"the ground truth ({Path(str(args[0])).name}) was opened during the fit")


sys.addaudithook(_audit)


@contextmanager
def manifest_unreadable():
    _GUARD["on"], _GUARD["opened"] = True, []
    try:
        yield
    finally:
        _GUARD["on"] = False


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    with blender_cache(tmp_path_factory, "reid-lift-cache") as cache:
        from harness.tasks.reid.lifting import LifterConfig, load_or_fit
        from harness.tasks.reid.synth import SynthConfig, build

        root = build(SynthConfig(**TINY))
        # the backend's own choice for these settings (held-out: a fifth, at least 8)
        lifter = load_or_fit(LifterConfig.sized(SMALL["lift_figures"], SMALL["lift_steps"]))
        yield cache, root, lifter


def test_the_lifting_model_learns_well_above_chance_on_held_out_renders(env):
    _cache, _root, lifter = env
    held = lifter.record["heldout"]
    assert held["n"] == 32
    acc, chance = held["accuracy"], held["chance_accuracy"]
    # the large garment areas are learnt at this budget; chance is the commonest held-out value (about 0.5)
    for k in ("sleeves", "lower"):
        assert acc[k] >= max(0.75, chance[k] + 0.15), (k, acc, chance)
    # over all seven attributes, well above always answering the commonest value
    assert held["attribute_accuracy"] >= held["chance_attribute_accuracy"] + 0.08, held
    # a constant mid height is off by 0.1 m on average; a random azimuth is within 45 degrees a quarter of the time
    assert held["height_error_mean"] < 0.06, held
    assert held["azimuth_within_45"] >= 0.5, held


def test_cvcf_is_calibrated_on_the_lifting_model_s_own_real_failures(env):
    """The threshold keeps nine in ten good held-out lifts; how many failures it catches is measured,
    not promised (the README reports it at the default size)."""
    _cache, _root, lifter = env
    held = lifter.record["heldout"]
    assert 0.0 < held["failed_share"] < 1.0, held  # real failures, and not all of them
    assert 0.03 <= held["clean_removed"] <= 0.2, held  # the 90th percentile of 20-odd good lifts' errors
    assert held["failed_removed"] is not None and 0.0 <= held["failed_removed"] <= 1.0, held
    assert held["error_failed_median"] is not None and held["error_good_median"] is not None
    assert 0.0 < lifter.record["cvcf_tau"] < 2.0


def _embed(train, test, guard):
    model = build_model("reid:vital", {**FIT, "cache": False})
    with guard():
        rec = model.fit(train)
    outs = asyncio.run(model.generate([Request(s.messages, sample_id=s.id) for s in test]))
    return rec, np.asarray([o.prediction for o in outs])


def test_vital_fit_gives_the_same_embeddings_with_the_ground_truth_unreachable(env):
    _cache, root, _lifter = env
    task = reid_aerial_ground(**TINY)
    train, test = task.train(), task.load()[:4]
    assert all(set(s.metadata) <= {"pid", "camid", "view", "split", "role"} for s in train)
    free_rec, free = _embed(train, test, nullcontext)
    guarded_rec, guarded = _embed(train, test, manifest_unreadable)
    assert "error" not in guarded_rec and "error" not in free_rec, guarded_rec
    assert guarded_rec["lifted_meshes"] == len(train) == len(guarded_rec["lifts"])
    assert np.array_equal(free, guarded)
    assert [lf["pred"] for lf in free_rec["lifts"]] == [lf["pred"] for lf in guarded_rec["lifts"]]
    with manifest_unreadable(), pytest.raises(PermissionError):  # the guard does guard
        (root / "manifest.json").read_text()


def test_vital_end_to_end_scores_the_lifts_on_the_task_side(env, sqlite_url):
    summary = Runner(EvalConfig(task="reid_aerial_ground", model="reid:vital", task_options={**TINY, "protocol": "A2G"},
                                model_settings=FIT, progress=False), session_factory=open_db(sqlite_url)).run()
    assert summary.status == "finished" and summary.n_errors == 0 and summary.n_new == 8
    m = {x.name: x.value for x in summary.metrics if not x.breakdown_key}
    assert 0.0 < m["mAP"] <= 1.0 and m["valid_queries"] == 4
    assert 0.0 <= m["lift_failed"] <= 1.0 and 0.0 <= m["lift_attribute_accuracy"] <= 1.0
    assert "cvcf_corrupted_removed" in m or "cvcf_clean_removed" in m
    assert m["synthetic_views_used"] >= 0 and 0.0 <= m["lift_azimuth_error"] <= 180.0
    no_cvcf = Runner(EvalConfig(task="reid_aerial_ground", model="reid:vital-no-cvcf",
                                task_options={**TINY, "protocol": "A2G"}, model_settings=FIT, progress=False),
                     session_factory=open_db(sqlite_url)).run()
    n = {x.name: x.value for x in no_cvcf.metrics if not x.breakdown_key}
    assert n["synthetic_views_used"] == 4 * 2 and "cvcf_corrupted_removed" not in n  # every lift, 2 views each
    assert n["lift_failed"] == m["lift_failed"]  # the same lifting model, the same lifts


def test_bad_input_is_one_line(env, tmp_path):
    from PIL import Image

    from harness.modelspec import ModelSpecError
    from harness.tasks.reid.lifting import LiftInputError, load_input
    from harness.types import Message, Part, Sample

    photo = tmp_path / "P0001T02010A1C3F00020.jpg"
    Image.new("RGB", (32, 64), (10, 20, 30)).save(photo)
    with pytest.raises(LiftInputError, match="64x128 RGBA renders") as exc:
        load_input(str(photo))
    assert "\n" not in str(exc.value)
    with pytest.raises(LiftInputError, match="cannot read"):
        load_input(str(tmp_path / "missing.png"))
    # a real photograph in the train split: the vital fit fails in one line, the images get that reason
    train = [Sample(id=f"t{i}", messages=[Message("user", [Part("image", path=str(photo))])], metadata={"pid": i})
             for i in range(2)]
    model = build_model("reid:vital", FIT)
    rec = model.fit(train)
    assert rec["error"].startswith("fit failed: the lifting model takes") and "\n" not in rec["error"]
    out = asyncio.run(model.generate([Request(train[0].messages, sample_id="q")]))[0]
    assert out.error == rec["error"]
    for bad in ({"lift_figures": 3}, {"cvcf_tau": "high"}, {"novel": 0}):
        with pytest.raises(ModelSpecError, match="bad setting value") as exc:
            build_model("reid:vital", bad)
        assert "\n" not in str(exc.value)
