"""The one fit cache (harness.fit_cache): what its key holds, hits that give back equal state (numpy and
torch), files that are a miss with one warning and never run code, atomic and concurrent writes, and
every family that fits: a second fit in one cache folder loads instead of training and predicts the
same, a changed seed trains again."""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from requirements import require

from harness import fit_cache
from harness.types import Message, Part, Request, Sample

REPO = Path(__file__).resolve().parent.parent
KEY = "0123456789abcdef0123456789abcdef"


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(root))
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    return root


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "harness.fit_cache" and r.levelno >= logging.WARNING]


class Payload:
    """A pickle that runs a shell command when a plain unpickler reads it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


# --- the key ---------------------------------------------------------------------------------------


BASE: dict[str, Any] = {"backend": "hartigan:batched", "settings": {"k": 3, "max_iter": None}, "task_hash": "t" * 64,
                        "train": "d" * 64, "seed": 0}


@pytest.mark.parametrize("change", [{"backend": "hartigan:sequential"}, {"settings": {"k": 4, "max_iter": None}},
                                    {"task_hash": "u" * 64}, {"train": "e" * 64}, {"seed": 1},
                                    {"extra": {"v": 2}}])
def test_the_key_changes_with_each_input(change: dict[str, Any]) -> None:
    assert fit_cache.fit_key(**BASE) == fit_cache.fit_key(**BASE)
    assert fit_cache.fit_key(**{**BASE, "settings": {"max_iter": None, "k": 3}}) == fit_cache.fit_key(**BASE)
    assert fit_cache.fit_key(**{**BASE, **change}) != fit_cache.fit_key(**BASE)


def test_the_train_content_hash_reads_the_files_bytes(tmp_path: Path) -> None:
    img = tmp_path / "a.png"
    img.write_bytes(b"one")
    samples = [Sample("a", [Message("user", [Part("image", path=str(img))])], target=1)]
    first = fit_cache.samples_hash(samples)
    assert fit_cache.samples_hash(samples) == first
    img.write_bytes(b"two")  # same path, same size: another image
    os.utime(img, ns=(1, 1))
    assert fit_cache.samples_hash(samples) != first
    assert fit_cache.samples_hash([Sample("a", samples[0].messages, target=2)]) != fit_cache.samples_hash(samples)
    other = tmp_path / "b.bin"
    other.write_bytes(b"x")
    assert fit_cache.samples_hash(samples, files=[other]) != fit_cache.samples_hash(samples)
    # the samples themselves (a train split of sample records) are accepted as the train part of a key
    assert fit_cache.fit_key(**{**BASE, "train": samples}) == fit_cache.fit_key(
        **{**BASE, "train": fit_cache.samples_hash(samples)})


def test_names_that_would_leave_the_cache_folder_are_refused() -> None:
    for bad in ({"kind": "../x"}, {"kind": "a/b"}, {"folder": "../fits"}, {"folder": "/etc"}):
        with pytest.raises(ValueError):
            fit_cache.path_for(KEY, **{"kind": "k", **bad})
    with pytest.raises(ValueError, match="hex"):
        fit_cache.path_for("../../x", kind="k")


# --- hits ------------------------------------------------------------------------------------------


def test_a_numpy_state_comes_back_equal(cache: Path, caplog: pytest.LogCaptureFixture) -> None:
    state = {"centers": np.arange(12.0).reshape(4, 3), "labels": np.array([0, 1, 1, 3]), "record": {"k": 4},
             "shape": (2, 3), "none": None}
    path = fit_cache.save(KEY, state, kind="hartigan")
    assert path == cache / "fits" / f"hartigan-{KEY}.pkl" and path.is_file()
    back = fit_cache.load(KEY, kind="hartigan")
    assert back is not None and back.keys() == state.keys()
    assert np.array_equal(back["centers"], state["centers"]) and back["centers"].dtype == np.float64
    assert np.array_equal(back["labels"], state["labels"]) and back["record"] == {"k": 4} and back["shape"] == (2, 3)
    assert fit_cache.load(KEY, kind="kmeans") is None  # another kind, another file
    assert fit_cache.load(KEY, kind="hartigan", folder="nvs/fits") is None
    assert fit_cache.load(KEY, kind="hartigan", restore=lambda s: s["record"]["k"]) == 4
    assert not _warnings(caplog)
    assert not list(path.parent.glob("*.tmp"))


def test_a_torch_state_comes_back_equal(cache: Path, caplog: pytest.LogCaptureFixture) -> None:
    torch = require("torch", "torch fit states")
    net = torch.nn.Linear(3, 2)
    state = {"state_dict": net.state_dict(), "history": [{"step": 1, "l1": 0.5}], "lr": np.float64(0.1)}
    path = fit_cache.save(KEY, state, kind="fit", folder="spa3d/fits")  # tensors: torch format by content
    assert path == cache / "spa3d" / "fits" / f"fit-{KEY}.pt"
    back = fit_cache.load(KEY, kind="fit", folder="spa3d/fits")
    assert back is not None and back["history"] == state["history"] and float(back["lr"]) == 0.1
    for name, tensor in net.state_dict().items():
        assert torch.equal(back["state_dict"][name], tensor)
    # the caller may choose the format; a state its reader would refuse is refused when written
    assert fit_cache.save(KEY, {"w": [1.0, 2.0]}, kind="t", format="torch").suffix == ".pt"
    assert fit_cache.load(KEY, kind="t") == {"w": [1.0, 2.0]}
    with pytest.raises(TypeError, match="numpy"):
        fit_cache.save(KEY, {"w": torch.zeros(2), "a": np.zeros(2)}, kind="t")
    with pytest.raises(TypeError, match="torch"):
        fit_cache.save(KEY, {"w": torch.zeros(2)}, kind="t", format="pickle")
    assert not _warnings(caplog)


def test_states_the_reader_would_refuse_are_refused_when_written() -> None:
    with pytest.raises(TypeError, match="dict"):
        fit_cache.save(KEY, [1, 2], kind="k")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="only plain data"):
        fit_cache.save(KEY, {"obj": object()}, kind="k")
    assert fit_cache.load(KEY, kind="k") is None


def test_an_unwritable_cache_is_one_warning_and_the_fit_goes_on(cache: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("a file where the cache folder should be")
    assert fit_cache.save(KEY, {"a": 1}, kind="k") is None
    assert len(_warnings(caplog)) == 1 and "not written" in _warnings(caplog)[0]


# --- misses: corrupt, foreign and malicious files ----------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"not a pickle at all", pickle.dumps([1, 2, 3]), pickle.dumps({1: "x"}),
                                     pickle.dumps({"a": np.zeros(4)})[:-9]],
                         ids=["empty", "text", "a list", "int keys", "truncated"])
def test_a_corrupt_or_foreign_file_is_a_miss_with_one_warning(content: bytes, caplog: pytest.LogCaptureFixture
                                                                ) -> None:
    path = fit_cache.path_for(KEY, kind="k")
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    assert fit_cache.load(KEY, kind="k") is None
    (warning,) = _warnings(caplog)
    assert str(path) in warning and "\n" not in warning
    fit_cache.save(KEY, {"a": 1}, kind="k")  # the next fit replaces it
    assert fit_cache.load(KEY, kind="k") == {"a": 1}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_or_folder_in_place_of_a_fit_is_a_miss_not_a_hang(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                                                   ) -> None:
    fifo = fit_cache.path_for(KEY, kind="k")
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    fit_cache.path_for(KEY, kind="k", format="torch").mkdir()
    assert fit_cache.load(KEY, kind="k") is None  # returns at once: nothing opened the FIFO
    assert len(_warnings(caplog)) == 2 and all("not a regular file" in w for w in _warnings(caplog))
    data = tmp_path / "fifo.npz"
    os.mkfifo(data)
    assert fit_cache.file_digest(data) == "not a file"


def test_a_corrupt_torch_file_is_a_miss_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    require("torch", "torch fit states")
    path = fit_cache.path_for(KEY, kind="k", format="torch")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"PK\x03\x04 truncated zip")
    assert fit_cache.load(KEY, kind="k") is None
    (warning,) = _warnings(caplog)
    assert str(path) in warning and "\n" not in warning


def test_a_state_the_backend_cannot_use_is_a_miss_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    fit_cache.save(KEY, {"labels": np.zeros(3)}, kind="k")

    def restore(state: dict[str, Any]) -> Any:
        return state["centers"]

    assert fit_cache.load(KEY, kind="k", restore=restore) is None
    (warning,) = _warnings(caplog)
    assert "KeyError" in warning and "centers" in warning


def test_a_pickle_carrying_os_system_never_runs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    marker = tmp_path / "ran"
    evil = pickle.dumps({"record": Payload(marker)})
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(Payload(control)))  # what a plain pickle.load of such a file does
    assert control.exists()
    path = fit_cache.path_for(KEY, kind="hartigan")
    path.parent.mkdir(parents=True)
    path.write_bytes(evil)
    assert fit_cache.load(KEY, kind="hartigan") is None
    assert fit_cache.load(KEY, kind="hartigan", restore=lambda s: s) is None
    assert not marker.exists()
    first, second = _warnings(caplog)
    assert "refused global" in first and "system" in first and "\n" not in first and first == second


def test_a_torch_file_carrying_os_system_never_runs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    torch = require("torch", "torch fit states")
    marker = tmp_path / "ran"
    path = fit_cache.path_for(KEY, kind="fit", folder="spa3d/fits", format="torch")
    path.parent.mkdir(parents=True)
    torch.save({"state_dict": {"w": torch.zeros(2)}, "calibration": Payload(marker)}, path)
    assert fit_cache.load(KEY, kind="fit", folder="spa3d/fits") is None
    assert not marker.exists()
    (warning,) = _warnings(caplog)
    assert "refused global" in warning and "\n" not in warning


# --- atomic and concurrent writes -------------------------------------------------------------------


_KILLED_WRITER = r"""
import os, pickle, signal, sys
import numpy as np
from harness import fit_cache

