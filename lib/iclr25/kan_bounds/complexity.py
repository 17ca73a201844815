"""Bound-shaped complexity measures of KANs (chapter 15) -- the chapter's first version.

Superseded for the chapter's claims by :mod:`iclr25.kan_bounds.bounds`, which carries out the
covering argument with every constant explicit; these guessed measures are kept for comparison
(and are still logged by :func:`~iclr25.kan_bounds.train.train`).

The paper (Zhang & Zhou, ICLR 2025) bounds the generalisation gap of a KAN through a covering
argument on its layers :math:`\\Phi_l(x) = C_l B_l(x)`. Its exact statement and constants could not
be checked for this book (no official code; the PDF's theorem was not readable here), so this module
implements **measures with the shape the abstract describes** -- one factor per layer, the product of
the Lipschitz constant of the basis and an operator norm of :math:`C_l`, divided by :math:`\\sqrt n`,
with the width entering only through a log factor -- not the theorem's constants:

``l1_measure`` (the abstract's "ℓ1 norm" choice)
    :math:`R_1 = \\frac{B_X}{\\sqrt n} \\prod_l \\mathrm{Lip}(b^{(l)}) \\|C_l\\|_1 \\cdot
    \\log(\\max_l n_{l-1}K_l)^{a}` with :math:`B_X = \\max_i \\|x_i\\|_\\infty`, entrywise
    :math:`\\|C_l\\|_1` and :math:`\\mathrm{Lip}(b^{(l)}) = \\max_k \\mathrm{Lip}(b_k)`;
``bartlett_measure`` (spectral, after Bartlett, Foster & Telgarsky 2017)
    :math:`R_{\\rm sp} = \\frac{\\|X\\|_F}{n} \\prod_l \\mathrm{Lip}(b^{(l)}) \\|C_l\\|_{\\rm op}
    \\Big(\\sum_l (\\|C_l^\\top\\|_{2,1} / \\|C_l\\|_{\\rm op})^{2/3}\\Big)^{3/2} \\log(\\max_l n_{l-1}K_l)^{a}`;
``rkhs_measure`` (the low-rank RKHS case; "polynomial in the ranks")
    :math:`R_{\\mathcal H} = \\frac{B_X}{\\sqrt n} \\prod_l r_l^{\\,p} \\cdot
    \\frac{\\max_s \\|g_{l,s}\\|_{\\mathcal H}}{\\ell} \\|A_l\\|_1 \\cdot \\log(\\max_l n_{l-1} r_l)^{a}`,
    using :math:`|g'(x)| \\le \\|g\\|_{\\mathcal H} / \\ell` for the Gaussian kernel.

All are 1-homogeneous in each :math:`C_l` and blind to zero-coefficient nodes except through the log
factor -- the two structural properties the notebooks check.
"""

from __future__ import annotations

import math

import torch

from .basis import SILU_MAX_SLOPE, bspline_max_slope
from .model import KAN, KANLayer, LowRankRKHSKAN, RKHSLayer

__all__ = ["basis_lipschitz", "spline_lipschitz", "network_lipschitz", "l1_measure",
           "bartlett_measure", "rkhs_measure", "measures", "log_factor", "MEASURES",
           "add_zero_nodes"]

MEASURES = ("l1", "bartlett", "rkhs")


def _x_bound(X, kind: str) -> float:
    X = torch.as_tensor(X)
    if X.dim() != 2:
        raise ValueError(f"X must be 2-D (n, d), got shape {tuple(X.shape)}")
    if kind == "inf":
        return float(X.abs().max())
    return float(torch.linalg.norm(X.double())) / X.shape[0]     # ||X||_F / n


def basis_lipschitz(layer) -> float:
    """:math:`\\max_k \\mathrm{Lip}(b_k)` of one layer's basis: SiLU's 1.0998 and the B-splines'
    maximal slope (:func:`~iclr25.kan_bounds.basis.bspline_max_slope`), or
    :math:`\\max_s \\|g_s\\|_{\\mathcal H}/\\ell` for an RKHS layer. Chapter 15, notebook ``01``."""
    if isinstance(layer, KANLayer):
        lip = bspline_max_slope(layer.k, layer.h)
        return max(lip, SILU_MAX_SLOPE) if layer.base else lip
    if isinstance(layer, RKHSLayer):
        return float(layer.rkhs_norms().max().detach()) / layer.lengthscale
    raise TypeError(f"expected a KANLayer or RKHSLayer, got {type(layer).__name__}")


def spline_lipschitz(layer: KANLayer) -> torch.Tensor:
    """Per-edge Lipschitz bound of :math:`\\varphi_{j,i}`, shape ``(n_out, n_in)``:
    :math:`|w^b_{j,i}|\\cdot 1.0998 + \\max_k |c_{j,i,k} - c_{j,i,k-1}| / h` (with zero coefficients
    beyond both ends), since :math:`\\frac{d}{dx}\\sum_k c_k B_{k,p} = \\sum_k \\frac{c_k - c_{k-1}}{h}
    B_{k,p-1}` and the :math:`B_{k,p-1}` sum to at most 1. Chapter 15, notebook ``01``."""
    if not isinstance(layer, KANLayer):
        raise TypeError(f"spline_lipschitz needs a KANLayer, got {type(layer).__name__}")
    c = layer.coef.detach()
    spl = c[..., 1:] if layer.base else c
    if layer.k == 0:
        lip = torch.zeros(c.shape[:2], dtype=c.dtype)
    else:
        padded = torch.nn.functional.pad(spl, (1, 1))
        lip = (padded[..., 1:] - padded[..., :-1]).abs().amax(-1) / layer.h
    if layer.base:
        lip = lip + c[..., 0].abs() * SILU_MAX_SLOPE
    return lip


