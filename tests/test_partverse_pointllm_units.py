"""PointLLM's parts without a language model: the Point-BERT layout the released checkpoints name,
grouping (farthest-point sampling and kNN) against brute force, the Vicuna v1.1 prompt, and the
checks and ``pc_norm`` a points file goes through."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.tasks.partverse.pointbert import (
    PRESETS,
    BackboneConfigError,
    PointBertConfig,
    PointTransformer,
    build_projector,
    farthest_point_indices,
)
from harness.tasks.partverse.pointllm_cloud import CloudInputError, read_cloud
from harness.tasks.partverse.pointllm_prompt import PointTokens, PromptError, build_prompt
from harness.types import Message, Part

os.environ.setdefault("OMP_NUM_THREADS", "1")


class Cfg:  # a config object as transformers gives one: attributes
    def __init__(self, **kw: object) -> None:
        self.__dict__.update(kw)


# ---- the released layout -----------------------------------------------------------------------------
def _shapes(module: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def test_v12_backbone_and_projector_have_the_released_names_and_shapes() -> None:
    cfg = PointBertConfig.resolve(Cfg(point_backbone="PointBERT", use_color=True))  # v1.2 is the default
    assert (cfg.trans_dim, cfg.point_dims, cfg.token_len, cfg.group_size) == (384, 6, 513, 32)
    with torch.device("meta"):  # shapes only, no memory
        backbone, proj = PointTransformer(cfg), build_projector(cfg, 4096)
    shapes = _shapes(backbone)
    assert shapes["encoder.first_conv.0.weight"] == (128, 6, 1)  # xyz + rgb in
    assert shapes["encoder.first_conv.1.running_var"] == (128,)
    assert shapes["encoder.second_conv.0.weight"] == (512, 512, 1)
    assert shapes["encoder.second_conv.3.weight"] == (256, 512, 1)
    assert shapes["reduce_dim.weight"] == (384, 256)
    assert shapes["cls_token"] == shapes["cls_pos"] == (1, 1, 384)
    assert shapes["pos_embed.0.weight"] == (128, 3) and shapes["pos_embed.2.weight"] == (384, 128)
    assert shapes["blocks.blocks.11.attn.qkv.weight"] == (1152, 384)
    assert "blocks.blocks.11.attn.qkv.bias" not in shapes and "blocks.blocks.12.norm1.weight" not in shapes
    assert shapes["blocks.blocks.0.mlp.fc1.weight"] == (1536, 384) and shapes["norm.weight"] == (384,)
    assert not any(k.startswith("group_divider") for k in shapes)  # grouping holds no weights
    assert _shapes(proj) == {"0.weight": (1024, 384), "0.bias": (1024,), "2.weight": (2048, 1024),
                             "2.bias": (2048,), "4.weight": (4096, 2048), "4.bias": (4096,)}


def test_v11_preset_and_explicit_configs() -> None:
    cfg = PointBertConfig.resolve(Cfg(point_backbone="PointBERT", use_color=True,
                                      point_backbone_config_name="PointTransformer_base_8192point"))
    assert (cfg.trans_dim, cfg.group_size, cfg.encoder_dims, cfg.num_heads) == (1152, 48, 512, 12)
    with torch.device("meta"):
        assert _shapes(build_projector(cfg, 5120)) == {"weight": (5120, 1152), "bias": (5120,)}  # one Linear
    pooled = PointBertConfig.from_mapping({**PRESETS["PointTransformer_8192point_2layer"], "use_max_pool": True})
    assert (pooled.token_len, pooled.output_dim) == (1, 768)
    with pytest.raises(BackboneConfigError, match="none of PointLLM's configs"):
        PointBertConfig.resolve(Cfg(point_backbone="PointBERT", point_backbone_config_name="nope"))
    with pytest.raises(BackboneConfigError, match="only PointLLM's 'PointBERT'"):
        PointBertConfig.resolve(Cfg(point_backbone="PointNet"))
    with pytest.raises(BackboneConfigError, match="unknown Point-BERT field"):
        PointBertConfig.from_mapping({**PRESETS["PointTransformer_8192point_2layer"], "trans_dims": 3})


# ---- grouping --------------------------------------------------------------------------------------
def _fps_reference(xyz: np.ndarray, count: int, start: int) -> list[int]:
    taken, nearest = [start], np.full(len(xyz), np.inf)
    for _ in range(count - 1):
        nearest = np.minimum(nearest, ((xyz - xyz[taken[-1]]) ** 2).sum(1))
        taken.append(int(nearest.argmax()))
    return taken


def test_grouping_is_farthest_point_sampling_then_nearest_neighbours() -> None:
    rng = np.random.default_rng(0)
    cloud = np.concatenate([rng.normal(size=(300, 3)), rng.random((300, 3))], axis=1).astype(np.float32)
    points = torch.from_numpy(cloud).unsqueeze(0)
    got = farthest_point_indices(points[..., :3], 12, torch.tensor([7]))[0].tolist()
    assert got == _fps_reference(cloud[:, :3].astype(np.float64), 12, 7)

    cfg = PointBertConfig.from_mapping({"trans_dim": 8, "depth": 1, "num_heads": 2, "group_size": 5, "num_group": 12,
                                        "encoder_dims": 8, "point_dims": 6})
    groups, centres = PointTransformer(cfg).group_divider(points, torch.tensor([7]))
    assert groups.shape == (1, 12, 5, 6)
    assert np.allclose(centres[0].numpy(), cloud[got, :3])
    for g, centre in enumerate(cloud[got, :3]):
        nearest = np.argsort(((cloud[:, :3] - centre) ** 2).sum(1))[:5]
        assert np.allclose(groups[0, g, :, :3].numpy(), cloud[nearest, :3] - centre, atol=1e-6)  # relative xyz
        assert np.allclose(groups[0, g, :, 3:].numpy(), cloud[nearest, 3:])  # rgb as it was


def test_backbone_output_tokens_and_order_independence_from_a_fixed_start() -> None:
    torch.manual_seed(0)
    cfg = PointBertConfig.from_mapping({"trans_dim": 16, "depth": 2, "num_heads": 2, "group_size": 6, "num_group": 10,
                                        "encoder_dims": 16, "point_dims": 6})
    net = PointTransformer(cfg).eval()
    cloud = torch.rand(1, 200, 6)
    with torch.no_grad():
        out = net(cloud)  # start: the point farthest from the centroid
        perm = torch.randperm(200)
        again = net(cloud[:, perm])
        other_start = net(cloud, torch.tensor([3]))
    assert out.shape == (1, cfg.token_len, 16) == (1, 11, 16)
    assert torch.allclose(out, again, atol=1e-5)
    assert not torch.allclose(out, other_start, atol=1e-3)  # the start changes the centres


# ---- the prompt --------------------------------------------------------------------------------------
TOKENS = PointTokens("<point_patch>", 3, "<point_start>", "<point_end>")
SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
          "detailed, and polite answers to the user's questions.")


def test_prompt_is_vicuna_v11_with_the_point_tokens_first() -> None:
    cloud = Part("points", path="/x/oid_8192.npy")
    prompt, part = build_prompt([Message("user", [Part("text", "Caption this 3D model in detail."), cloud])], TOKENS)
    assert part is cloud
    assert prompt == (SYSTEM + " USER: <point_start>" + "<point_patch>" * 3
                      + "<point_end>\nCaption this 3D model in detail. ASSISTANT:")
    prompt, _ = build_prompt([Message("system", [Part("text", "Be brief.")]),
                              Message("user", [cloud, Part("text", "hi")]),
                              Message.text("assistant", "a chair"), Message.text("user", "colour?")],
                             PointTokens("<point_patch>", 2))
    assert prompt == "Be brief. USER: <point_patch><point_patch>\nhi ASSISTANT: a chair</s>USER: colour? ASSISTANT:"
    text_only, none = build_prompt([Message.text("user", "hello")], TOKENS)
    assert none is None and text_only == SYSTEM + " USER: hello ASSISTANT:"


@pytest.mark.parametrize(("messages", "match"), [
    ([Message("user", [Part("points", path="a"), Part("points", path="b")])], "one point cloud"),
    ([Message("user", [Part("image", path="a.png"), Part("text", "x")])], "not image"),
    ([Message.text("user", "a"), Message.text("user", "b")], "alternate"),
    ([Message.text("user", "a"), Message.text("assistant", "b")], "end with a user message"),
    ([Message("assistant", [Part("points", path="a")]), Message.text("user", "b")], "user message"),
    ([Message("user", [Part("points", path="a"), Part("text", "see <point_patch>")])], "own <point_patch>"),
])
def test_prompt_refusals(messages: list[Message], match: str) -> None:
    with pytest.raises(PromptError, match=match):
        build_prompt(messages, TOKENS)


# ---- the points file ---------------------------------------------------------------------------------
def _save(path: Path, array: object) -> Path:
    np.save(path, array, allow_pickle=True)
    return path


def test_cloud_is_pc_normed_with_colour_untouched(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    raw = np.concatenate([rng.normal(5.0, 3.0, (64, 3)), rng.random((64, 3))], axis=1)
    cloud = read_cloud(_save(tmp_path / "ok.npy", raw.astype(np.float32)), use_color=True, min_points=16)
    assert cloud.dtype == np.float32 and cloud.shape == (64, 6)
    assert np.allclose(cloud[:, :3].mean(0), 0, atol=1e-6)
    assert np.sqrt((cloud[:, :3] ** 2).sum(1)).max() == pytest.approx(1.0)
    assert np.allclose(cloud[:, 3:], raw[:, 3:], atol=1e-6)
    # hand check of one point: (p - centroid) / max radius
    centred = raw[:, :3] - raw[:, :3].mean(0)
    assert np.allclose(cloud[0, :3], centred[0] / np.sqrt((centred**2).sum(1)).max(), atol=1e-6)
    xyz_only = read_cloud(tmp_path / "ok.npy", use_color=False, min_points=16)
    assert xyz_only.shape == (64, 3)  # a model without colour drops rgb, as PointLLM does


def test_bad_clouds_fail_with_their_kind(tmp_path: Path) -> None:
    good = np.random.default_rng(2).random((64, 6)).astype(np.float32)
    nan = good.copy()
    nan[5, 1] = np.nan
    bytes_colour = good.copy()
    bytes_colour[:, 3:] *= 255
    cases = {
        "points_missing": tmp_path / "absent.npy",
        "points_shape": _save(tmp_path / "xyz.npy", good[:, :3]),
        "points_nonfinite": _save(tmp_path / "nan.npy", nan),
        "points_colour": _save(tmp_path / "bytes.npy", bytes_colour),
        "points_degenerate": _save(tmp_path / "same.npy", np.tile(good[:1], (64, 1))),
    }
    for kind, path in cases.items():
        with pytest.raises(CloudInputError) as info:
            read_cloud(path, use_color=True, min_points=16)
        assert info.value.kind == kind and str(path) in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(CloudInputError, match="needs at least 16") as info:
        read_cloud(_save(tmp_path / "few.npy", good[:8]), use_color=True, min_points=16)
    assert info.value.kind == "points_shape"
    pickled = tmp_path / "obj.npy"
    _save(pickled, np.array([{"a": 1}], dtype=object))
    (tmp_path / "text.npy").write_bytes(pickle.dumps("not numpy"))
    _save(tmp_path / "str.npy", np.array([["a"] * 6] * 64))
    for name in ("obj.npy", "text.npy", "str.npy"):
        with pytest.raises(CloudInputError) as info:
            read_cloud(tmp_path / name, use_color=True, min_points=16)
        assert info.value.kind == "points_unreadable"