key, mode = sys.argv[1], sys.argv[2]

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if mode == "mid-write":  # half the bytes written, then killed: no cleanup runs
    def dump(obj, fh, protocol=None):
        data = pickle.dumps(obj, protocol=protocol)
        fh.write(data[: len(data) // 2])
        fh.flush()
        die()
    pickle.dump = dump
else:  # the whole file written, killed before it is renamed into place
    os.replace = die
fit_cache.save(key, {"tag": "new", "w": np.arange(100_000, dtype=np.float64)}, kind="probe")
"""


@pytest.mark.parametrize("mode", ["mid-write", "before-rename"])
@pytest.mark.parametrize("had_a_fit", [False, True])
def test_a_killed_writer_leaves_no_partial_file_that_loads(mode: str, had_a_fit: bool, cache: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    if had_a_fit:
        fit_cache.save(KEY, {"tag": "old", "w": np.ones(3)}, kind="probe")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", _KILLED_WRITER, KEY, mode], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == -signal.SIGKILL, run.stderr
    leftovers = list((cache / "fits").glob(".probe-*.tmp"))
    assert len(leftovers) == 1  # the writer did get that far
    if mode == "mid-write":
        from harness.safeload import SafeLoadError, load_pickle

        with pytest.raises(SafeLoadError):
            load_pickle(leftovers[0])  # really half a file
    back = fit_cache.load(KEY, kind="probe")
    if had_a_fit:
        assert back is not None and back["tag"] == "old" and np.array_equal(back["w"], np.ones(3))
    else:
        assert back is None and not fit_cache.path_for(KEY, kind="probe").exists()
    assert not _warnings(caplog)  # nothing half-written was even opened


def test_concurrent_writers_and_readers_see_whole_files(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for i in range(15):
                n = worker * 100 + i
                fit_cache.save(KEY, {"n": n, "w": np.full(20_000, n, dtype=np.int64)}, kind="k")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def read() -> None:
        for _ in range(60):
            state = fit_cache.load(KEY, kind="k")
            if state is None:
                continue
            if state["w"].shape != (20_000,) or not bool((state["w"] == state["n"]).all()):
                errors.append(AssertionError(f"a mixed or partial state {state['n']}"))
            seen.append(state["n"])

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)] + [threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not _warnings(caplog)
    final = fit_cache.load(KEY, kind="k")
    assert final is not None and final["n"] % 100 == 14  # some writer's last state, whole
    assert not list(fit_cache.path_for(KEY, kind="k").parent.glob("*.tmp"))


# --- every family that fits --------------------------------------------------------------------------


class Counter:
    """Wraps a real training function and counts its calls (the training itself runs)."""

    def __init__(self, fn: Any) -> None:
        self.fn, self.calls = fn, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.fn(*args, **kwargs)


def _predict(model: Any, requests: list[Request]) -> list[Any]:
    outs = asyncio.run(model.generate(requests))
    assert all(o.error is None for o in outs), [o.error for o in outs]
    return [o.prediction for o in outs]


def test_methods_clustering_fits_once_per_seed(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    from harness.modelspec import build_model
    from harness.tasks.methods.backends import hartigan
    from harness.tasks.methods.clustering import methods_cluster_iris

    counter = Counter(hartigan.run_clustering)
    monkeypatch.setattr(hartigan, "run_clustering", counter)
    task = methods_cluster_iris()
    train = list(task.train())
    requests = [task.prompt(s) for s in list(task.load())[:20]]
    first = build_model("hartigan:batched", {"progress": False})
    assert first.fit(train)["cached"] is False
    again = build_model("hartigan:batched", {"progress": False})
    assert again.fit(train)["cached"] is True and counter.calls == 1
    assert _predict(again, requests) == _predict(first, requests)
    assert again.state["record"]["objective"] == first.state["record"]["objective"]
    assert build_model("hartigan:batched", {"progress": False, "seed": 1}).fit(train)["cached"] is False
    assert counter.calls == 2
    assert len(list((cache / "fits").glob("hartigan-*.pkl"))) == 2


def test_methods_binary_networks_fit_once(monkeypatch: pytest.MonkeyPatch) -> None:
    require("torch", "the HTAF networks are torch")
    from harness.modelspec import build_model
    from harness.tasks.methods.backends import htaf_core
    from harness.tasks.methods.classification import make_task

    counter = Counter(htaf_core.train_nets)
    monkeypatch.setattr(htaf_core, "train_nets", counter)
    task = make_task("wine")
    train = list(task.train())
    requests = [task.prompt(s) for s in list(task.load())[:10]]
    settings = {"epochs": 2, "seeds": 2, "hidden": 8, "progress": False}
    first = build_model("htaf:mlp", settings)
    assert first.fit(train)["cached"] is False
    again = build_model("htaf:mlp", settings)
    assert again.fit(train)["cached"] is True and counter.calls == 1
    assert _predict(again, requests) == _predict(first, requests)
    assert build_model("htaf:mlp", {**settings, "seeds": 3}).fit(train)["cached"] is False and counter.calls == 2


@pytest.fixture
def toy(tmp_path: Path) -> Any:
    require("torch", "the nvs backends are torch")
    from harness.tasks.nvs.gs_toy import write_toy_scene
    from harness.tasks.nvs.scenes import load_nerf_synthetic

    return load_nerf_synthetic(write_toy_scene(tmp_path / "toy", size=32, n_train=3, n_test=1))


def _images(model: Any, requests: list[Request]) -> list[Any]:
    from harness.tasks.nvs.scenes import read_rgb

    return [read_rgb(p["image"]) for p in _predict(model, requests)]  # read now: a rerun rewrites the file


def test_nvs_gaussians_fit_once_per_seed(toy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.modelspec import build_model
    from harness.tasks.nvs import gs_model
    from harness.tasks.nvs.tasks import _sample

    counter = Counter(gs_model.fit_scene)
    monkeypatch.setattr(gs_model, "fit_scene", counter)
    train = [_sample(toy, v, True) for v in toy.train]
    requests = [Request(s.messages, sample_id=s.id) for s in (_sample(toy, v, False) for v in toy.test)]
    settings = {"steps": 3, "gaussians": 20, "patch": 16}

    def cached(model: Any) -> bool:
        return bool(next(iter(model.fit(train)["scenes"].values()))["cached"])

    first = build_model("gs:sh", settings)
    assert cached(first) is False
    before = _images(first, requests)
    again = build_model("gs:sh", settings)
    assert cached(again) is True and counter.calls == 1
    assert all(np.array_equal(a, b) for a, b in zip(_images(again, requests), before, strict=True))
    assert cached(build_model("gs:sh", {**settings, "seed": 1})) is False and counter.calls == 2


def test_nvs_feed_forward_fits_once_per_seed(toy: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.modelspec import build_model
    from harness.tasks.nvs import ff_backend
    from harness.tasks.nvs.tasks import _sample

    counter = Counter(ff_backend.train_network)
    monkeypatch.setattr(ff_backend, "train_network", counter)
    train = [_sample(toy, v, True) for v in toy.train]
    requests = [Request(s.messages, sample_id=s.id) for s in (_sample(toy, v, False) for v in toy.test)]
    settings = {"steps": 2, "width": 8}
    first = build_model("ff:consistency", settings)
    assert first.fit(train)["cached"] is False
    before = _images(first, requests)
    again = build_model("ff:consistency", settings)
    assert again.fit(train)["cached"] is True and counter.calls == 1
    assert all(np.array_equal(a, b) for a, b in zip(_images(again, requests), before, strict=True))
    assert build_model("ff:consistency", {**settings, "seed": 1}).fit(train)["cached"] is False
    assert counter.calls == 2


def test_reid_fits_once_per_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require("torch", "the reid network is torch")
    from PIL import Image

    from harness.modelspec import build_model
    from harness.tasks.reid.backends import net

    counter = Counter(net.train)
    monkeypatch.setattr(net, "train", counter)
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
    requests = [Request(s.messages, sample_id=f"q{s.id}") for s in train[:3]]
    settings = {"steps": 2, "batch_p": 2, "batch_k": 2, "width": 4, "dim": 8}
    first = build_model("reid:baseline", settings)
    assert first.fit(train)["cached"] is False
    again = build_model("reid:baseline", settings)
    assert again.fit(train)["cached"] is True and counter.calls == 1
    assert _predict(again, requests) == _predict(first, requests)
    assert build_model("reid:baseline", {**settings, "seed": 1}).fit(train)["cached"] is False
    assert counter.calls == 2
    # a training image changed in place (same path) is another train split: it refits
    rgba = rng.integers(0, 255, (64, 32, 4), dtype=np.uint8)
    rgba[..., 3] = 255
    Image.fromarray(rgba).save(str(train[0].messages[0].content[0].path))
    assert build_model("reid:baseline", settings).fit(train)["cached"] is False and counter.calls == 3


def test_spa3d_fits_once_per_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    require("torch", "the 3DSPA autoencoder is torch")
    from harness.modelspec import build_model
    from harness.tasks.spa3d import synth
    from harness.tasks.spa3d import train as spa3d_train
    from harness.tasks.spa3d.task import track_samples
    from harness.tasks.spa3d.tracks import save_tracks

    counter = Counter(spa3d_train.fit_scorer)
    monkeypatch.setattr(spa3d_train, "fit_scorer", counter)
    for i, tracks in enumerate(synth.realistic_set(5, seed=7)):
        save_tracks(tmp_path / "train" / f"{i:03d}.npz", tracks)
    train = track_samples(tmp_path / "train")
    requests = [Request(s.messages, sample_id=s.id) for s in train[:2]]
    first = build_model("spa3d:fit", {"steps": 2})
    assert first.fit(train)["cached"] is False
    again = build_model("spa3d:fit", {"steps": 2})
    report = again.fit(train)
    assert report["cached"] is True and counter.calls == 1
    assert report["steps"] == first.fit_report["steps"] and report["final_l1"] == first.fit_report["final_l1"]
    assert _predict(again, requests) == _predict(first, requests)
    assert list((cache / "spa3d" / "fits").glob("fit-*.pt"))
    assert build_model("spa3d:fit", {"steps": 2, "seed": 1}).fit(train)["cached"] is False and counter.calls == 2
    # with a checkpoint the user's file is the record: trained (resumed by its path), nothing cached beside it
    ckpt = tmp_path / "model.pt"
    assert build_model("spa3d:fit", {"steps": 2, "checkpoint": str(ckpt)}).fit(train)["cached"] is False
    assert ckpt.is_file() and counter.calls == 3