def network_lipschitz(model: KAN) -> float:
    """An :math:`\\ell_\\infty \\to \\ell_\\infty` Lipschitz bound of the whole KAN:
    :math:`\\prod_l \\max_j \\sum_i \\mathrm{Lip}(\\varphi_{l,j,i})`. Chapter 15, notebook ``01``."""
    return math.prod(float(spline_lipschitz(layer).sum(1).max()) for layer in model.layers)


def log_factor(model, a: float = 0.5) -> float:
    """:math:`\\log(\\max_l n_{l-1} K_l)^{a}` (at least ``log 2`` inside)."""
    size = max(layer.in_dim * layer.n_basis for layer in model.layers)
    return math.log(max(size, 2)) ** a


def _check_a(a):
    if a not in (0.5, 1, 1.0):
        raise ValueError(f"log exponent a must be 0.5 or 1, got {a!r}")


def l1_measure(model, X, *, a: float = 0.5) -> float:
    """:math:`R_1` of the module docstring on data ``X`` (``n`` = its rows). Chapter 15, notebook ``02``."""
    _check_a(a)
    n = torch.as_tensor(X).shape[0]
    prod = math.prod(basis_lipschitz(layer) * float(layer.coef.detach().abs().sum())
                     for layer in model.layers)
    return _x_bound(X, "inf") / math.sqrt(n) * prod * log_factor(model, a)


def bartlett_measure(model, X, *, a: float = 0.5) -> float:
    """:math:`R_{\\rm sp}` of the module docstring (spectral norms and :math:`\\|C^\\top\\|_{2,1}`).
    Chapter 15, notebook ``02``."""
    _check_a(a)
    prod, ratio = 1.0, 0.0
    for layer in model.layers:
        C = layer.coef_matrix().detach().double()
        op = float(torch.linalg.matrix_norm(C, ord=2))
        if op == 0.0:
            return 0.0
        two_one = float(C.norm(dim=0).sum())            # ||C^T||_{2,1}: sum of column 2-norms
        prod *= basis_lipschitz(layer) * op
        ratio += (two_one / op) ** (2.0 / 3.0)
    return _x_bound(X, "fro") * prod * ratio ** 1.5 * log_factor(model, a)


def rkhs_measure(model: LowRankRKHSKAN, X, *, rank_power: float = 1.0, a: float = 0.5) -> float:
    """:math:`R_{\\mathcal H}` of the module docstring for a :class:`LowRankRKHSKAN`.
    Chapter 15, notebook ``03``."""
    _check_a(a)
    if not isinstance(model, LowRankRKHSKAN):
        raise TypeError(f"rkhs_measure needs a LowRankRKHSKAN, got {type(model).__name__}")
    n = torch.as_tensor(X).shape[0]
    prod = math.prod(layer.rank ** rank_power * basis_lipschitz(layer) * float(layer.coef.detach().abs().sum())
                     for layer in model.layers)
    return _x_bound(X, "inf") / math.sqrt(n) * prod * log_factor(model, a)


def measures(model, X, *, a: float = 0.5) -> dict[str, float]:
    """Every measure that applies to ``model`` (``l1``, ``bartlett``, and ``rkhs`` for RKHS KANs)."""
    out = {"l1": l1_measure(model, X, a=a), "bartlett": bartlett_measure(model, X, a=a)}
    if isinstance(model, LowRankRKHSKAN):
        out["rkhs"] = rkhs_measure(model, X, a=a)
    return out


def add_zero_nodes(model: KAN, layer: int, n_new: int) -> KAN:
    """A copy of ``model`` with ``n_new`` extra nodes after hidden layer ``layer`` (1..L-1), all of
    whose edges have zero coefficients: the same function. Chapter 15, notebook ``02``."""
    L = len(model.layers)
    if not 1 <= layer <= L - 1:
        raise ValueError(f"layer must be a hidden layer index in 1..{L - 1}, got {layer}")
    if n_new < 1:
        raise ValueError(f"n_new must be >= 1, got {n_new}")
    first = model.layers[0]
    widths = list(model.widths)
    widths[layer] += n_new
    bias = first.bias is not None
    new = KAN(widths, grid_size=first.grid_size, k=first.k, grid_range=first.grid_range,
              base=first.base, bias=bias, dropout=first.dropout, dropout_mode=first.dropout_mode,
              backend=first.backend, dtype=first.coef.dtype)
    with torch.no_grad():
        for l, (old_l, new_l) in enumerate(zip(model.layers, new.layers)):
            new_l.coef.zero_()
            o, i = old_l.coef.shape[:2]
            new_l.coef[:o, :i] = old_l.coef
            if bias:
                new_l.bias.zero_()
                new_l.bias[:o] = old_l.bias
    return new
