"""Package-shipped data for the method tasks (scikit-learn's bundled copies: no download).

Each item becomes a Sample whose single user part carries the feature vector in
``options["features"]`` (and ``options["shape"]`` for images); the text repeats it for text models.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.types import Message, Part, Sample

# sklearn.datasets loaders of data that ships inside the scikit-learn wheel
BUNDLED = ("digits", "iris", "wine", "breast_cancer")


@dataclass
class Table:
    name: str
    X: Any  # float64 [n, d]
    y: Any  # int64 [n]
    image_shape: tuple[int, int] | None = None


def load_table(name: str) -> Table:
    from sklearn import datasets

    if name not in BUNDLED:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(BUNDLED)}")
    bunch = getattr(datasets, f"load_{name}")()
    shape = (8, 8) if name == "digits" else None
    return Table(name, bunch.data.astype("float64"), bunch.target.astype("int64"), shape)


def blobs(n: int, d: int, k: int, std: float, seed: int) -> Table:
    from sklearn.datasets import make_blobs

    X, y = make_blobs(n_samples=n, n_features=d, centers=k, cluster_std=std, random_state=seed)
    return Table(f"blobs-{n}x{d}-k{k}-std{std}-s{seed}", X, y.astype("int64"))


def to_sample(table: Table, index: int, prefix: str, instruction: str, meta: dict[str, Any]) -> Sample:
    x = [float(v) for v in table.X[index]]
    options: dict[str, Any] = {"features": x}
    if table.image_shape:
        options["shape"] = list(table.image_shape)
    text = f"{instruction}\nFeatures: " + " ".join(f"{v:g}" for v in x)
    return Sample(id=f"{prefix}{index}", messages=[Message("user", [Part("text", text=text, options=options)])],
                  target=int(table.y[index]), metadata=dict(meta))
