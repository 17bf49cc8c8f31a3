"""Uni3D point encoder (code3d's ``-T uni3d=CKPT``): a literal numpy forward pass from the state
dict, a checkpoint written like the released one loaded strictly, permutation invariance, and
one-line errors for missing or mismatched checkpoints. No real weights can be loaded here; the
checkpoints are randomly initialised (the architecture and its key names are what is tested)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.special import erf

from harness.errors import UserError
from harness.tasks.code3d.model_scores import ModelScorers
from harness.tasks.code3d.uni3d import (
    SIZES,
    Uni3D,
    Uni3DCheckpointError,
    Uni3DScorer,
    build_model,
    read_state_dict,
    uni3d_input,
)


def box_surface(n: int, size: tuple[float, float, float], seed: int) -> np.ndarray:
    """Uniform samples on the surface of an axis-aligned box centred at 0 (area-weighted faces)."""
    rng = np.random.default_rng(seed)
    sx, sy, sz = size
    areas = np.array([sy * sz, sy * sz, sx * sz, sx * sz, sx * sy, sx * sy])
    face = rng.choice(6, size=n, p=areas / areas.sum())
    pts = (rng.random((n, 3)) - 0.5) * np.array(size)
    axis, sign = face // 2, np.where(face % 2 == 0, -0.5, 0.5)
    pts[np.arange(n), axis] = sign * np.array(size)[axis]
    return pts


def random_state(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Every parameter and BatchNorm statistic random (a fresh init leaves biases and norms trivial)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for k, v in model.state_dict().items():
        if k.endswith("num_batches_tracked"):
            out[k] = v.clone()
        elif k.endswith("running_var"):
            out[k] = torch.rand(v.shape, generator=gen) + 0.5
        else:
            out[k] = torch.randn(v.shape, generator=gen) * 0.1
    return out


# --- a literal forward pass in numpy (float64) from the state dict ------------------------------------
def _lin(x: np.ndarray, sd: dict, name: str, bias: bool = True) -> np.ndarray:
    w = sd[f"{name}.weight"].double().numpy()
    w = w[..., 0] if w.ndim == 3 else w  # Conv1d(k=1) == Linear
    return x @ w.T + (sd[f"{name}.bias"].double().numpy() if bias else 0.0)


def _ln(x: np.ndarray, sd: dict, name: str, eps: float = 1e-6) -> np.ndarray:
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * sd[f"{name}.weight"].double().numpy() + sd[f"{name}.bias"].double().numpy()


def _bn(x: np.ndarray, sd: dict, name: str) -> np.ndarray:
    g = {k: sd[f"{name}.{k}"].double().numpy() for k in ("weight", "bias", "running_mean", "running_var")}
    return (x - g["running_mean"]) / np.sqrt(g["running_var"] + 1e-5) * g["weight"] + g["bias"]


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def _silu(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.exp(-x))


def literal_embedding(sd: dict, cfg, pc: np.ndarray) -> np.ndarray:  # noqa: ANN001
    p = "point_encoder."
    xyz, rgb = pc[:, :3].astype(np.float64), pc[:, 3:].astype(np.float64)
    # farthest point sampling from the point farthest from the centroid
    chosen = [int(np.argmax(((xyz - xyz.mean(0)) ** 2).sum(1)))]
    dist = np.full(len(xyz), np.inf)
    for _ in range(cfg.num_group - 1):
        dist = np.minimum(dist, ((xyz - xyz[chosen[-1]]) ** 2).sum(1))
        chosen.append(int(np.argmax(dist)))
    centres = xyz[chosen]
    tokens = []
    for c in centres:
        nb = np.argsort(((xyz - c) ** 2).sum(1), kind="stable")[: cfg.group_size]
        f = np.concatenate([xyz[nb] - c, rgb[nb]], axis=1)  # (M, 6)
        h = _lin(np.maximum(_bn(_lin(f, sd, p + "encoder.first_conv.0"), sd, p + "encoder.first_conv.1"), 0),
                 sd, p + "encoder.first_conv.3")  # fmt: skip
        h = np.concatenate([np.repeat(h.max(0, keepdims=True), len(h), 0), h], axis=1)
        h = _lin(np.maximum(_bn(_lin(h, sd, p + "encoder.second_conv.0"), sd, p + "encoder.second_conv.1"), 0),
                 sd, p + "encoder.second_conv.3")  # fmt: skip
        tokens.append(h.max(0))
    x = _lin(np.stack(tokens), sd, p + "encoder2trans")
    pos = _lin(_gelu(_lin(centres, sd, p + "pos_embed.0")), sd, p + "pos_embed.2")
    x = np.concatenate([sd[p + "cls_token"].double().numpy()[0], x]) + np.concatenate(
        [sd[p + "cls_pos"].double().numpy()[0], pos]
    )
    heads, hd = cfg.heads, cfg.width // cfg.heads
    for i in range(cfg.depth):
        b = f"{p}visual.blocks.{i}."
        h = _ln(x, sd, b + "norm1")
        if cfg.qkv_fused:
            qkv = _lin(h, sd, b + "attn.qkv", bias=False)
            q, k, v = np.split(qkv, 3, axis=1)
            q, v = q + sd[b + "attn.q_bias"].double().numpy(), v + sd[b + "attn.v_bias"].double().numpy()
        else:
            q, k, v = (
                _lin(h, sd, b + "attn.q_proj"),
                _lin(h, sd, b + "attn.k_proj", bias=False),
                _lin(h, sd, b + "attn.v_proj"),
            )
        out = []
        for j in range(heads):
            s = slice(j * hd, (j + 1) * hd)
            a = q[:, s] @ k[:, s].T / np.sqrt(hd)
            a = np.exp(a - a.max(1, keepdims=True))
            out.append((a / a.sum(1, keepdims=True)) @ v[:, s])
        x = x + _lin(np.concatenate(out, axis=1), sd, b + "attn.proj")
        h = _ln(x, sd, b + "norm2")
        if cfg.mlp == "gelu":
            h = _lin(_gelu(_lin(h, sd, b + "mlp.fc1")), sd, b + "mlp.fc2")
        elif cfg.mlp == "glu":
            u = _lin(h, sd, b + "mlp.fc1")
            h = _lin(_silu(u[:, : cfg.hidden]) * u[:, cfg.hidden :], sd, b + "mlp.fc2")
        else:
            u = _silu(_lin(h, sd, b + "mlp.fc1_g")) * _lin(h, sd, b + "mlp.fc1_x")
            h = _lin(_ln(u, sd, b + "mlp.norm"), sd, b + "mlp.fc2")
        x = x + h
    emb = _lin(_ln(x[0], sd, p + "visual.fc_norm"), sd, p + "trans2embed")
    return emb / np.linalg.norm(emb)


@pytest.mark.parametrize("size", ["giant", "base", "tiny"])  # the three block kinds: GELU Mlp, SwiGLU + LN, GluMlp
def test_forward_equals_a_literal_computation(size: str) -> None:
    cfg = replace(SIZES[size], width=32, heads=4, depth=2, num_group=16, group_size=8, encoder_dim=24, embed_dim=12,
                  img_size=28)  # fmt: skip
    torch.manual_seed(0)
    state = random_state(Uni3D(cfg), seed=1)
    model = build_model(state, cfg)
    pc = uni3d_input(box_surface(300, (1.0, 0.6, 0.3), seed=2))
    with torch.inference_mode():
        got = model.encode_pc(torch.from_numpy(pc)[None])[0].double().numpy()
    want = literal_embedding(state, cfg, pc)
    np.testing.assert_allclose(got / np.linalg.norm(got), want, atol=2e-5)


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Uni3D-tiny checkpoint saved the way the released model.pt is: DeepSpeed's {"module": ...}
    with DDP's ``module.`` prefixes (random weights)."""
    torch.manual_seed(0)
    model = Uni3D(SIZES["tiny"])
    path = tmp_path_factory.mktemp("uni3d") / "model.pt"
    torch.save({"module": {f"module.{k}": v for k, v in model.state_dict().items()}, "epoch": 3}, path)
    return path


