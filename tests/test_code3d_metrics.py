"""code3d metrics without Blender: Chamfer by hand, F-score, floating parts, images, taxonomy."""

from __future__ import annotations

import numpy as np
import pytest

from harness.tasks.code3d.geometry import chamfer_pair, floating_parts, normalise_cloud, shape_scores
from harness.tasks.code3d.images import view_similarity
from harness.tasks.code3d.task import extract_code
from harness.tasks.code3d.taxonomy import classify_failure, exec_family

CROSS = np.array([[1.0, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0]])


def test_chamfer_of_a_cloud_against_itself_is_zero() -> None:
    pts = np.random.default_rng(0).normal(size=(500, 3))
    assert shape_scores(pts, pts).chamfer == pytest.approx(0.0, abs=1e-12)
    assert shape_scores(pts, pts).fscore == 1.0


def test_uniformly_scaled_and_shifted_copy_is_zero_after_normalisation() -> None:
    pts = np.random.default_rng(1).normal(size=(300, 3))
    assert shape_scores(pts * 3.5 + 2.0, pts).chamfer == pytest.approx(0.0, abs=1e-12)


def test_non_uniform_scale_matches_hand_computation() -> None:
    # CROSS stretched 2x along x, normalised by its radius 2: (+-1,0,0), (0,+-0.5,0).
    # cross -> stretched: x points 0, y points 0.5^2 => mean 0.125; the other way the same: CD = 0.25.
    stretched = CROSS * np.array([2.0, 1.0, 1.0])
    assert np.allclose(normalise_cloud(stretched), [[1, 0, 0], [-1, 0, 0], [0, 0.5, 0], [0, -0.5, 0]])
    s = shape_scores(stretched, CROSS)
    assert s.chamfer == pytest.approx(0.25)
    assert s.yaw_deg == 0.0
    # F-score at 0.6: all within; at 0.4: only the x points (2 of 4 each way)
    assert shape_scores(stretched, CROSS, threshold=0.6).fscore == pytest.approx(1.0)
    assert shape_scores(stretched, CROSS, threshold=0.4).fscore == pytest.approx(0.5)


def test_chamfer_pair_raw_squared_distances() -> None:
    cd, d_pred, d_ref = chamfer_pair(np.array([[0.0, 0, 0]]), np.array([[3.0, 4, 0], [0, 0, 1]]))
    # pred->ref: 1; ref->pred: 25 and 1 -> mean 13; CD = 1 + 13
    assert cd == pytest.approx(14.0)


def test_yaw_min_finds_a_rotated_copy() -> None:
    pts = np.random.default_rng(2).normal(size=(400, 3)) * np.array([3.0, 1.0, 0.5])
    rot = np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])  # 90 degrees about z (the reference's yaw axis)
    s = shape_scores(pts @ rot.T, pts)
    assert s.chamfer == pytest.approx(0.0, abs=1e-10)
    assert s.chamfer_noyaw > 0.01
    assert s.yaw_deg in (90.0, 270.0)


def _box(lo: tuple[float, float, float], hi: tuple[float, float, float], n: int = 400) -> np.ndarray:
    return np.random.default_rng(int(sum(lo) * 100) % 97).uniform(lo, hi, size=(n, 3))


def test_floating_parts_touching_chain_vs_hovering_part() -> None:
    base = _box((0, 0, 0), (1, 0.1, 1))  # y is up
    pole = _box((0.45, 0.1, 0.45), (0.55, 1.0, 0.55))
    shade = _box((0.3, 1.2, 0.3), (0.7, 1.5, 0.7))
    parts = [base, pole, shade]
    # the pole's samples reach its faces only approximately: touch tolerance 0.05
    assert floating_parts(parts, [1.0, 0.4, 2.0], tolerance=0.05) == [2]
    assert floating_parts(parts, [1.0, 0.4, 2.0], tolerance=0.3) == []
    assert floating_parts([base], [1.0], tolerance=0.01) == []


def test_view_similarity_identical_and_disjoint() -> None:
    img = np.zeros((4, 16, 16, 4), dtype=np.uint8)
    img[:, 4:12, 4:12] = [200, 100, 50, 255]
    same = view_similarity(img, img)
    assert same["img_iou_paired"] == 1.0 and same["img_ssim_paired"] == pytest.approx(1.0)
    other = np.zeros_like(img)
    other[:, 0:3, 0:3] = [200, 100, 50, 255]
    assert view_similarity(other, img)["img_iou_paired"] == 0.0
    with pytest.raises(ValueError):
        view_similarity(img[:, :8], img)


