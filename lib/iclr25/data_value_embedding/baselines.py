"""The baselines of Fig. 3 (chapter 02): the influence function, TracIn and the gradient dot product.

The influence function needs a damping ``lambda``. At the end of a short SGD run the model is not
a minimum and the Hessian is indefinite (notebook 01: smallest eigenvalue about -53), so a small
fixed ``lambda`` leaves ``H + lambda I`` indefinite and the scores are noise. The practitioner's
baseline is therefore :func:`influence_function_validated`: ``lambda`` is chosen on a grid above
``|lambda_min(H)|`` (:func:`damping_grid`) by a validation criterion a practitioner has -- the
*actual* change of a held-out validation loss when a few random training points are removed and
the model is retrained -- never by the ground truth being scored. The same works with a
Gauss-Newton (PSD) Hessian (:func:`iclr25.data_value_embedding.gauss_newton_hessian`).

All take per-sample gradients in the same layout as the recorder's and return scores with the
same sign convention as :func:`iclr25.data_value_embedding.influence`: positive means the test
loss rises when the point is removed.

Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .recorder import Records

__all__ = ["influence_function", "influence_function_sweep", "tracin", "grad_dot", "damping_grid",
           "influence_function_validated", "DampedIF", "mean_spearman", "DAMPING_FACTORS",
           "DAMPING_ABSOLUTE", "DAMPING_RELATIVE_PSD"]

#: multiples of ``|lambda_min(H)|`` on the practitioner's damping grid (indefinite Hessian)
DAMPING_FACTORS = (1.1, 2.0, 5.0, 10.0, 100.0)
#: absolute dampings added to the grid where they lie above ``|lambda_min(H)|``
DAMPING_ABSOLUTE = (1.0, 10.0, 100.0, 1000.0)
#: multiples of the mean eigenvalue ``tr(H)/p`` on the grid of a PSD (e.g. Gauss-Newton) Hessian
DAMPING_RELATIVE_PSD = (1e-3, 1e-2, 1e-1, 1.0)


def _shapes(train_grads, test_grads):
    G, g = torch.as_tensor(train_grads), torch.as_tensor(test_grads)
    if G.dim() != 2 or g.dim() not in (1, 2) or g.shape[-1] != G.shape[1]:
        raise ValueError(f"train_grads must be (n, p) and test_grads (p,) or (m, p); got "
                         f"{tuple(G.shape)} and {tuple(g.shape)}")
    return G, g.to(G.dtype)


def grad_dot(train_grads, test_grads) -> torch.Tensor:
    """``g(z) . g(z_test)`` at the final model (first-order, no curvature, no timing).

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    G, g = _shapes(train_grads, test_grads)
    return G @ g.T


def influence_function(train_grads, test_grads, hessian: torch.Tensor, damping: float = 1e-3,
                       ) -> torch.Tensor:
    """Koh & Liang's influence of removing ``z``: ``g(z_test)^T (H + lambda I)^{-1} g(z)``.

    ``hessian`` is the Hessian of the summed training loss at the final model; ``damping`` is
    ``lambda``, added to its diagonal (the Hessian of a ReLU network is indefinite).
    The scores depend on the final model only, so they are the same whenever ``z`` was used.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    G, g = _shapes(train_grads, test_grads)
    H = torch.as_tensor(hessian).to(G.dtype)
    p = G.shape[1]
    if H.shape != (p, p):
        raise ValueError(f"hessian must be ({p}, {p}), got {tuple(H.shape)}")
    if not damping >= 0:
        raise ValueError(f"damping must be non-negative, got {damping}")
    Hd = H + damping * torch.eye(p, dtype=G.dtype)
    sol = torch.linalg.solve(Hd, g.T if g.dim() == 2 else g)
    return G @ sol


def tracin(records: Records, test_grads_per_step, *, epochs=None) -> torch.Tensor:
    """TracIn (Pruthi et al.): ``sum_t eta_t g_t(z) . g_t(z_test)`` over the steps that used ``z``.

    ``test_grads_per_step[t]`` is the ``(m, p)`` (or ``(p,)``) test gradient at step ``t``'s
    weights; ``epochs`` restricts the sum to those epochs (``None``: all). Returns ``(n_train, m)``.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    if len(test_grads_per_step) != records.n_steps:
        raise ValueError(f"need one test gradient per recorded step ({records.n_steps}), got "
                         f"{len(test_grads_per_step)}")
    keep = None if epochs is None else set(epochs)
    out = None
    for t in range(records.n_steps):
        if keep is not None and records.epochs[t] not in keep:
            continue
        G, g = _shapes(records.grads[t], test_grads_per_step[t])
        s = records.lrs[t] * (G @ g.T)
        if out is None:
            out = torch.zeros(records.n_train, *s.shape[1:], dtype=G.dtype)
        out.index_add_(0, records.indices[t], s)
    if out is None:
        raise ValueError(f"no recorded step belongs to epochs {sorted(keep)}")
    return out