@pytest.fixture(scope="module")
def scorer(tiny_ckpt: Path) -> Uni3DScorer:
    return Uni3DScorer(tiny_ckpt, device="cpu")


def test_checkpoint_loads_strictly_and_cosine_is_the_embeddings_dot(tiny_ckpt: Path, scorer: Uni3DScorer) -> None:
    assert scorer.cfg.name == "tiny" and scorer.cfg.num_classes == 0
    state = read_state_dict(tiny_ckpt)
    for k, v in scorer.model.state_dict().items():  # every tensor is the checkpoint's
        assert torch.equal(v, state[k]), k
    table = box_surface(8192, (1.2, 0.8, 0.05), seed=3)
    a = scorer.embed(table)
    assert a.shape == (1024,) and np.linalg.norm(a) == pytest.approx(1.0, abs=1e-5)
    with torch.inference_mode():  # literal: the loaded module on the normalised xyz + 0.4 grey input
        raw = scorer.model.encode_pc(torch.from_numpy(uni3d_input(table))[None])[0].numpy()
    np.testing.assert_allclose(a, raw / np.linalg.norm(raw), atol=1e-6)
    # the point order, a shift and a uniform scale do not matter (FPS from the farthest point, normalised input)
    perm = np.random.default_rng(5).permutation(len(table))
    moved = scorer.embed(table[perm] * 3.0 + np.array([1.0, -2.0, 0.5]))
    np.testing.assert_allclose(moved, a, atol=1e-5)


