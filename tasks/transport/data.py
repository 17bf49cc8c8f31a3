"""Transport problems: a labelled source domain, an unlabelled target domain, hidden target labels.

- ``synthetic``: k well-separated components (means at least 8 apart, random covariances with
  eigenvalues in [0.5, 1.5]) in d dimensions; the target is the same mixture rotated by 10 degrees
  in the first plane and shifted by ``shift`` along a random direction, so component i of the
  source corresponds to component i of the target (the label is the component). With
  ``family=poisson`` the components are independent-feature Poisson counts whose target rates are
  the source rates times a per-feature factor in [0.7, 1.4].
- ``digits``: scikit-learn's bundled 8x8 digits, split in two random halves; the target half is
  shifted one pixel right and its intensities mapped x -> 0.8 x + 2 (a scanner/contrast shift).
  Both halves are projected on 16 principal components fitted on their union (no labels used).
- ``pbmc``: scanpy's bundled ``pbmc68k_reduced`` (700 cells, 10 ``bulk_labels`` cell types), its
  first 20 stored principal components, split in two random halves; the target half gets a
  batch effect (a random shift of 1.5 standard deviations per component and a 1.1x scale).
"""

from __future__ import annotations

from typing import Any


def _rotation(d: int, degrees: float) -> Any:
    import numpy as np

    R = np.eye(d)
    if d >= 2:
        c, s = np.cos(np.radians(degrees)), np.sin(np.radians(degrees))
        R[:2, :2] = [[c, -s], [s, c]]
    return R


def synthetic(n: int, k: int, d: int, seed: int, shift: float = 3.0, family: str = "gaussian") -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.full(k, 5.0))
    if family == "poisson":
        rates = rng.uniform(1.0, 30.0, size=(k, d))
        factor = rng.uniform(0.7, 1.4, size=d)
        ys, yt = rng.choice(k, size=n, p=weights), rng.choice(k, size=n, p=weights)
        Xs = rng.poisson(rates[ys]).astype(float)
        Xt = rng.poisson(rates[yt] * factor).astype(float)
        return {"Xs": Xs, "ys": ys, "Xt": Xt, "yt": yt, "kind": "poisson"}
    means: list[Any] = []
    box = 6.0 * k ** (1.0 / max(d, 1)) + 8.0
    while len(means) < k:
        m = rng.uniform(-box, box, size=d)
        if all(np.linalg.norm(m - o) >= 8.0 for o in means):
            means.append(m)
    covs = []
    for _ in range(k):
        Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
        covs.append(Q @ np.diag(rng.uniform(0.5, 1.5, size=d)) @ Q.T)
    direction = rng.normal(size=d)
    direction /= np.linalg.norm(direction)
    R = _rotation(d, 10.0)

    def draw(labels: Any) -> Any:
        return np.stack([rng.multivariate_normal(means[c], covs[c]) for c in labels])

    ys, yt = rng.choice(k, size=n, p=weights), rng.choice(k, size=n, p=weights)
    Xs = draw(ys)
    Xt = draw(yt) @ R.T + shift * direction
    return {"Xs": Xs, "ys": ys, "Xt": Xt, "yt": yt, "kind": "gaussian"}


def _split(n: int, seed: int) -> tuple[Any, Any]:
    import numpy as np

    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[: n // 2]), np.sort(order[n // 2:])


def digits(seed: int, components: int = 16) -> dict[str, Any]:
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA

    data = load_digits()
    src, tgt = _split(len(data.target), seed)
    images = data.images[tgt].copy()
    images = np.concatenate([np.zeros_like(images[:, :, :1]), images[:, :, :-1]], axis=2)  # one pixel right
    shifted = 0.8 * images.reshape(len(tgt), -1) + 2.0
    raw_s = data.data[src]
    pca = PCA(components, random_state=0).fit(np.vstack([raw_s, shifted]))
    return {"Xs": pca.transform(raw_s), "ys": data.target[src], "Xt": pca.transform(shifted),
            "yt": data.target[tgt], "kind": "gaussian"}


def pbmc(seed: int, components: int = 20) -> dict[str, Any]:
    import numpy as np

    try:
        import scanpy as sc
    except ImportError:
        raise ValueError("omt_pbmc needs scanpy (pip install scanpy), which ships pbmc68k_reduced") from None
    adata = sc.datasets.pbmc68k_reduced()
    X = np.asarray(adata.obsm["X_pca"][:, :components], dtype=float)
    names = sorted(adata.obs["bulk_labels"].astype(str).unique())
    y = np.array([names.index(v) for v in adata.obs["bulk_labels"].astype(str)])
    src, tgt = _split(len(y), seed)
    rng = np.random.default_rng(seed + 100)
    Xt = 1.1 * X[tgt] + 1.5 * X.std(axis=0) * rng.choice([-1.0, 1.0], size=components)
    return {"Xs": X[src], "ys": y[src], "Xt": Xt, "yt": y[tgt], "kind": "gaussian", "names": names}
