"""Exponential-family mixtures of the two domains: Gaussian (continuous data) and Poisson (counts).

The labelled source gets one component per class (its class-conditional fit: weights = class
shares, so every component carries a label); the unlabelled target gets an unsupervised mixture
with ``k`` components (scikit-learn's ``GaussianMixture``, or the EM for independent-feature Poisson
components below). A fit that stops before convergence raises :class:`MixtureFitError`: the backend
turns it into that sample's error, never a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast


class MixtureFitError(ValueError):
    """A mixture fit that did not converge or had too little data."""


@dataclass
class Mixture:
    kind: str  # "gaussian" | "poisson"
    weights: Any  # [k]
    means: Any  # [k, d]: Gaussian means, or Poisson rates
    covs: Any | None  # [k, d, d] for Gaussians
    model: Any = None  # the fitted estimator (target only): responsibilities of new points

    def responsibilities(self, X: Any) -> Any:
        import numpy as np

        if self.kind == "gaussian":
            if self.model is not None:
                return self.model.predict_proba(X)
            from scipy.stats import multivariate_normal

            logp = np.stack([np.log(w) + multivariate_normal(m, c, allow_singular=True).logpdf(X)
                             for w, m, c in zip(self.weights, self.means, cast(Any, self.covs), strict=True)], axis=1)
        else:
            logp = poisson_loglik(X, self.means) + np.log(self.weights)[None, :]
        logp = logp - logp.max(axis=1, keepdims=True)
        p = np.exp(logp)
        return p / p.sum(axis=1, keepdims=True)


def poisson_loglik(X: Any, rates: Any) -> Any:
    """log p(x | component) up to the x-only term log(x!), [n, k]."""
    import numpy as np

    return X @ np.log(rates).T - rates.sum(axis=1)[None, :]


def class_conditional(X: Any, y: Any, kind: str, reg: float = 1e-3) -> tuple[Mixture, Any]:
    """One component per label (sorted labels); returns the mixture and the labels in order."""
    import numpy as np

    labels = np.unique(y)
    weights, means, covs = [], [], []
    scale = float(np.var(X)) if X.size else 1.0
    for c in labels:
        pts = X[y == c]
        if len(pts) < 2:
            raise MixtureFitError(f"class {c} has {len(pts)} source point(s); need at least 2 to fit a component")
        weights.append(len(pts) / len(X))
        if kind == "gaussian":
            means.append(pts.mean(axis=0))
            covs.append(np.cov(pts, rowvar=False).reshape(X.shape[1], X.shape[1])
                        + reg * scale * np.eye(X.shape[1]))
        else:
            means.append(np.maximum(pts.mean(axis=0), 1e-6))
    return Mixture(kind, np.asarray(weights), np.asarray(means), np.asarray(covs) if covs else None), labels


def fit_target(X: Any, k: int, kind: str, seed: int, max_iter: int = 500, reg: float = 1e-3) -> Mixture:
    import numpy as np

    if len(X) < k:
        raise MixtureFitError(f"{len(X)} target points cannot support {k} components")
    if kind == "gaussian":
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from sklearn.mixture import GaussianMixture

        gm = GaussianMixture(k, covariance_type="full", reg_covar=reg * float(np.var(X)), max_iter=max_iter,
                             n_init=3, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            gm.fit(X)
        if not gm.converged_:
            raise MixtureFitError(f"the target Gaussian mixture did not converge in {max_iter} EM iterations")
        return Mixture("gaussian", gm.weights_, gm.means_, gm.covariances_, gm)
    return poisson_em(X, k, seed, max_iter)


def poisson_em(X: Any, k: int, seed: int, max_iter: int = 500, tol: float = 1e-8) -> Mixture:
    """EM for a mixture of independent-feature Poisson components, k-means++-style seeding."""
    import numpy as np

    if np.any(X < 0) or not np.allclose(X, np.round(X)):
        raise MixtureFitError("Poisson mixtures need non-negative integer counts")
    rng = np.random.default_rng(seed)
    centers = [X[rng.integers(len(X))]]
    for _ in range(1, k):
        d2 = np.min([((X - c) ** 2).sum(axis=1) for c in centers], axis=0)
        centers.append(X[rng.choice(len(X), p=d2 / d2.sum()) if d2.sum() > 0 else rng.integers(len(X))])
    rates = np.maximum(np.asarray(centers, dtype=float), 0.1)
    weights = np.full(k, 1.0 / k)
    prev = -np.inf
    for _ in range(max_iter):
        logp = poisson_loglik(X, rates) + np.log(weights)[None, :]
        top = logp.max(axis=1, keepdims=True)
        ll = float((top[:, 0] + np.log(np.exp(logp - top).sum(axis=1))).sum())
        r = np.exp(logp - top)
        r /= r.sum(axis=1, keepdims=True)
        nk = r.sum(axis=0) + 1e-12
        weights = nk / nk.sum()
        rates = np.maximum((r.T @ X) / nk[:, None], 1e-6)
        if abs(ll - prev) <= tol * max(abs(ll), 1.0):
            return Mixture("poisson", weights, rates, None)
        prev = ll
    raise MixtureFitError(f"the target Poisson mixture did not converge in {max_iter} EM iterations")
