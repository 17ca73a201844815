"""The Structured Identity Mapping (SIM) task: Gaussian clusters whose centroids encode concepts.

Yang et al. (ICLR 2025), Sec. 3. Concept ``p`` has a *signal strength* ``mu_p`` (how far its cluster
sits from the origin along axis ``p``) and a *diversity* ``var_p`` (the variance along that axis).
The training set holds the clusters in which at most one concept is "on"; the out-of-distribution
(OOD) test point is the never-seen composition ``x_b = sum_p mu_p e_p``. The target is the input
itself (identity map), and everything is embedded into ``dim`` dimensions by a random orthonormal
matrix, as in the official code (``tasks/identity.py``, ``tasks/multi_identity.py``).

Introduced in notebook ``09-sim-dynamics/01-linear-theory``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SIMData", "two_concept", "multi_concept", "second_moments", "LAYOUTS"]

LAYOUTS = ("two_concept", "multi_concept")


@dataclass
class SIMData:
    """A generated SIM data set (numpy, float64).

    Attributes
    ----------
    X : (N, dim) training inputs (targets are ``X`` itself).
    X_ood : (n_ood, dim) samples of the held-out composition.
    x_b : (dim,) the OOD centroid ``sum_p mu_p e_p`` in the embedding.
    U : (s, dim) orthonormal rows mapping concept space into the embedding (``z @ U``).
    mu, var : (s,) signal strength and diversity (variance) of each concept.
    centroids : (C, s) training-cluster centroids in concept space; ``labels`` : (N,) cluster of each row.
    """

    X: np.ndarray
    X_ood: np.ndarray
    x_b: np.ndarray
    U: np.ndarray
    mu: np.ndarray
    var: np.ndarray
    centroids: np.ndarray
    labels: np.ndarray
    info: dict = field(default_factory=dict)

    @property
    def s(self) -> int:
        """Number of concepts."""
        return int(self.U.shape[0])

    @property
    def dim(self) -> int:
        return int(self.U.shape[1])

    def to_concept(self, Z: np.ndarray) -> np.ndarray:
        """Map points (``(..., dim)``) back to concept coordinates (``(..., s)``): ``Z @ U.T``."""
        return np.asarray(Z) @ self.U.T

    @property
    def a(self) -> np.ndarray:
        """The population second moments ``a_p`` (diagonal of E[x x^T] in concept space)."""
        return np.diag(second_moments(self.centroids, self.var))


def _check_vec(name, v, s):
    v = np.atleast_1d(np.asarray(v, dtype=float))
    if v.ndim != 1 or (s is not None and v.shape[0] != s):
        raise ValueError(f"{name} must be a vector of length {s}, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite, got {v}")
    return v


def _embedding(s: int, dim: int, rotate: bool, rng: np.random.Generator) -> np.ndarray:
    if dim < s:
        raise ValueError(f"dim ({dim}) must be at least the number of concepts s ({s})")
    if not rotate:
        return np.eye(dim)[:s]
    # a random orthonormal basis from the SVD of a Gaussian matrix (as the official code does)
    Q, _, _ = np.linalg.svd(rng.standard_normal((dim, dim)))
    return Q[:s]


def _sample(centroid, var, n, rng, reject_center=None, reject_radius=0.0):
    """n points of N(centroid, diag(var)); optionally rejecting those within a radius of a point."""
    out = np.empty((0, centroid.shape[0]))
    sd = np.sqrt(var)
    tries = 0
    while out.shape[0] < n:
        Z = centroid + sd * rng.standard_normal((max(n, 16), centroid.shape[0]))
        if reject_center is not None and reject_radius > 0:
            Z = Z[np.linalg.norm(Z - reject_center, axis=1) >= reject_radius]
        out = np.concatenate([out, Z])
        tries += 1
        if tries > 1000:
            raise ValueError("truncation rejects nearly every sample; lower the radius or the variance")
    return out[:n]


def _build(centroids, var, mu, n, n_ood, dim, rotate, truncate, noise, seed, info):
    rng = np.random.default_rng(seed)
    s = centroids.shape[1]
    for name, v in (("n", n), ("n_ood", n_ood), ("dim", dim)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    x_b_c = mu.copy()
    radius = float(truncate) * float(np.min(mu)) / 2 if truncate else 0.0
    Z, labels = [], []
    for c, m in enumerate(centroids):
        Z.append(_sample(m, var, n, rng, x_b_c if truncate else None, radius))
        labels.append(np.full(n, c))
    Z = np.concatenate(Z)
    labels = np.concatenate(labels)
    perm = rng.permutation(Z.shape[0])
    Z, labels = Z[perm], labels[perm]
    Z_ood = _sample(x_b_c, var, n_ood, rng)
    U = _embedding(s, dim, rotate, rng)
    X, X_ood = Z @ U, Z_ood @ U
    if noise > 0:
        # isotropic noise in the orthogonal complement of the concept space
        P = np.eye(dim) - U.T @ U
        X = X + noise * rng.standard_normal(X.shape) @ P
        X_ood = X_ood + noise * rng.standard_normal(X_ood.shape) @ P
    info = dict(info, seed=seed, rotate=rotate, truncate=truncate, noise=noise, n=n, n_ood=n_ood)
    return SIMData(X=X, X_ood=X_ood, x_b=x_b_c @ U, U=U, mu=mu, var=var, centroids=centroids,
                   labels=labels, info=info)


def two_concept(mu=(1.0, 2.0), var=(0.05, 0.05), n: int = 5000, n_ood: int = 256, dim: int = 64,
                rotate: bool = True, truncate: bool = False, noise: float = 0.0,
                seed: int = 0) -> SIMData:
    """The 2-concept SIM task (official ``tasks/identity.py``): clusters at (0,0), (0,mu_2), (mu_1,0).

    ``var`` is the per-axis *variance* of every cluster (the official config's ``sigma``), ``n``
    points per cluster; the held-out composition is (mu_1, mu_2). ``truncate=True`` rejects training
    samples within ``min(mu)/2`` of the OOD centroid (``tasks/identity_truncate.py``).
    Introduced in ``09-sim-dynamics/01-linear-theory``.
    """
    mu = _check_vec("mu", mu, 2)
    var = _check_vec("var", var, 2)
    if np.any(var < 0):
        raise ValueError(f"var must be >= 0, got {var}")
    centroids = np.array([[0.0, 0.0], [0.0, mu[1]], [mu[0], 0.0]])
    return _build(centroids, var, mu, n, n_ood, dim, rotate, truncate, noise, seed,
                  {"layout": "two_concept"})


def multi_concept(mu=(1.0, 2.0, 3.0, 4.0), var=0.2, n: int = 5000, n_ood: int = 256,
                  dim: int = 64, rotate: bool = True, truncate: bool = False, noise: float = 0.0,
                  seed: int = 0) -> SIMData:
    """The s-concept SIM task (official ``tasks/multi_identity.py``): s clusters at ``mu_p e_p``.

    ``var`` is a scalar (isotropic) or a length-s vector of variances. The OOD point is
    ``sum_p mu_p e_p``. Introduced in ``09-sim-dynamics/01-linear-theory``.
    """
    mu = _check_vec("mu", mu, None)
    s = mu.shape[0]
    if s < 2:
        raise ValueError("multi_concept needs at least 2 concepts")
    var = _check_vec("var", np.broadcast_to(np.asarray(var, float), (s,)) if np.ndim(var) == 0 else var, s)
    if np.any(var < 0):
        raise ValueError(f"var must be >= 0, got {var}")
    centroids = np.diag(mu)
    return _build(centroids, var, mu, n, n_ood, dim, rotate, truncate, noise, seed,
                  {"layout": "multi_concept"})


def second_moments(centroids, var) -> np.ndarray:
    """Population E[z z^T] in concept space for equally weighted clusters ``N(c, diag(var))``.

    For the SIM layouts it is diagonal with ``a_p = var_p + mu_p^2 / C`` (C clusters; the paper's
    ``sigma_p^2 + mu_p^2 / s`` for the s-concept layout). Introduced in ``01-linear-theory``.
    """
    centroids = np.asarray(centroids, float)
    var = np.asarray(var, float)
    return np.diag(var) + centroids.T @ centroids / centroids.shape[0]
