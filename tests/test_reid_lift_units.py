"""The pieces of 3D-VITAL's lifting that need no Blender: the body model's target codec, when a lift
counts as failed, the CVCF threshold rule, the task-side scoring of a fit record's lifts, the
pretraining set's disjointness from the task's identities, and that the backend side never reads the
ground truth (an AST check of its modules)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from harness.tasks.reid.body_codec import azimuth_error, decode, encode
from harness.tasks.reid.cvcf_calibration import good_quantile_threshold
from harness.tasks.reid.figures import GROUND_ELEVATION, camera, identity
from harness.tasks.reid.lift_quality import compact, failed, removal_rates, summarise

REID = Path(__file__).resolve().parent.parent / "tasks" / "reid"
# what runs inside a backend's fit: the ReID backends and the lifting model's fit-time path
BACKEND_SIDE = ["backends/models.py", "backends/vital.py", "backends/net.py", "lifting.py", "lift_render.py",
                "consistency.py", "body_codec.py", "images.py", "blender_jobs.py"]


def test_codec_round_trip_recovers_parameters_and_camera():
    rng = np.random.default_rng(0)
    for _ in range(20):
        p, cam = identity(rng), camera(rng, GROUND_ELEVATION)
        e = encode(p, cam)
        assert e["body"].min() >= 0 and e["body"].max() <= 1 and e["colours"].shape == (27,)
        back, bcam = decode(e["body"], e["colours"], e["cats"], e["flags"], e["camera"])
        for k in ("height", "build", "leg_ratio", "head_scale"):
            assert back[k] == pytest.approx(p[k], abs=1e-3)
        for k in ("pattern", "sleeves", "lower", "hair", "hat", "backpack", "bag"):
            assert back[k] == p[k]
        assert np.allclose([c for v in back["colours"].values() for c in v],
                           [c for v in p["colours"].values() for c in v], atol=1e-3)
        assert azimuth_error(bcam[0], cam[0]) < 1e-2 and bcam[1] == pytest.approx(cam[1], abs=1e-2)
        # the hat colour is only a target when there is a hat to see
        assert e["colour_mask"][18:21].tolist() == [float(p["hat"])] * 3


def test_a_lift_fails_on_a_wrong_side_a_wrong_part_or_a_wrong_height():
    rng = np.random.default_rng(1)
    truth = identity(rng)
    pred = compact(truth, [100.0, 10.0, 6.0])
    assert not failed(pred, truth, 130.0)  # 30 degrees off: still the right side
    assert failed(pred, truth, 150.0)  # 50 degrees off
    assert not failed(pred, truth, 100.0 + 360 - 40)  # wraps around: 40 degrees
    for part in ("hat", "backpack", "bag"):
        assert failed({**pred, part: not truth[part]}, truth, 100.0)
    assert failed({**pred, "height": truth["height"] + 0.12}, truth, 100.0)
    assert not failed({**pred, "height": truth["height"] - 0.08}, truth, 100.0)
    # wrong texture is hallucination, not a failed mesh: it counts in the attribute accuracy only
    sleeves = "long" if truth["sleeves"] == "short" else "short"
    assert not failed({**pred, "sleeves": sleeves, "pattern": "logo" if truth["pattern"] != "logo" else "solid"},
                      truth, 100.0)
    s = summarise([pred, {**pred, "hat": not truth["hat"]}, {**pred, "sleeves": sleeves}], [truth] * 3, [100.0] * 3)
    assert s["failed_share"] == pytest.approx(1 / 3) and s["accuracy"]["hat"] == pytest.approx(2 / 3)
    # one truth three times: chance (the commonest true value) is 1 for every attribute
    assert s["chance_accuracy"]["sleeves"] == 1.0 and s["chance_attribute_accuracy"] == 1.0
    other = {**truth, "sleeves": sleeves}
    assert summarise([pred, pred], [truth, other], [100.0] * 2)["chance_accuracy"]["sleeves"] == 0.5
    assert s["accuracy"]["sleeves"] == pytest.approx(2 / 3) and s["accuracy"]["pattern"] == 1.0
    assert removal_rates([True, False, True], [False, True, True]) == (0.5, 0.0)
    assert removal_rates([False], [True]) == (None, 0.0)


def test_the_cvcf_threshold_keeps_nine_in_ten_good_lifts():
    rng = np.random.default_rng(3)
    errors = np.concatenate([rng.uniform(0.1, 0.2, 90), rng.uniform(0.15, 0.6, 30)])
    is_failed = np.arange(120) >= 90
    tau = good_quantile_threshold(errors, is_failed)
    assert (errors[~is_failed] > tau).mean() == pytest.approx(0.1, abs=0.02)
    assert (errors[is_failed] > tau).mean() > 0.5  # the failures that re-render badly are gone
    assert good_quantile_threshold(errors, np.ones(120, bool)) > errors.max()  # no good lift: remove nothing


def test_task_scores_the_fit_record_s_lifts_against_the_manifest():
    from harness.tasks.reid.task import lift_metrics

    rng = np.random.default_rng(2)
    truths = {f"{i:04d}_c0.png": (identity(rng), float(i * 90)) for i in range(4)}
    lifts = []
    for i, (name, (p, az)) in enumerate(truths.items()):
        pred = compact(p, [az + (120.0 if i == 0 else 5.0), 8.0, 6.0])  # lift 0 faces the wrong way
        if i == 3:
            pred["pattern"] = "logo" if p["pattern"] != "logo" else "solid"  # a texture error: not failed
        lifts.append({"image": name, "pred": pred, "error": 0.5 if i in (0, 1) else 0.1, "kept": i not in (0, 1)})
    m = {x.name: x for x in lift_metrics({"cvcf": True, "lifts": lifts}, truths)}
    assert m["lift_failed"].value == 0.25 and m["lift_attribute_accuracy"].value == pytest.approx(1 - 1 / 28)
    assert m["cvcf_corrupted_removed"].value == 1.0 and m["cvcf_corrupted_removed"].n == 1
    assert m["cvcf_clean_removed"].value == pytest.approx(1 / 3) and m["cvcf_clean_removed"].n == 3
    no_filter = {x.name for x in lift_metrics({"cvcf": False, "lifts": lifts}, truths)}
    assert "lift_failed" in no_filter and "cvcf_corrupted_removed" not in no_filter


def test_pretraining_figures_are_not_the_task_s_identities():
    from harness.tasks.reid.liftset import LiftSetConfig, identities
    from harness.tasks.reid.synth import SynthConfig, plan

    key = lambda p: json.dumps(p, sort_keys=True)  # noqa: E731
    body = lambda p: (p["height"], p["build"], p["leg_ratio"], p["head_scale"])  # noqa: E731
    pre = identities(LiftSetConfig())
    assert len(pre) == 720 and len({key(p) for p in pre}) == 720
    pre_keys, pre_bodies = {key(p) for p in pre}, {body(p) for p in pre}
    for seed in range(10):
        task_ids = plan(SynthConfig(ids=40, seed=seed), Path("/nonexistent"))[1]["identities"]
        assert not pre_keys & {key(p) for p in task_ids}, seed
        assert not pre_bodies & {body(p) for p in task_ids}, seed  # not even one body shape in common


def _metadata_keys(tree: ast.AST) -> set[str]:
    """Keys read from any ``.metadata`` (``x.metadata["k"]``, ``x.metadata.get("k")``)."""
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "metadata":
            keys.add(ast.unparse(node.slice))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "metadata"):
            keys.add(ast.unparse(node.args[0]))
    return keys


@pytest.mark.parametrize("module", BACKEND_SIDE)
def test_backend_side_never_reads_the_ground_truth(module):
    """No manifest, no identity parameters, no metadata but the ReID label, none of the task's code and
    of lift_quality only the formatting of a prediction (its scoring needs the truth)."""
    tree = ast.parse((REID / module).read_text())
    words = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    words |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    words |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not words & {"identities", "manifest", "load_manifest", "_lift_truth"}, (module, words)
    assert not any(s == "identities" or s.endswith("manifest.json") for s in strings), module  # keys, not prose
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom | ast.Import):
            mods = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            assert not {"harness.tasks.reid.synth", "harness.tasks.reid.task"} & set(mods), (module, mods)
            if mods == ["harness.tasks.reid.lift_quality"]:
                assert {a.name for a in node.names} <= {"compact"}, module
    assert _metadata_keys(tree) <= {"'pid'"}, (module, _metadata_keys(tree))


def test_the_ast_check_catches_a_backend_that_reads_the_truth():
    bad = ast.parse("def f(s, man):\n    return man['identities'][s.metadata['pid']], s.metadata.get('elevation')")
    strings = {n.value for n in ast.walk(bad) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert "identities" in strings and _metadata_keys(bad) == {"'pid'", "'elevation'"}


def test_a_lifting_config_too_small_to_train_is_refused_in_one_line():
    from harness.tasks.reid.lifting import LifterConfig
    from harness.tasks.reid.liftset import LiftSetConfig

    LifterConfig(steps=20, batch=2).validate()
    for bad in (LifterConfig(steps=10), LifterConfig(steps=19), LifterConfig(batch=1)):
        with pytest.raises(ValueError, match="needs steps >= 20 and batch >= 2") as exc:
            bad.validate()
        assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="figures >= 8"):
        LiftSetConfig(figures=4).validate()
    # threads and workers change the speed, not the weights: not in what keys a fit
    assert LifterConfig(threads=4, workers=3).fitted() == LifterConfig().fitted()
    assert LiftSetConfig(workers=4).key() == LiftSetConfig().key() != LiftSetConfig(seed=1).key()


def _person(tmp_path: Path, name: str, patch: tuple[int, int, tuple[int, int, int]] | None = None,
            alpha_patch: tuple[int, int] | None = None) -> str:
    """A 64x128 RGBA render: a grey-blue body box; optionally an 8x8 patch of another colour on it
    (a part inside the silhouette) or an 8x8 patch of silhouette beside it (a part sticking out)."""
    from PIL import Image

    arr = np.zeros((128, 64, 4), np.uint8)
    arr[16:120, 20:44] = (90, 100, 140, 255)
    if patch is not None:
        y, x, rgb = patch
        arr[y:y + 8, x:x + 8, :3] = rgb
    if alpha_patch is not None:
        y, x = alpha_patch
        arr[y:y + 8, x:x + 8] = (90, 100, 140, 255)
    path = tmp_path / f"{name}.png"
    Image.fromarray(arr, "RGBA").save(path)
    return str(path)


def test_the_consistency_error_is_the_worst_cell_so_a_small_wrong_part_counts(tmp_path):
    from harness.tasks.reid.consistency import consistency_error

    body = _person(tmp_path, "body")
    assert consistency_error(body, body) == 0.0
    # a backpack-sized patch of another colour inside the silhouette: one cell disagrees entirely in colour
    pack = _person(tmp_path, "pack", patch=(48, 24, (200, 60, 40)))
    colour_gap = np.abs(np.subtract((200, 60, 40), (90, 100, 140))).mean() / 255
    assert consistency_error(body, pack) == pytest.approx(colour_gap, abs=1e-6)
    # the whole-person mean would dilute it over 39 cells' worth of overlap
    assert colour_gap / 39 < 0.01 < consistency_error(body, pack)
    # a patch of silhouette beside the body: that cell's silhouettes disagree on every pixel
    out = _person(tmp_path, "out", alpha_patch=(48, 48))
    assert consistency_error(body, out) == pytest.approx(1.0)
    # nothing to compare, or frames of another size: the largest error
    from PIL import Image

    empty, small = tmp_path / "empty.png", tmp_path / "small.png"
    Image.new("RGBA", (64, 128)).save(empty)
    Image.new("RGBA", (32, 64), (1, 2, 3, 255)).save(small)
    assert consistency_error(str(empty), str(empty)) == 2.0 and consistency_error(body, str(small)) == 2.0
