"""Every pickle or checkpoint the harness reads is data: a planted ``__reduce__`` -> ``os.system`` never
runs, whichever entry point reads the file.

Through the real CLI: ``-T data_dir=`` of dsgg (Action Genome pickles), ``-m dsgg-replay:FILE.pkl``,
``-m spa3d:FILE.pt`` and ``harness spa3d score --checkpoint``: one ``error:`` line naming the file and the
refused global, exit status 2, no marker file. The fit caches (methods, nvs, reid) go through the same
loader: a poisoned cache file is refused, refitted and replaced, and the payload never runs.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.safeload import load_pickle


class Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _harness(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1", "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=tmp_path)


def _one_line_refusal(r: subprocess.CompletedProcess[str], path: Path) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert str(path) in lines[0] and "refused global posix.system" in lines[0], lines[0]


def test_control_the_payload_runs_under_plain_pickle(tmp_path: Path) -> None:
    pickle.loads(pickle.dumps(Payload(tmp_path / "control")))
    assert (tmp_path / "control").exists()


def test_action_genome_annotations_with_a_payload(tmp_path: Path) -> None:
    from harness.tasks.dsgg.data import synthetic_videos, write_action_genome

    ann = write_action_genome(synthetic_videos(2), tmp_path / "ag")
    marker = tmp_path / "ran"
    person = ann / "person_bbox.pkl"
    real = pickle.loads(person.read_bytes())
    real[next(iter(real))]["bbox_size"] = Payload(marker)  # one field of one frame is enough
    person.write_bytes(pickle.dumps(real))
    r = _harness(tmp_path, "eval", "-t", "dsgg", "-T", f"data_dir={tmp_path / 'ag'}", "-m", "dsgg-prior",
                 "--db", f"sqlite:///{tmp_path / 'h.db'}")
    _one_line_refusal(r, person)
    assert not marker.exists()


def test_replayed_predictions_with_a_payload(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    preds = tmp_path / "preds.pkl"
    preds.write_bytes(pickle.dumps({"SYNTE000.mp4": {"format": "sttran", "boxes": Payload(marker)}}))
    r = _harness(tmp_path, "eval", "-t", "dsgg", "-m", f"dsgg-replay:{preds}", "--db", f"sqlite:///{tmp_path / 'h.db'}")
    _one_line_refusal(r, preds)
    assert not marker.exists()


def test_spa3d_checkpoint_with_a_payload(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from harness.tasks.spa3d import synth

    manifest = synth.write_pairs(tmp_path / "pairs", synth.pair_set(1, seed=5, violations=("teleport",)))
    marker = tmp_path / "ran"
    ckpt = tmp_path / "model.pt"
    torch.save({"config": {}, "state_dict": {}, "calibration": Payload(marker)}, ckpt)
    r = _harness(tmp_path, "eval", "-t", "spa3d_pairs", "-T", f"manifest={manifest}", "-m", f"spa3d:{ckpt}",
                 "--db", f"sqlite:///{tmp_path / 'h.db'}")
    _one_line_refusal(r, ckpt)
    first = manifest.parent / "0000_teleport_real.npz"
    r = _harness(tmp_path, "spa3d", "score", str(first), "--checkpoint", str(ckpt))
    _one_line_refusal(r, ckpt)
    r = _harness(tmp_path, "spa3d", "train", "--out", str(ckpt), "--videos", "4", "--steps", "1")  # resumes it
    _one_line_refusal(r, ckpt)
    assert not marker.exists()


# --- the project's own fit caches ----------------------------------------------------------------------


def _poison(folder: Path, marker: Path) -> list[Path]:
    files = sorted(p for p in folder.rglob("*.pkl") if p.is_file())
    assert files, f"no cache file under {folder}"
    for f in files:
        f.write_bytes(pickle.dumps({"record": Payload(marker)}))
    return files


def test_methods_fit_cache_is_read_as_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.modelspec import build_model
    from harness.tasks.methods.clustering import methods_cluster_iris

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    train = list(methods_cluster_iris().train())
    assert build_model("hartigan:batched", {"progress": False}).fit(train)["cached"] is False
    assert build_model("hartigan:batched", {"progress": False}).fit(train)["cached"] is True
    marker = tmp_path / "ran"
    files = _poison(tmp_path / "cache" / "fits", marker)
    record = build_model("hartigan:batched", {"progress": False}).fit(train)
    assert record["cached"] is False and not marker.exists()  # refused, refitted
    assert all(isinstance(load_pickle(f)["labels"], np.ndarray) for f in files)  # and replaced


def test_nvs_fit_cache_is_read_as_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from harness.modelspec import build_model
    from harness.tasks.nvs.gs_toy import write_toy_scene
    from harness.tasks.nvs.scenes import load_nerf_synthetic
    from harness.tasks.nvs.tasks import _sample

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    toy = load_nerf_synthetic(write_toy_scene(tmp_path / "toy", size=32, n_train=3, n_test=1))
    train = [_sample(toy, v, True) for v in toy.train]
    settings = {"steps": 3, "gaussians": 20, "patch": 16}

    def cached() -> bool:
        return next(iter(build_model("gs:neural_color", settings).fit(train)["scenes"].values()))["cached"]

    assert cached() is False and cached() is True
    marker = tmp_path / "ran"
    files = _poison(tmp_path / "cache" / "nvs" / "fits", marker)
    assert cached() is False and not marker.exists()
    assert all("gaussians" in load_pickle(f) for f in files)


def test_reid_fit_cache_is_read_as_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from PIL import Image

    from harness.modelspec import build_model
    from harness.types import Message, Part, Request, Sample

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    train = []
    for pid in range(4):
        for k in range(4):
            path = tmp_path / "img" / f"{pid}_{k}.png"
            path.parent.mkdir(exist_ok=True)
            rgba = rng.integers(0, 255, (64, 32, 4), dtype=np.uint8)
            rgba[..., 3] = 255
            Image.fromarray(rgba).save(path)
            train.append(Sample(id=f"{pid}_{k}", messages=[Message("user", [Part("image", path=str(path))])],
                                metadata={"pid": pid}))
    settings = {"steps": 2, "batch_p": 2, "batch_k": 2, "width": 4, "dim": 8}
    first = build_model("reid:baseline", settings)
    assert first.fit(train)["cached"] is False
    again = build_model("reid:baseline", settings)
    assert again.fit(train)["cached"] is True
    query = [Request(train[0].messages, sample_id="q")]
    assert asyncio.run(again.generate(query))[0].prediction == asyncio.run(first.generate(query))[0].prediction
    marker = tmp_path / "ran"
    files = _poison(tmp_path / "cache" / "reid" / "fits", marker)
    assert build_model("reid:baseline", settings).fit(train)["cached"] is False and not marker.exists()
    assert all(isinstance(load_pickle(f)["state"]["weights"], dict) for f in files)