def test_failure_taxonomy() -> None:
    api_tb = (
        'Traceback (most recent call last):\n  File "/w/model_script.py", line 2, in <module>\n'
        '  File "/venv/site-packages/bpy/5.0/scripts/modules/bpy/ops.py", line 109, in __call__\n'
        'TypeError: Converting py args to operator properties:: keyword "sizee" unrecognized\n'
    )
    assert classify_failure("ERR_EXEC", api_tb) == "api_misuse"
    attr_tb = "File \"/w/model_script.py\", line 3\nAttributeError: 'bpy_prop_collection' object has no attribute x\n"
    assert classify_failure("ERR_EXEC", attr_tb) == "api_misuse"
    assert (
        classify_failure("ERR_EXEC", '  File "/w/model_script.py", line 1\nSyntaxError: invalid syntax\n') == "syntax"
    )
    assert (
        classify_failure("ERR_EXEC", 'File "/w/model_script.py"\nZeroDivisionError: division by zero\n') == "geometry"
    )
    assert classify_failure("ERR_EXEC", 'File "/w/model_script.py"\nMemoryError\n') == "memory"
    assert classify_failure("ERR_TIMEOUT", "") == "timeout"
    assert classify_failure("ERR_NO_MESH", "") == "no_mesh"
    assert classify_failure("OK", "") is None


def test_extract_code_strips_fences_and_prose_like_the_reference() -> None:
    assert extract_code("import bpy\n") == ("import bpy\n", False)
    reply = "Here is the script:\n```python\nimport bpy\nx = 1\n```\nHope this helps!\n"
    assert extract_code(reply) == ("import bpy\nx = 1\n", True)
    assert extract_code("```\nimport bpy\n```") == ("import bpy", True)
    broken = "def f(:\n    pass\n"
    assert extract_code(broken) == (broken, False)  # nothing parses: kept, will fail as a syntax error


def test_reference_exec_families() -> None:
    assert exec_family('File "x.py"\nKeyError: \'bpy_prop_collection[key]: key "Specular" not found\'\n') == "B5-API"
    assert exec_family("AttributeError: 'Mesh' object has no attribute 'use_auto_smooth'\n") == "B5-API"
    assert (
        exec_family("IndexError: BMElemSeq[index]: outdated internal index table, run ensure_lookup_table() first\n")
        == "BMSH"
    )
    assert exec_family("RuntimeError: Operator bpy.ops.object.mode_set.poll() failed, context is incorrect\n") == "CTX"
    assert exec_family("NameError: name 'foo' is not defined\n") == "OTHER"


@pytest.fixture(scope="module")
def tiny_dino(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny randomly initialised DINOv2 saved like a hub checkpoint (the real loading code path)."""
    import json

    import torch
    from transformers import Dinov2Config, Dinov2Model

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny_dino")
    config = Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                          image_size=56, patch_size=14)  # fmt: skip
    Dinov2Model(config).save_pretrained(path)
    (path / "preprocessor_config.json").write_text(json.dumps({
        "size": {"shortest_edge": 64}, "crop_size": {"height": 56, "width": 56}, "do_center_crop": True,
        "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225],
    }))  # fmt: skip
    return str(path)


def test_image_encoder_cosine_paired_and_matched(tiny_dino: str) -> None:
    from harness.tasks.code3d.images import ImageEncoder

    rng = np.random.default_rng(0)
    views = rng.integers(0, 255, size=(4, 80, 80, 4), dtype=np.uint8)
    enc = ImageEncoder(tiny_dino)
    assert enc.kind == "pooler" and enc.resize_to == 64 and enc.crop_to == 56
    emb = enc.embed(views)
    assert emb.shape == (4, 32) and np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    same = enc.similarity(views, views)
    assert same["img_emb_paired"] == pytest.approx(1.0, abs=1e-5)
    rolled = enc.similarity(np.roll(views, 1, axis=0), views)  # views in another order: matching recovers it
    assert rolled["img_emb_matched"] == pytest.approx(1.0, abs=1e-5)
    assert rolled["img_emb_paired"] < 0.9999
