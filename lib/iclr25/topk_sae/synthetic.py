"""Ground-truth sparse features in superposition, and how well an SAE recovers them (chapter 06,
``01-topk-vs-relu-synthetic``).

``m`` unit feature directions in ``d < m`` dimensions; each token switches feature ``i`` on with
probability ``p_i`` (a power law over features, so a few are common and many rare) and gives it a
positive magnitude; ``x = sum_i a_i f_i + noise``. Because the features are known, we can ask how
well the learned dictionary matches them (:func:`feature_recovery`) -- something the paper cannot
do on GPT-2/GPT-4 activations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["SyntheticData", "superposition_data", "feature_recovery"]


@dataclass
class SyntheticData:
    """``X`` (N, d) float32 activations, ``features`` (m, d) unit rows, ``codes`` (N, m) sparse
    magnitudes (a ``torch`` sparse COO tensor), ``p`` (m,) firing probabilities."""

    X: torch.Tensor
    features: torch.Tensor
    codes: torch.Tensor
    p: np.ndarray

    @property
    def mean_l0(self) -> float:
        """Average number of active ground-truth features per token."""
        return float(self.codes._nnz()) / self.X.shape[0]


def superposition_data(n_tokens: int = 20000, d: int = 64, n_features: int = 512, *,
                       mean_active: float = 8.0, alpha: float = 0.5, noise: float = 0.01,
                       seed: int = 0) -> SyntheticData:
    """Sample ``n_tokens`` activations from ``n_features`` sparse features in ``d`` dimensions.

    Feature ``i`` (0-based) fires with probability ``p_i ∝ (i + 1)^-alpha``, scaled so that on
    average ``mean_active`` features are on per token; its magnitude is ``1 + Exp(1)``
    (positive, bounded away from zero). ``noise`` is the std of isotropic Gaussian noise
    (per coordinate, relative to the unit feature norm). Chapter 06.
    """
    if not (0 < d and 0 < n_features and 0 < n_tokens):
        raise ValueError("n_tokens, d and n_features must be positive")
    if not 0 < mean_active <= n_features:
        raise ValueError(f"mean_active must be in (0, n_features={n_features}]; got {mean_active}")
    rng = np.random.default_rng(seed)
    F = rng.standard_normal((n_features, d))
    F /= np.linalg.norm(F, axis=1, keepdims=True)
    p = (np.arange(1, n_features + 1, dtype=float)) ** (-alpha)
    p = np.minimum(p * mean_active / p.sum(), 1.0)
    on = rng.random((n_tokens, n_features)) < p
    rows, cols = np.nonzero(on)
    mags = 1.0 + rng.exponential(1.0, size=rows.size)
    A = np.zeros((n_tokens, n_features))
    A[rows, cols] = mags
    X = A @ F + noise * rng.standard_normal((n_tokens, d))
    codes = torch.sparse_coo_tensor(np.stack([rows, cols]), mags, (n_tokens, n_features)).coalesce()
    return SyntheticData(torch.tensor(X, dtype=torch.float32), torch.tensor(F, dtype=torch.float32),
                         codes, p)


def feature_recovery(W_dec: torch.Tensor, features: torch.Tensor) -> dict:
    """How well the dictionary rows ``W_dec`` (n, d) recover the true ``features`` (m, d).

    Returns ``mmcs`` (mean over true features of the best cosine with any dictionary row),
    ``mcc`` (mean cosine of a one-to-one Hungarian matching, the "mean correlation coefficient"
    of the synthetic-SAE literature) and ``recovered_0.9`` (share of features with best cosine
    > 0.9). Chapter 06.
    """
    from scipy.optimize import linear_sum_assignment

    W = torch.as_tensor(W_dec, dtype=torch.float64)
    Ft = torch.as_tensor(features, dtype=torch.float64)
    if W.dim() != 2 or Ft.dim() != 2 or W.shape[1] != Ft.shape[1]:
        raise ValueError(f"W_dec (n, d) and features (m, d) must share d; got {tuple(W.shape)}, "
                         f"{tuple(Ft.shape)}")
    C = (Ft / Ft.norm(dim=1, keepdim=True)) @ (W / W.norm(dim=1, keepdim=True).clamp_min(1e-12)).T
    best = C.max(dim=1).values
    r, c = linear_sum_assignment(-C.numpy())
    return {"mmcs": float(best.mean()), "mcc": float(C.numpy()[r, c].sum() / Ft.shape[0]),
            "recovered_0.9": float((best > 0.9).double().mean())}
