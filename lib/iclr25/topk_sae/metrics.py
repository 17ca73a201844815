"""Evaluation of a sparse autoencoder on held-out activations (chapter 06).

- normalised MSE (the paper's "normalized MSE": MSE over the MSE of always predicting the mean,
  i.e. the fraction of variance unexplained) and L0 (active latents per token);
- dead latents on an evaluation set;
- shrinkage (Sec. 5.1): the scalar ``alpha`` that best rescales the decoded code,
  ``min_alpha ||x - b_pre - alpha * W_dec^T z||^2``; ``alpha - 1 > 0`` means the code's
  activations are systematically too small (ReLU + L1), ``~ 0`` means unbiased (TopK);
- least-squares refinement of the activations on a fixed support (the paper's Fig. 6 test).
"""

from __future__ import annotations

import numpy as np
import torch

from .model import ReLUSAE, TopKSAE
from .train import DEAD_THRESHOLD, as_tensor_acts

__all__ = ["evaluate", "nmse", "shrinkage", "refine_on_support"]


def nmse(x_hat: torch.Tensor, x: torch.Tensor) -> float:
    """``sum ||x_hat - x||^2 / sum ||x - mean(x)||^2`` (fraction of variance unexplained)."""
    if x_hat.shape != x.shape:
        raise ValueError(f"shapes differ: {tuple(x_hat.shape)} vs {tuple(x.shape)}")
    return float(((x_hat - x) ** 2).sum() / ((x - x.mean(0)) ** 2).sum())


def _code(sae, x, k=None):
    if isinstance(sae, TopKSAE):
        return sae.dense_code(x, k)
    if isinstance(sae, ReLUSAE):
        if k is not None:
            raise ValueError("k applies to a TopKSAE only")
        return sae.dense_code(x)
    raise TypeError(f"expected a TopKSAE or ReLUSAE; got {type(sae).__name__}")


@torch.no_grad()
def evaluate(sae, acts, *, batch_size: int = 2048, k: int | None = None) -> dict:
    """``nmse``, ``l0``, ``dead_fraction`` (never above 1e-3 on ``acts``), ``shrinkage`` of ``sae``
    on ``acts`` (N, d), read batch by batch (a float16 memmap is fine). Chapter 06."""
    N = len(acts)
    if N < 2:
        raise ValueError("evaluate needs at least 2 rows of activations")
    se = 0.0
    l0 = 0.0
    device = sae.W_dec.device
    fired = torch.zeros(sae.n_latents, dtype=torch.bool, device=device)
    xx = xr = rr = 0.0
    s1 = None
    s2 = 0.0
    for start in range(0, N, batch_size):
        x = as_tensor_acts(acts[start:start + batch_size]).to(device)
        z = _code(sae, x, k)
        r = z @ sae.W_dec                             # decoded code without the bias
        x_hat = r + sae.b_pre
        se += float(((x_hat - x) ** 2).sum())
        l0 += float((z > 0).sum())
        fired |= (z > DEAD_THRESHOLD).any(0)
        xc = x - sae.b_pre
        xr += float((xc * r).sum())
        rr += float((r * r).sum())
        s1 = x.sum(0) if s1 is None else s1 + x.sum(0)
        s2 += float((x ** 2).sum())
    var = s2 - float((s1 ** 2).sum()) / N
    return {"nmse": se / var, "l0": l0 / N, "dead_fraction": float((~fired).float().mean()),
            "shrinkage": (xr / rr - 1.0) if rr > 0 else float("nan")}


@torch.no_grad()
def shrinkage(sae, x: torch.Tensor, k: int | None = None) -> float:
    """``alpha - 1`` with ``alpha = argmin ||x - b_pre - alpha W_dec^T z||^2`` on batch ``x``."""
    z = _code(sae, as_tensor_acts(x), k)
    r = z @ sae.W_dec
    xc = as_tensor_acts(x) - sae.b_pre
    return float((xc * r).sum() / (r * r).sum()) - 1.0


@torch.no_grad()
def refine_on_support(sae, x: torch.Tensor, k: int | None = None, n_iter: int = 200
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Refit the activations of each token on the code's own support by non-negative least
    squares (projected gradient descent), the paper's Sec. 5.1 refinement. Returns the original
    and refined active values (flattened) -- refined > original means the code was shrunk."""
    x = as_tensor_acts(x)
    z = _code(sae, x, k)
    mask = z > 0
    xc = x - sae.b_pre
    W = sae.W_dec
    c = z.clone()
    L = float(torch.linalg.matrix_norm(W, ord=2)) ** 2   # Lipschitz constant of the gradient
    for _ in range(n_iter):
        g = (c @ W - xc) @ W.T
        c = ((c - g / L) * mask).clamp_min(0)
    return z[mask].numpy(), c[mask].numpy()