def influence_function_sweep(train_grads, test_grads, hessian: torch.Tensor, dampings, *,
                             eigh=None) -> dict[float, torch.Tensor]:
    """:func:`influence_function` for several dampings from one eigendecomposition of ``hessian``.

    Returns ``{damping: scores}``; also useful to see how much the choice of damping matters.
    ``eigh``: a precomputed ``(eigenvalues, eigenvectors)`` of ``hessian`` (saves the
    decomposition when the same Hessian is swept twice).

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    G, g = _shapes(train_grads, test_grads)
    H = torch.as_tensor(hessian).to(G.dtype)
    if H.shape != (G.shape[1], G.shape[1]):
        raise ValueError(f"hessian must be ({G.shape[1]}, {G.shape[1]}), got {tuple(H.shape)}")
    evals, Q = torch.linalg.eigh((H + H.T) / 2) if eigh is None else eigh
    a, b = G @ Q, (g.T if g.dim() == 2 else g[:, None]).T @ Q     # coordinates in the eigenbasis
    out = {}
    for lam in dampings:
        if not lam >= 0:
            raise ValueError(f"dampings must be non-negative, got {lam}")
        s = (a / (evals + lam)) @ b.T
        out[float(lam)] = s if g.dim() == 2 else s[:, 0]
    return out


def mean_spearman(est, truth) -> float:
    """Spearman correlation over the training points, one per test point (column), averaged.

    The score of Fig. 3: ``est`` and ``truth`` are ``(n_train, m)``.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    from scipy.stats import spearmanr

    est, truth = np.asarray(est, dtype=float), np.asarray(truth, dtype=float)
    if est.shape != truth.shape or est.ndim != 2:
        raise ValueError(f"est and truth must both be (n, m); got {est.shape} and {truth.shape}")
    return float(np.mean([spearmanr(est[:, j], truth[:, j]).statistic for j in range(truth.shape[1])]))


def damping_grid(lam_min: float, *, trace_over_p: float | None = None,
                 factors=DAMPING_FACTORS, absolute=DAMPING_ABSOLUTE,
                 relative_psd=DAMPING_RELATIVE_PSD, tol: float = 1e-8) -> tuple[float, ...]:
    """The practitioner's damping grid, every value making ``H + lambda I`` positive definite.

    For an indefinite Hessian (``lam_min < 0``): ``|lam_min|`` times ``factors`` plus the
    ``absolute`` values above ``|lam_min|``. For a PSD one (``lam_min >= -tol * scale``, e.g.
    Gauss-Newton): ``relative_psd`` times the mean eigenvalue ``trace_over_p`` plus ``absolute``.
    Sorted, ascending.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb`` (chapter 02).
    """
    lam_min = float(lam_min)
    if any(f <= 1 for f in factors):
        raise ValueError(f"factors must exceed 1 (damping above |lambda_min|), got {tuple(factors)}")
    scale = abs(float(trace_over_p)) if trace_over_p is not None else 1.0
    if lam_min < -tol * max(scale, 1.0):
        floor = -lam_min
        grid = {floor * float(f) for f in factors} | {float(a) for a in absolute if a > floor}
    else:
        if trace_over_p is None:
            raise ValueError("a PSD Hessian needs trace_over_p (tr(H)/p) to scale its grid")
        grid = {scale * float(r) for r in relative_psd} | {float(a) for a in absolute if a > 0}
    return tuple(sorted(grid))


