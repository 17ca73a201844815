"""Closed forms and ODEs for the SIM dynamics (Yang et al., Sec. 4).

One-layer linear model ``f(x) = W x`` under gradient flow on ``L = 1/2 E||W x - x||^2``:
``dW/dt = -(W - I) Sigma`` with ``Sigma = E[x x^T]``, so

    W(t) = I + (W(0) - I) exp(-Sigma t).                                     (Thm 4.1)

In concept coordinates ``Sigma = diag(a)``, ``a_p = sigma_p^2 + mu_p^2 / s``, which gives the
paper's per-coordinate form ``f_k(t, z) = (1 - e^{-a_k t}) z_k + sum_i e^{-a_i t} w_{k,i}(0) z_i``:
concept ``k`` is learned at rate ``a_k`` and the last one slows down exponentially.

Symmetric two-layer linear model ``f(x) = U U^T x``: with ``W = U U^T``, gradient flow on ``U``
gives the matrix ODE

    dW/dt = 2 Sigma W + 2 W Sigma - 2 W Sigma W - Sigma W^2 - W^2 Sigma,      (Sec. 4.2)

whose growth (first two terms) and suppression (the rest) terms make the OOD output swing by a
training cluster before it reaches the held-out composition.

Introduced in notebooks ``09-sim-dynamics/01-linear-theory`` and ``02-swing-by``.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

__all__ = ["one_layer_weights", "one_layer_closed_form", "sym2_rhs", "sym2_linear_ode",
           "sym2_init", "concept_sigma"]


def concept_sigma(a, U=None) -> np.ndarray:
    """``Sigma`` from the concept second moments ``a`` (s,), embedded by ``U`` (s, dim) if given."""
    a = np.asarray(a, float)
    if a.ndim != 1:
        raise ValueError(f"a must be a vector, got shape {a.shape}")
    if U is None:
        return np.diag(a)
    U = np.asarray(U, float)
    if U.shape[0] != a.shape[0]:
        raise ValueError(f"U must have one row per concept ({a.shape[0]}), got shape {U.shape}")
    return U.T @ np.diag(a) @ U


def _as_sigma(Sigma):
    S = np.asarray(Sigma, float)
    if S.ndim == 1:
        S = np.diag(S)
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"Sigma must be a vector a or a square matrix, got shape {S.shape}")
    if not np.allclose(S, S.T, atol=1e-10 * max(1.0, np.abs(S).max())):
        raise ValueError("Sigma must be symmetric")
    return S


def one_layer_weights(Sigma, W0, t) -> np.ndarray:
    """``W(t) = I + (W0 - I) expm(-Sigma t)`` for each time in ``t``: shape (T, d, d).

    ``Sigma`` is the vector ``a`` (diagonal) or a symmetric PSD matrix (e.g. the empirical
    ``X^T X / N`` of a training set). Introduced in ``01-linear-theory``.
    """
    S = _as_sigma(Sigma)
    W0 = np.asarray(W0, float)
    if W0.shape != S.shape:
        raise ValueError(f"W0 must have the shape of Sigma {S.shape}, got {W0.shape}")
    lam, Q = np.linalg.eigh(S)
    t = np.atleast_1d(np.asarray(t, float))
    E = np.einsum("ij,tj,kj->tik", Q, np.exp(-np.outer(t, lam)), Q)            # expm(-S t)
    I = np.eye(S.shape[0])
    return I + np.einsum("ij,tjk->tik", W0 - I, E)


def one_layer_closed_form(a, W0, z, t, U=None) -> np.ndarray:
    """The one-layer model's output ``f(W(t), z)`` under gradient flow: shape (T, d).

    ``a`` : (s,) concept second moments (or a full ``Sigma``); ``U`` : (s, dim) embedding, when
    ``W0`` and ``z`` live in the ``dim``-dimensional input space. Introduced in ``01-linear-theory``.
    """
    Sigma = concept_sigma(a, U) if np.ndim(a) == 1 and U is not None else a
    Wt = one_layer_weights(Sigma, W0, t)
    return Wt @ np.asarray(z, float)


def sym2_rhs(W: np.ndarray, Sigma: np.ndarray) -> np.ndarray:
    """Right-hand side of the symmetric two-layer ODE (gradient flow of ``U`` pushed to ``W = U U^T``)."""
    SW, WS = Sigma @ W, W @ Sigma
    return 2 * SW + 2 * WS - 2 * W @ Sigma @ W - SW @ W - W @ WS


def sym2_init(s: int, init_scale: float, hdim: int | None = None, seed: int = 0) -> np.ndarray:
    """``W0 = U0 U0^T`` with ``U0 ~ N(0, init_scale^2)`` of shape (s, hdim) (default hdim = s)."""
    if not init_scale > 0:
        raise ValueError(f"init_scale must be positive, got {init_scale}")
    U0 = np.random.default_rng(seed).standard_normal((s, hdim or s)) * init_scale
    return U0 @ U0.T


def sym2_linear_ode(Sigma, W0, t_grid, rtol: float = 1e-8, atol: float = 1e-12) -> np.ndarray:
    """Integrate the symmetric two-layer ODE with ``scipy.integrate.solve_ivp``: (T, d, d).

    ``Sigma`` is ``a`` (s,) or a matrix; ``W0`` a symmetric PSD start (see :func:`sym2_init`);
    ``t_grid`` increasing times starting at 0. Introduced in ``02-swing-by``.
    """
    S = _as_sigma(Sigma)
    W0 = np.asarray(W0, float)
    if W0.shape != S.shape:
        raise ValueError(f"W0 must have the shape of Sigma {S.shape}, got {W0.shape}")
    t_grid = np.asarray(t_grid, float)
    if t_grid.ndim != 1 or t_grid[0] != 0 or np.any(np.diff(t_grid) <= 0):
        raise ValueError("t_grid must be increasing and start at 0")
    d = S.shape[0]
    sol = solve_ivp(lambda t, w: sym2_rhs(w.reshape(d, d), S).ravel(), (0.0, float(t_grid[-1])),
                    W0.ravel(), t_eval=t_grid, method="LSODA", rtol=rtol, atol=atol)
    if not sol.success:  # pragma: no cover
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    return sol.y.T.reshape(-1, d, d)
