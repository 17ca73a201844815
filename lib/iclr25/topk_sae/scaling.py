"""The joint scaling law of reconstruction loss in n (latents) and k (active latents), Sec. 3.5:

    L(n, k) = exp(alpha + beta_k log k + beta_n log n + gamma log k log n) [+ exp(zeta + eta log k)]

The paper fits it to GPT-4 SAEs and reports beta_k = 0.26, beta_n = -0.017, gamma = -0.042 (the
second, irreducible term is optional here). The exponent of n at fixed k is
``beta_n + gamma log k`` and that of k at fixed n is ``beta_k + gamma log n``. Chapter 06
(``03-scaling-laws``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["JointLaw", "fit_joint_law", "PAPER_LAW"]


@dataclass(frozen=True)
class JointLaw:
    """A fitted L(n, k) (see the module docstring); ``zeta``/``eta`` are ``None`` without the
    irreducible term. ``rmse_log`` is the fit's root-mean-square error in log L."""

    alpha: float
    beta_k: float
    beta_n: float
    gamma: float
    zeta: float | None = None
    eta: float | None = None
    rmse_log: float = float("nan")

    def __call__(self, n, k):
        ln, lk = np.log(np.asarray(n, float)), np.log(np.asarray(k, float))
        out = np.exp(self.alpha + self.beta_k * lk + self.beta_n * ln + self.gamma * lk * ln)
        if self.zeta is not None:
            out = out + np.exp(self.zeta + self.eta * lk)
        return out

    def n_exponent(self, k: float) -> float:
        """d log L / d log n at fixed k (ignoring the irreducible term)."""
        return self.beta_n + self.gamma * float(np.log(k))

    def k_exponent(self, n: float) -> float:
        """d log L / d log k at fixed n (ignoring the irreducible term)."""
        return self.beta_k + self.gamma * float(np.log(n))


#: The paper's fitted interaction-law coefficients (Sec. 3.5); alpha is not quoted.
PAPER_LAW = {"beta_k": 0.26, "beta_n": -0.017, "gamma": -0.042}


def fit_joint_law(n, k, L, *, irreducible: bool = False) -> JointLaw:
    """Fit :class:`JointLaw` to losses ``L`` measured at dictionary sizes ``n`` and ``k``.

    Without the irreducible term the law is linear in its parameters on log L, fitted by least
    squares (needs at least 4 points with two distinct n and two distinct k). With it, a
    nonlinear least-squares fit on log L starts from the linear fit. Chapter 06.
    """
    n, k, L = (np.asarray(a, dtype=float).ravel() for a in (n, k, L))
    if not (n.shape == k.shape == L.shape):
        raise ValueError(f"n, k and L must have the same length; got {n.size}, {k.size}, {L.size}")
    if np.any(n <= 0) or np.any(k <= 0) or np.any(L <= 0):
        raise ValueError("n, k and L must be positive")
    if len(np.unique(n)) < 2 or len(np.unique(k)) < 2 or n.size < 4:
        raise ValueError("fitting L(n, k) needs at least 4 points with two distinct n and k")
    ln, lk, y = np.log(n), np.log(k), np.log(L)
    A = np.stack([np.ones_like(ln), lk, ln, lk * ln], axis=1)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    law = JointLaw(*map(float, coef))
    if irreducible:
        from scipy.optimize import least_squares

        def resid(p):
            return np.log(JointLaw(*p)(n, k)) - y

        p0 = list(coef) + [float(y.min()) - 2.0, 0.0]
        sol = least_squares(resid, p0, max_nfev=5000)
        law = JointLaw(*map(float, sol.x))
    pred = np.log(law(n, k))
    return JointLaw(**{**law.__dict__, "rmse_log": float(np.sqrt(np.mean((pred - y) ** 2)))})