@dataclass
class DampedIF:
    """The influence function at a damping chosen on a validation criterion.

    Attributes
    ----------
    damping
        The chosen ``lambda`` (the grid value with the best ``criterion``; ties: the smaller).
    grid
        The dampings tried.
    criterion
        ``{lambda: validation score}``: mean Spearman, over the validation points, between the
        IF's predicted and the actual (retrained) change of the validation loss for the removed
        training points.
    lam_min
        Smallest eigenvalue of the Hessian.
    scores
        ``(n_train, m)`` IF scores of the test points at ``damping``.
    sweep
        ``{lambda: scores}`` of the test points at every grid value (for the hindsight baseline).

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb`` (chapter 02).
    """

    damping: float
    grid: tuple
    criterion: dict
    lam_min: float
    scores: torch.Tensor
    sweep: dict = field(repr=False, default_factory=dict)


def influence_function_validated(train_grads, test_grads, hessian: torch.Tensor, *, val_points,
                                 val_grads, val_loo, grid=None) -> DampedIF:
    """The influence function as a practitioner runs it: damping chosen on held-out validation data.

    ``val_loo[i, j]`` is the *actual* change of validation point ``j``'s loss when training point
    ``val_points[i]`` is removed and the model retrained (a few random points suffice);
    ``val_grads`` are the validation points' gradients at the final model. For each ``lambda`` in
    ``grid`` (default :func:`damping_grid`, all above ``|lambda_min(H)|``) the IF's prediction
    ``g(z_val)^T (H + lambda I)^{-1} g(z)`` (Koh & Liang's, the comparison of the paper's Fig. 3)
    is scored against ``val_loo`` by :func:`mean_spearman`; the best ``lambda`` is used for the
    test points. Neither the test points nor their ground truth are looked at.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb`` (chapter 02).
    """
    G, g = _shapes(train_grads, test_grads)
    H = torch.as_tensor(hessian).to(G.dtype)
    if H.shape != (G.shape[1], G.shape[1]):
        raise ValueError(f"hessian must be ({G.shape[1]}, {G.shape[1]}), got {tuple(H.shape)}")
    vp = torch.as_tensor(val_points, dtype=torch.long).reshape(-1)
    gv = torch.as_tensor(val_grads).to(G.dtype)
    loo = torch.as_tensor(val_loo)
    if gv.dim() == 1:
        gv, loo = gv[None], loo.reshape(-1, 1)
    if loo.shape != (len(vp), gv.shape[0]):
        raise ValueError(f"val_loo must be (len(val_points), n_val) = ({len(vp)}, {gv.shape[0]}), "
                         f"got {tuple(loo.shape)}")
    if len(vp) < 3:
        raise ValueError(f"need at least 3 removed validation points for a rank correlation, got {len(vp)}")
    H = (H + H.T) / 2
    evals = torch.linalg.eigvalsh(H)             # eigenvalues only: far cheaper than eigh
    lam_min = float(evals[0])
    if grid is None:
        grid = damping_grid(lam_min, trace_over_p=float(evals.mean()))
    grid = tuple(sorted(float(x) for x in grid))
    if not grid or grid[0] <= max(-lam_min, 0.0):
        raise ValueError(f"every damping must exceed |lambda_min| = {max(-lam_min, 0):.4g} so that "
                         f"H + lambda I is positive definite; got {grid}")
    rhs = torch.cat([gv, g.reshape(-1, G.shape[1])]).T          # (p, n_val + m)
    eye = torch.eye(G.shape[1], dtype=G.dtype)
    criterion, sweep = {}, {}
    for lam in grid:
        # one Cholesky factor of the PD matrix H + lambda I serves validation and test points
        sol = torch.cholesky_solve(rhs, torch.linalg.cholesky(H + lam * eye))
        criterion[lam] = mean_spearman(G[vp] @ sol[:, :gv.shape[0]], loo)
        s_test = G @ sol[:, gv.shape[0]:]
        sweep[lam] = s_test if g.dim() == 2 else s_test[:, 0]
    best = max(grid, key=lambda lam: (criterion[lam], -lam))       # ties: the smaller damping
    return DampedIF(damping=best, grid=grid, criterion=criterion, lam_min=lam_min,
                    scores=sweep[best], sweep=sweep)
