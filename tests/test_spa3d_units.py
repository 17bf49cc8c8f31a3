"""3DSPA units: TAPVid-3D metrics on hand-checked cases, track-file errors, loss/gradients,
synthetic physics and violations, lifting, the missing-extractor error."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pytest

from harness.tasks.spa3d import synth
from harness.tasks.spa3d.metrics import query_masked_metrics
from harness.tasks.spa3d.tracks import TrackFileError, Tracks, load_tracks, save_tracks

F2 = np.array([2.0, 2.0, 0.0, 0.0])  # fx = fy = 2 and z = 2: the d-pixel threshold is d units


def _line(errors: list[float]) -> tuple[np.ndarray, np.ndarray]:
    gt = np.zeros((1, len(errors), 3))
    gt[..., 2] = 2.0
    pred = gt.copy()
    pred[0, :, 0] += errors
    return gt, pred


def test_average_jaccard_hand_checked():
    gt, pred = _line([0.0, 1.5, 5.0])  # query frame 0 is not evaluated
    vis = np.ones((1, 3), bool)
    m = query_masked_metrics(gt, vis, pred, vis, np.array([0]), F2)
    # d=1: TP 0, FP 2 -> 0; d=2,4: TP 1, FP 1 -> 1/3; d=8,16: TP 2 -> 1
    assert m["jaccard_1"] == 0 and m["jaccard_2"] == pytest.approx(1 / 3) and m["jaccard_16"] == 1
    assert m["average_jaccard"] == pytest.approx(8 / 15)
    assert m["average_pts_within_thresh"] == pytest.approx(0.6)
    assert m["occlusion_accuracy"] == 1.0 and m["error"] == pytest.approx(3.25)


def test_jaccard_counts_visible_predictions_of_occluded_points_as_false_positives():
    gt, pred = _line([0.0, 0.0, 0.0])
    gt_vis = np.array([[True, True, False]])
    m = query_masked_metrics(gt, gt_vis, pred, np.ones((1, 3), bool), np.array([0]), F2)
    assert m["average_jaccard"] == pytest.approx(0.5) and m["occlusion_accuracy"] == pytest.approx(0.5)
    m2 = query_masked_metrics(gt, gt_vis, pred, gt_vis, np.array([0]), F2)
    assert m2["average_jaccard"] == 1.0 and m2["occlusion_accuracy"] == 1.0


def test_threshold_scales_with_depth_and_fixed_metric_option():
    gt, pred = _line([0.0, 0.03])
    vis = np.ones((1, 2), bool)
    far = gt.copy()
    far[..., 2] = 200.0
    pred_far = far.copy()
    pred_far[0, 1, 0] += 0.03
    near = query_masked_metrics(gt, vis, pred, vis, np.array([0]), np.array([256.0, 256, 0, 0]))
    farm = query_masked_metrics(far, vis, pred_far, vis, np.array([0]), np.array([256.0, 256, 0, 0]))
    assert farm["average_jaccard"] > near["average_jaccard"]  # same error, farther point: more tolerance
    fixed = query_masked_metrics(gt, vis, pred, vis, np.array([0]), fixed_metric=True)
    assert fixed["jaccard_1"] == 0 and fixed["jaccard_2"] == 1  # 0.03 m: outside 1 cm, inside 4 cm


def test_npz_round_trip_and_clear_errors(tmp_path):
    tracks = Tracks(np.random.rand(4, 5, 3).astype(np.float32) + [0, 0, 2], np.ones((4, 5), bool))
    path = save_tracks(tmp_path / "ok.npz", tracks, dino_features=np.ones((4, 5, 6), np.float32))
    loaded = load_tracks(path)
    assert loaded.tracks_3d.shape == (4, 5, 3) and loaded.feature_dim == 6
    np.savez(tmp_path / "nofield.npz", tracks_3d=np.zeros((4, 5, 3)))
    with pytest.raises(TrackFileError, match=r"nofield\.npz: missing field 'visible'"):
        load_tracks(tmp_path / "nofield.npz")
    np.savez(tmp_path / "shape.npz", tracks_3d=np.zeros((4, 5, 2)), visible=np.ones((4, 5)))
    with pytest.raises(TrackFileError, match=r"shape\.npz: field 'tracks_3d' should have shape \[N, T, 3\]"):
        load_tracks(tmp_path / "shape.npz")
    np.savez(tmp_path / "vis.npz", tracks_3d=np.zeros((4, 5, 3)), visible=np.ones((4, 6)))
    with pytest.raises(TrackFileError, match=r"field 'visible' should have shape \[4, 5\]"):
        load_tracks(tmp_path / "vis.npz")
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(TrackFileError, match="not a readable .npz"):
        load_tracks(tmp_path / "junk.npz")
    with pytest.raises(TrackFileError, match="file not found"):
        load_tracks(tmp_path / "absent.npz")
    # the paper's [N, T, 1] visibility layout is accepted
    np.savez(tmp_path / "vis1.npz", tracks_3d=np.ones((4, 5, 3)), visible=np.ones((4, 5, 1)))
    assert load_tracks(tmp_path / "vis1.npz").visible.shape == (4, 5)


def test_loss_is_the_papers_and_gradients_are_finite():
    import torch

    from harness.tasks.spa3d.autoencoder import AutoencoderConfig, TrackAutoencoder, paper_loss

    torch.manual_seed(0)
    target = torch.zeros(1, 2, 4, 3)
    vis = torch.tensor([[[1, 1, 0, 0], [1, 1, 1, 1]]], dtype=torch.bool)
    pred = target + 0.5
    pred[0, 0, 2:] += 100  # occluded points never count in the position term
    logits = torch.zeros(1, 2, 4)
    total, parts = paper_loss(pred, logits, target, vis)
    assert parts["l1"] == pytest.approx(0.5) and parts["bce"] == pytest.approx(np.log(2), rel=1e-5)
    assert float(total) == pytest.approx(5000 * 0.5 + 1e-8 * np.log(2))
    model = TrackAutoencoder(AutoencoderConfig(num_frames=8, feature_dim=3, width=16, num_latents=4, heads=2))
    support = {"pos": torch.randn(2, 10, 8, 3), "vis": torch.rand(2, 10, 8) > 0.3, "feats": torch.randn(2, 10, 8, 3)}
    query = {"pos": torch.randn(2, 5, 8, 3), "frame": torch.randint(0, 8, (2, 5)), "feats": torch.randn(2, 5, 8, 3)}
    pos, vis_logits = model(support, query)
    assert pos.shape == (2, 5, 8, 3) and vis_logits.shape == (2, 5, 8)
    # decoded tracks pass through the query point at its query frame
    at_q = torch.gather(pos, 2, query["frame"][..., None, None].expand(-1, -1, 1, 3)).squeeze(2)
    want = torch.gather(query["pos"], 2, query["frame"][..., None, None].expand(-1, -1, 1, 3)).squeeze(2)
    assert torch.allclose(at_q, want, atol=1e-5)
    loss, _ = paper_loss(pos, vis_logits, query["pos"], torch.rand(2, 5, 8) > 0.5)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert model.visibility_head[-1].weight.grad.abs().sum() > 0  # the 1e-8 term still reaches its head


def test_synthetic_physics_is_physical_and_violations_differ():
    rng = np.random.default_rng(0)
    cfg = synth.SceneConfig()
    scene = synth.random_scene(rng, cfg)
    centres, _, _ = synth.simulate(scene, 40, synth.Rules())
    assert (centres[..., 1] >= synth.FLOOR_Y + scene.radius[None] - 1e-9).all()  # nothing sinks into the floor
    free = synth.random_scene(np.random.default_rng(3), synth.SceneConfig(min_objects=1, max_objects=1))
    free.pos[0] = [0, 0.5, 4]
    free.vel[0] = [0, 0, 0]
    c, _, _ = synth.simulate(free, 6, synth.Rules())
    t = np.arange(6) / synth.FPS
    assert np.allclose(c[:, 0, 1], 0.5 - 0.5 * synth.GRAVITY * t**2, atol=0.02)  # free fall
    for violation in synth.VIOLATIONS:
        pair = synth.make_pair(np.random.default_rng(1), cfg, violation)
        same_before = np.allclose(pair.realistic.tracks_3d[:, : pair.t0], pair.violated.tracks_3d[:, : pair.t0])
        differs = (not np.allclose(pair.realistic.tracks_3d, pair.violated.tracks_3d)
                   or (pair.realistic.visible != pair.violated.visible).any())
        assert same_before and differs, violation
        assert 0.2 < pair.realistic.visible.mean() < 0.8  # back faces and occlusions are hidden


def test_lift_uses_the_papers_intrinsics():
    from harness.tasks.spa3d.extract import lift_to_3d

    tracks_2d = np.array([[[64.0, 32.0]]])  # x, y in a 64x128 (H x W) frame
    depth = np.full((1, 64, 128), 3.0)
    xyz = lift_to_3d(tracks_2d, depth, 64, 128)
    # fx = fy = max(H, W) = 128, cx = 64, cy = 32: the principal point lifts to (0, 0, z)
    assert np.allclose(xyz[0, 0], [0, 0, 3])
    xyz2 = lift_to_3d(np.array([[[128.0 - 1, 32.0]]]), depth, 64, 128)
    assert xyz2[0, 0, 0] == pytest.approx((127 - 64) * 3 / 128)


def test_missing_extractor_error_names_what_is_missing(tmp_path, monkeypatch):
    from harness.tasks.spa3d.extract import ExtractorMissing, ExtractorSpec, extract_tracks

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = ExtractorSpec(dino_model="no-such/dino-model", depth_model="no-such/depth-model")
    with pytest.raises(ExtractorMissing) as info:
        extract_tracks(tmp_path / "clip.mp4", spec)
    msg = str(info.value)
    assert "CoTracker3" in msg and "'no-such/depth-model'" in msg and "'no-such/dino-model'" in msg
    assert "\n" not in msg


def test_training_and_scoring_with_semantic_features(tmp_path):
    from harness.tasks.spa3d.scorer import RealismScorer
    from harness.tasks.spa3d.train import TrainConfig, load_model, train

    cfg = synth.SceneConfig(feature_dim=5)
    videos = synth.realistic_set(4, seed=7, cfg=cfg)
    assert videos[0].feature_dim == 5
    tc = TrainConfig(steps=3, batch_size=2)
    tc.model.feature_dim = 5
    _, history = train(videos, tc, checkpoint=tmp_path / "f.pt")
    assert len(history) == 3 and all(np.isfinite(h["loss"]) for h in history)
    scorer = RealismScorer(load_model(tmp_path / "f.pt"))
    path = save_tracks(tmp_path / "v.npz", videos[0])
    result = scorer.score_path(path)
    assert 0.0 <= result["realism"] <= 1.0 and np.isfinite(result["error"])
    with pytest.raises(ValueError, match="feature channels"):
        scorer.score_tracks(synth.realistic_set(1, seed=8)[0])  # geometry-only tracks, feature model
    with pytest.raises(FileNotFoundError, match=r"clip\.mp4: not found"):
        scorer.score_path(tmp_path / "clip.mp4")


def test_correlations_and_auroc():
    from harness.tasks.spa3d.task import auroc, correlation_metrics

    rows = {m.name: m for m in correlation_metrics([1, 2, 3, 4, 5], [2, 4, 6, 8, 11])}
    assert rows["spearman"].value == pytest.approx(1.0) and rows["pearson"].value > 0.99
    assert rows["spearman"].n == 5
    assert correlation_metrics([1, 1, 1], [1, 2, 3]) == []  # undefined: no row, never a NaN
    assert auroc([3, 2], [1, 2]) == pytest.approx((1 + 1 + 1 + 0.5) / 4)


def test_scorer_callable_from_other_tasks_on_video_outputs(tmp_path):
    import torch

    from harness.tasks.spa3d.autoencoder import AutoencoderConfig, TrackAutoencoder
    from harness.tasks.spa3d.scorer import RealismScorer, score_video_output
    from harness.types import Output

    torch.manual_seed(0)
    scorer = RealismScorer(TrackAutoencoder(AutoencoderConfig()).eval())
    video = tmp_path / "gen.mp4"
    video.write_bytes(b"")  # stands in for a generated video whose tracks were precomputed
    save_tracks(tmp_path / "gen.mp4.npz", synth.realistic_set(1, seed=9)[0])
    score = score_video_output(Output(prediction={"path": str(video)}), scorer)
    assert score.unscored is None and 0 <= score.values["spa3d_realism"] <= 1
    assert score_video_output(Output(text="no video"), scorer).unscored.startswith("no generated video")
    bad = score_video_output(Output(prediction=str(tmp_path / "missing.mp4")), scorer)
    assert "FileNotFoundError" in bad.unscored
