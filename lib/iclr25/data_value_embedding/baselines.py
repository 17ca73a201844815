"""The baselines of Fig. 3: the influence function, TracIn and the gradient dot product.

All take per-sample gradients in the same layout as the recorder's and return scores with the
same sign convention as :func:`iclr25.data_value_embedding.influence`: positive means the test
loss rises when the point is removed.

Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
"""

from __future__ import annotations

import torch

from .recorder import Records

__all__ = ["influence_function", "influence_function_sweep", "tracin", "grad_dot"]


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


def influence_function_sweep(train_grads, test_grads, hessian: torch.Tensor, dampings,
                             ) -> dict[float, torch.Tensor]:
    """:func:`influence_function` for several dampings from one eigendecomposition of ``hessian``.

    Returns ``{damping: scores}``; also useful to see how much the choice of damping matters.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    G, g = _shapes(train_grads, test_grads)
    H = torch.as_tensor(hessian).to(G.dtype)
    if H.shape != (G.shape[1], G.shape[1]):
        raise ValueError(f"hessian must be ({G.shape[1]}, {G.shape[1]}), got {tuple(H.shape)}")
    evals, Q = torch.linalg.eigh((H + H.T) / 2)
    a, b = G @ Q, (g.T if g.dim() == 2 else g[:, None]).T @ Q     # coordinates in the eigenbasis
    out = {}
    for lam in dampings:
        if not lam >= 0:
            raise ValueError(f"dampings must be non-negative, got {lam}")
        s = (a / (evals + lam)) @ b.T
        out[float(lam)] = s if g.dim() == 2 else s[:, 0]
    return out