def test_model_scores_measure_an_executed_candidate(scorer: Uni3DScorer, tmp_path: Path) -> None:
    from harness.tasks.code3d.executor import ExecResult
    from harness.tasks.code3d.references import Reference

    gold, pred = tmp_path / "ref.npy", tmp_path / "pred.npy"
    np.save(gold, box_surface(8192, (1.0, 1.0, 1.0), seed=6).astype(np.float32))
    np.save(pred, box_surface(8192, (1.0, 0.3, 2.0), seed=7).astype(np.float32))
    scorers = ModelScorers(uni3d=scorer)
    ref = Reference(points=str(gold), thumbs=None, renders=[], analysis={})
    values = scorers.measure(ExecResult("OK", points=str(pred)), ref, "a box", "a box")
    want = float(scorer.embed(np.load(pred)) @ scorers.reference_embedding(str(gold)))
    assert values == {"uni3d_shape_sim": pytest.approx(want, abs=1e-6)}
    assert want < 0.9999  # a different shape, a different embedding (even with random weights)
    assert scorers.measure(ExecResult("ERR_EXEC", points=None), ref, "a box", "a box") == {}
    same = scorers.measure(ExecResult("OK", points=str(gold)), ref, "a box", "a box")["uni3d_shape_sim"]
    assert same == pytest.approx(1.0, abs=1e-5)


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert isinstance(exc.value, UserError) and "\n" not in text
    return text


def test_missing_and_mismatched_checkpoints_are_one_line_errors(tiny_ckpt: Path, tmp_path: Path) -> None:
    with pytest.raises(Uni3DCheckpointError) as e:
        Uni3DScorer(tmp_path / "nope.pt")
    assert "is not a file" in _one_line(e)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a torch file at all")
    with pytest.raises(Uni3DCheckpointError) as e:
        Uni3DScorer(junk)
    assert "not a readable torch file" in _one_line(e)
    state = read_state_dict(tiny_ckpt)
    cases = {
        "missing": {k: v for k, v in state.items() if "blocks.3.mlp.fc2" not in k},
        "unexpected": {**state, "point_encoder.extra.weight": torch.zeros(2)},
        "shape": {**state, "point_encoder.trans2embed.weight": torch.zeros(512, 192)},
        "width 100": {k: (torch.zeros(100) if k.endswith("blocks.0.norm1.weight") else v) for k, v in state.items()},
        "not a Uni3D checkpoint": {"conv.weight": torch.zeros(3)},
    }
    for expected, sd in cases.items():
        path = tmp_path / f"{expected.replace(' ', '_')}.pt"
        torch.save(sd, path)
        with pytest.raises(Uni3DCheckpointError) as e:
            Uni3DScorer(path)
        assert expected in _one_line(e), (expected, str(e.value))
