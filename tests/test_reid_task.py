"""reid_aerial_ground: the Blender-rendered set, the task's aggregate and bad input, the AG-ReID loaders,
and an end-to-end run of reid:baseline through the runner (tiny set: 4 identities). reid:vital and its
lifting model: tests/test_reid_lifting.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from harness.runner import EvalConfig, Runner
from harness.store.db import open_db
from harness.task import SampleRecord
from harness.tasks.reid.metrics import ReIDInputError
from harness.tasks.reid.task import reid_aerial_ground, reid_metrics
from harness.types import Output
from tests.reid_blender import blender_cache

TINY = {"ids": 4, "ground": 2, "aerial": 2, "seed": 3}


@pytest.fixture(scope="module")
def tiny_cache(tmp_path_factory):
    with blender_cache(tmp_path_factory, "reid-cache") as cache:
        from harness.tasks.reid.synth import SynthConfig, build

        yield cache, build(SynthConfig(**TINY))


def test_rendered_set_cameras_splits_and_cache(tiny_cache):
    from harness.tasks.reid.synth import SynthConfig, build

    _cache, root = tiny_cache
    man = json.loads((root / "manifest.json").read_text())
    assert len(man["images"]) == 4 * 4 and all((root / im["path"]).exists() for im in man["images"])
    for im in man["images"]:
        lo, hi = (0, 20) if im["view"] == "ground" else (60, 90)
        assert lo <= im["elevation"] <= hi
        assert (im["camid"] < 2) == (im["view"] == "ground")
    train_ids = {im["pid"] for im in man["images"] if im["split"] == "train"}
    test_ids = {im["pid"] for im in man["images"] if im["split"] == "test"}
    assert train_ids == {0, 1} and test_ids == {2, 3}
    assert "lifts" not in man and not (root / "lifts").exists()  # the build renders people, no reconstructions
    stamp = (root / "manifest.json").stat().st_mtime_ns
    assert build(SynthConfig(**TINY)) == root and (root / "manifest.json").stat().st_mtime_ns == stamp

    task = reid_aerial_ground(protocol="G2A", **TINY)
    train, test = task.train(), task.load()
    assert all(s.metadata["view"] == "ground" for s in train) and len(train) == 4
    # a training sample is its image and identity label: no camera, no body parameters, no lifts
    assert all(set(s.metadata) == {"pid", "camid", "view", "split", "role"} for s in train)
    assert {s.metadata["role"] for s in test if s.metadata["view"] == "ground"} == {"query"}
    assert len({s.id for s in test}) == len(test) == 8


def test_blender_missing_is_one_line_error(tmp_path, monkeypatch):
    from harness.tasks.reid.synth import BlenderUnavailable, SynthConfig, build

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("HARNESS_BPY_PYTHON", str(tmp_path / "no-such-python"))
    with pytest.raises(BlenderUnavailable, match="Blender \\(bpy\\) not found") as exc:
        build(SynthConfig(ids=4))
    assert "\n" not in str(exc.value)


def test_end_to_end_through_the_runner(tiny_cache, sqlite_url):
    summary = Runner(EvalConfig(task="reid_aerial_ground", model="reid:baseline",
                                task_options={**TINY, "protocol": "A2G"},
                                model_settings={"steps": 15, "batch_p": 2, "batch_k": 4}, progress=False),
                     session_factory=open_db(sqlite_url)).run()
    assert summary.status == "finished" and summary.n_errors == 0 and summary.n_new == 8
    m = {x.name: x.value for x in summary.metrics if not x.breakdown_key}
    for name in ("mAP", "rank1", "rank5", "rank10", "mINP"):
        assert 0.0 < m[name] <= 1.0
    assert m["valid_queries"] == 4 and m["skipped_queries"] == 0
    assert m["rank10"] >= m["rank5"] >= m["rank1"]
    assert "cvcf_corrupted_removed" not in m and "lift_failed" not in m


def _rec(sid, role, pid, cam, emb, **kw):
    details = {} if emb is None else {"embedding": emb}
    return SampleRecord(sid, 0, {}, kw.get("unscored"), None, {"role": role, "pid": pid, "camid": cam}, 0.0, details)


def test_aggregate_counts_bad_rows_instead_of_hiding_them():
    recs = [_rec("q1", "query", 1, 0, [0.0, 0.0]), _rec("q2", "query", 9, 0, [1.0, 1.0]),
            _rec("q3", "query", 2, 0, None, unscored="nan"),
            _rec("g1", "gallery", 1, 1, [0.1, 0.0]), _rec("g2", "gallery", 2, 1, [5.0, 5.0]),
            _rec("g3", "gallery", 2, 1, [1.0, 2.0, 3.0])]  # a wrong-sized embedding is left out
    m = {x.name: x.value for x in reid_metrics(recs)}
    assert m["valid_queries"] == 1 and m["skipped_queries"] == 1  # identity 9 is absent from the gallery
    assert m["unscored_queries"] == 1 and m["unscored_gallery"] == 1
    assert m["mAP"] == 1.0
    with pytest.raises(ReIDInputError, match="no camera id"):
        reid_metrics([_rec("q", "query", 1, None, [0.0]), _rec("g", "gallery", 1, 1, [0.0])])


def test_score_rejects_nan_and_missing_embeddings():
    from harness.tasks.reid.task import _sample, score

    s = _sample({"path": "/x/a.png", "pid": 1, "camid": 0, "role": "query"}, "q-")
    assert score(s, Output(prediction=[0.1, float("nan")]), None).unscored.startswith("the embedding has non-finite")
    assert score(s, Output(prediction=None), None).unscored is not None
    assert score(s, Output(prediction=[0.5, 1.0]), None).details["embedding"] == [0.5, 1.0]


def test_options_and_settings_are_checked():
    from harness.tasks.reid.backends.models import reid_backend

    with pytest.raises(ValueError, match="protocol must be A2G or G2A"):
        reid_aerial_ground(protocol="X2Y")
    with pytest.raises(ValueError, match="ids must be an even number"):
        reid_aerial_ground(ids=5)
    with pytest.raises(ValueError, match="did you mean 'steps'"):
        reid_backend("vital", stepz=3)
    with pytest.raises(ValueError, match="did you mean 'vital'"):
        reid_backend("vitl")
    assert reid_backend("vital", steps=3, temperature=0.0).spec == "reid:vital?steps=3"


def _jpg(path: Path) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 16), (10, 20, 30)).save(path)


def test_agreid_layout_loader(tmp_path):
    from harness.tasks.reid.realdata import DatasetMissing, load_real

    with pytest.raises(DatasetMissing, match="missing folder"):
        reid_aerial_ground(data="agreid", root=str(tmp_path))
    with pytest.raises(DatasetMissing, match="needs -T root"):
        reid_aerial_ground(data="agreid")
    base = tmp_path / "AG-ReID"
    _jpg(base / "bounding_box_train" / "P0001T02010A1C0F00010.jpg")  # aerial: left out of the train split
    _jpg(base / "bounding_box_train" / "P0001T02010A1C3F00020.jpg")
    _jpg(base / "query_all_c0" / "P0002T03000A0C0F00001.jpg")
    _jpg(base / "bounding_box_test_all_c3" / "P0002T03000A0C3F00005.jpg")
    for d in ("query_all_c3", "bounding_box_test_all_c0"):
        (base / d).mkdir()
    train, test = load_real("agreid", str(tmp_path), "A2G")
    assert [(r["pid"], r["camid"]) for r in train] == [(1020101, 3)]
    assert [(r["role"], r["pid"], r["view"]) for r in test] == [("query", 2030000, "aerial"),
                                                               ("gallery", 2030000, "ground")]
    task = reid_aerial_ground(data="agreid", root=str(tmp_path))
    assert len(task.load()) == 2 and len(task.train()) == 1


def test_embedding_distances_rank_true_matches_first():
    # a sanity check of the distance choice: cosine and euclidean agree on normalised embeddings
    from harness.tasks.reid.metrics import cosine_distances, euclidean_distances

    rng = np.random.default_rng(1)
    q = rng.normal(size=(4, 8))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    g = q + 0.01 * rng.normal(size=q.shape)
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    assert (euclidean_distances(q, g).argmin(1) == np.arange(4)).all()
    assert (cosine_distances(q, g).argmin(1) == np.arange(4)).all()


def test_build_cli_errors_are_one_line(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path), "HARNESS_BPY_PYTHON": str(tmp_path / "none")}
    run = subprocess.run([sys.executable, "-m", "harness.cli", "reid", "build", "-T", "ids=4"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and run.stderr.strip().startswith("error: Blender (bpy) not found")
    assert len(run.stderr.strip().splitlines()) == 1
    run = subprocess.run([sys.executable, "-m", "harness.cli", "reid", "build", "-T", "idz=4"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "did you mean 'ids'" in run.stderr
