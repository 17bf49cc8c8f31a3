"""3DSPA scoring units: every visible track is held out exactly once, the calibrated realism is
hand-checked, and a calibration survives the checkpoint round trip."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pytest

from harness.tasks.spa3d import synth
from harness.tasks.spa3d.calibration import Calibration, fit_calibration


@pytest.fixture(scope="module")
def untrained_model():
    import torch

    from harness.tasks.spa3d.autoencoder import AutoencoderConfig, TrackAutoencoder

    torch.manual_seed(0)
    return TrackAutoencoder(AutoencoderConfig()).eval()


def test_every_visible_track_is_a_query_exactly_once(untrained_model):
    from harness.tasks.spa3d.scorer import RealismScorer

    video = synth.realistic_set(1, seed=3)[0]
    video.visible[:7] = False  # never-visible tracks cannot be queried (no query frame)
    scorer = RealismScorer(untrained_model, folds=3, query=10)
    rec = scorer.reconstruct(video)
    seen = np.flatnonzero(video.visible.any(axis=1))
    assert list(rec.query) == list(seen)  # each once, in track order
    assert rec.positions.shape == (len(seen), video.num_frames, 3)
    assert np.all(video.visible[rec.query, rec.query_frames])  # query frame = first visible frame
    # the decoder passes through the query point at its query frame
    anchored = rec.positions[np.arange(len(seen)), rec.query_frames]
    np.testing.assert_allclose(anchored, video.tracks_3d[rec.query, rec.query_frames], atol=1e-4)
    # deterministic: the same folds and the same score every time
    assert scorer.score_tracks(video) == scorer.score_tracks(video)


def test_calibrated_realism_hand_checked():
    cal = fit_calibration([{"position_surprise": p, "visibility_surprise": v}
                           for p, v in ((1.0, 0.2), (2.0, 0.4), (3.0, 0.6))])
    assert cal.mean == pytest.approx((2.0, 0.4)) and cal.std == pytest.approx((1.0, 0.2))  # ddof = 1
    assert cal.videos == 3
    metrics = {"position_surprise": 4.0, "visibility_surprise": 0.3}
    assert cal.z_scores(metrics) == pytest.approx((2.0, -0.5))
    assert cal.realism(metrics) == pytest.approx(-1.5)
    assert Calibration.from_dict(cal.to_dict()) == cal
    # non-finite rows are dropped; fewer than two usable videos is a clear error
    with pytest.raises(ValueError, match="at least 2"):
        fit_calibration([{"position_surprise": 1.0, "visibility_surprise": float("nan")},
                         {"position_surprise": 1.0, "visibility_surprise": 0.1}])


def test_calibration_travels_with_the_checkpoint(tmp_path):
    from harness.tasks.spa3d.scorer import RealismScorer
    from harness.tasks.spa3d.train import TrainConfig, fit_scorer, load_calibration, split_for_calibration

    videos = synth.realistic_set(10, seed=4)
    train_part, cal_part = split_for_calibration(videos)
    assert (len(train_part), len(cal_part)) == (8, 2)
    assert not {id(v) for v in train_part} & {id(v) for v in cal_part}
    with pytest.raises(ValueError, match="at least 4"):
        split_for_calibration(videos[:3])

    ckpt = tmp_path / "m.pt"
    scorer, history = fit_scorer(videos, TrainConfig(steps=4, batch_size=2), checkpoint=ckpt)
    assert len(history) == 4 and scorer.calibration.videos == 2
    assert load_calibration(ckpt) == scorer.calibration
    loaded = RealismScorer.from_checkpoint(ckpt)
    result = loaded.score_tracks(videos[0])
    assert result["calibrated"] == 1.0
    assert result["realism"] == pytest.approx(scorer.calibration.realism(result))
    assert result == scorer.score_tracks(videos[0])

    # a checkpoint without calibration falls back to the Average Jaccard
    plain = RealismScorer(loaded.model).score_tracks(videos[0])
    assert plain["calibrated"] == 0.0 and plain["realism"] == plain["average_jaccard"]
    # resuming training keeps the optimiser state that attaching the calibration preserved; the whole
    # checkpoint is tensors and plain data (it loads with weights_only=True)
    from harness.safeload import load_torch

    assert load_torch(ckpt)["optimiser"] is not None


def _checkpoint(path, **changes):
    import torch

    from harness.tasks.spa3d.autoencoder import AutoencoderConfig, TrackAutoencoder

    cfg = AutoencoderConfig(width=16, num_latents=4, heads=2)
    state = {"config": cfg.to_dict(), "state_dict": TrackAutoencoder(cfg).state_dict(), "optimiser": None,
             "step": 0, "history": [], "calibration": None, **changes}
    torch.save(state, path)
    return path


def test_a_checkpoint_is_checked_before_a_model_is_built(tmp_path):
    import resource

    import torch

    from harness.tasks.spa3d.train import CheckpointError, load_checkpoint, load_model

    good = _checkpoint(tmp_path / "good.pt")
    assert load_model(good).cfg.width == 16
    small = {"width": 16, "num_latents": 4, "heads": 2}
    # a config naming a model of tens of gigabytes, with the small model's weights: laid out on the meta
    # device, compared with the weights and refused; nothing of its size is allocated
    huge = _checkpoint(tmp_path / "huge.pt", config={**small, "width": 65536, "num_latents": 65536})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CheckpointError, match="huge.pt: state_dict tensor 'latents' is torch.float32 \\[4, 16\\]"):
        load_model(huge)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500_000  # KiB
    cases = [
        ({"config": {**small, "width": 10**9}}, "config field 'width' must be an integer from 1 to 65536"),
        ({"config": {**small, "width": "wide"}}, "config field 'width' must be an integer"),
        ({"config": {**small, "rogue": 1}}, "config field 'rogue' is not"),
        ({"config": {**small, "heads": 3}}, "does not describe a model"),
        ({"state_dict": {"latents": torch.zeros(4, 16)}}, "state_dict has no tensor"),
        ({"calibration": {"mean": [1.0, float("nan")], "std": [1.0, 1.0], "videos": 3}}, "field 'calibration'"),
        ({"calibration": {"mean": [1.0], "std": [1.0, 1.0], "videos": 3}}, "field 'calibration'"),
        ({"config": [1, 2]}, "field 'config' is missing or not a dict"),
    ]
    for changes, fragment in cases:
        path = _checkpoint(tmp_path / "bad.pt", **changes)
        with pytest.raises(CheckpointError, match=fragment) as err:
            load_checkpoint(path)
        assert "\n" not in str(err.value) and str(path) in str(err.value)
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(CheckpointError, match="not a 3DSPA checkpoint"):
        load_model(tmp_path / "list.pt")


def test_checkpoints_with_a_numpy_learning_rate_still_load(tmp_path):
    """Checkpoints written before the learning rate was stored as a float hold a numpy float64 in the
    optimiser state: weights_only loading takes numpy numbers, so they still load."""
    path = _checkpoint(tmp_path / "old.pt", optimiser={"state": {}, "param_groups": [{"lr": np.float64(1e-3)}]})
    from harness.tasks.spa3d.train import load_model

    assert load_model(path).cfg.heads == 2
