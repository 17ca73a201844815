"""Generalisation bounds for KANs with every constant explicit (chapter 15).

**Provenance.** Zhang & Zhou (ICLR 2025) prove two bounds: one for activations that are linear
combinations of basis functions (B-splines), which for one choice of per-layer norms "scales with
the :math:`\\ell_1` norm of the coefficient matrices and the Lipschitz constants of the
activations" with node counts only inside logarithms, and one for activations in a low-rank RKHS,
"polynomial in the ranks". Their proofs use Maurey's sparsification lemma for per-layer covering
numbers and Dudley's entropy integral. The full text of the theorems (their constants and log
factors) could not be read offline for this book: only the abstract and third-party summaries
were available. This module therefore does **not** transcribe the paper's Theorems; it carries
out that proof technique for the book's KANs and states every constant it uses, each step being a
standard, citable result:

1. **Maurey covering of one layer** (the lemma behind Bartlett, Foster & Telgarsky 2017, Lemma 3.2;
   Zhang 2002). For a data matrix :math:`\\Psi \\in \\mathbb{R}^{n\\times d}` whose columns have
   :math:`\\ell_2` norm :math:`\\le c`, the set :math:`\\{\\Psi C^\\top : C \\in \\mathbb{R}^{m\\times d},
   \\|C\\|_1 \\le a\\}` (entrywise :math:`\\ell_1`) has an :math:`\\varepsilon`-cover in Frobenius norm
   of log-size :math:`\\lceil a^2c^2/\\varepsilon^2\\rceil \\ln(2dm)`.
2. **Composition** (BFT 2017, Lemma A.7 style): covering layer :math:`l` at :math:`\\varepsilon_l`
   (given earlier cover elements) moves the output by at most
   :math:`\\varepsilon_l\\prod_{m>l} s_m\\kappa_m`, with :math:`\\kappa_m` the Lipschitz constant of the
   basis map :math:`\\psi_m` from Frobenius to Frobenius norm and :math:`s_m \\ge \\|C_m\\|_\\sigma`.
   Allocating :math:`\\varepsilon_l \\propto (u_l^2 \\ln 2W_l)^{1/3}/\\rho_l` gives, in the empirical
   norm :math:`\\|\\cdot\\|_n = \\|\\cdot\\|_F/\\sqrt n`,

   .. math:: \\ln N(\\mathcal F, \\varepsilon, \\|\\cdot\\|_n) \\le \\frac{\\bar R^2}{\\varepsilon^2} + \\sum_l \\ln(2W_l),
      \\qquad \\bar R = \\Big(\\sum_l (\\bar u_l^2 \\ln 2W_l)^{1/3}\\Big)^{3/2},
      \\quad \\bar u_l = a_l\\,\\bar\\beta_l \\prod_{m>l} s_m\\kappa_m,

   where :math:`a_l = \\|[C_l\\,|\\,b_l]\\|_1`, :math:`\\bar\\beta_l` bounds every basis function on the
   layer's input range (B-splines: 1; SiLU: its value at the range's edge; bias column: 1),
   :math:`W_l = n_l(n_{l-1}K_l + 1)` counts the atoms. With ``norms="l1"`` the spectral norms are
   replaced by their upper bound :math:`\\|C_m\\|_1`, so the bound is in :math:`\\ell_1` norms and
   Lipschitz constants only, widths entering through :math:`\\ln(2W_l)` alone -- the shape the
   abstract states. ``norms="spectral"`` is the tighter BFT-type variant.
3. **Loss.** Squared loss on outputs bounded by :math:`M_L` and targets by :math:`Y`: values in
   :math:`[0, (M_L+Y)^2]`, Lipschitz :math:`2(M_L+Y)`; cross-entropy: values in
   :math:`[0, 2M_L + \\ln C]`, Lipschitz :math:`\\sqrt 2` in the logits' :math:`\\ell_2` norm.
4. **Dudley's entropy integral** (BFT 2017, Lemma A.5, in normalised form):
   :math:`\\hat{\\mathfrak R}_S(\\mathcal G) \\le \\inf_{\\alpha>0}\\big(4\\alpha + \\tfrac{12}{\\sqrt n}\\int_\\alpha^{D}
   \\sqrt{\\ln N(\\mathcal G,\\varepsilon,\\|\\cdot\\|_n)}\\,d\\varepsilon\\big)`, evaluated numerically with an
   upper Riemann sum (the integrand decreases) and the best :math:`\\alpha` on a grid.
5. **Rademacher bound** (Mohri, Rostamizadeh & Talwalkar 2018, Theorem 3.3, scaled to
   :math:`[0,B]`): with probability :math:`\\ge 1-\\delta`, for every :math:`f` of the class,
   :math:`L(f) - \\hat L_S(f) \\le 2\\hat{\\mathfrak R}_S(\\ell\\circ\\mathcal F) + 3B\\sqrt{\\ln(2/\\delta)/(2n)}`.

The **low-rank RKHS case** replaces the basis of layer :math:`l` by :math:`r_l` learned functions
:math:`g_{l,s} = \\sum_m \\beta_{s,m}k(\\cdot,z_m)` (Gaussian kernel, :math:`M` fixed centres) with
:math:`\\|g_{l,s}\\|_{\\mathcal H} \\le \\varrho_l`. Then :math:`|g| \\le \\varrho_l`, the basis map is
:math:`\\kappa_l = \\sqrt{r_l}\\,\\varrho_l/\\ell`-Lipschitz (:math:`|g'| \\le \\|g\\|_{\\mathcal H}/\\ell`), and
the :math:`g` themselves are covered too: an internal :math:`\\eta`-cover of the
:math:`r_lM`-dimensional ball costs :math:`r_lM\\ln(1+2\\varrho_l/\\eta)`, and
:math:`\\eta = \\varepsilon_l/(2a_l)` moves the layer's output by at most :math:`\\varepsilon_l/2`. The
entropy gains :math:`r_lM\\ln(1 + 4\\varrho_l a_l/\\varepsilon_l)` -- polynomial in the rank through
:math:`\\kappa_l` and this term.

**What is not covered** (deviations, also on the chapter page): the bound is for the norm ball that
contains the trained network (the union bound over radii that makes it hold for a data-chosen
network, a factor of at most 2 per norm and a :math:`\\ln\\ln` term, is omitted); targets are assumed
bounded by their sample maximum (the paper needs no bounded loss; Gaussian noise is not bounded).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .basis import SILU_MAX_SLOPE, local_bspline_slopes
from .model import KANLayer, RKHSLayer

__all__ = ["bspline_kappa", "silu_sup", "LayerTerms", "layer_terms", "entropy", "dudley",
           "kan_bound", "terms_by_hand", "NORMS", "LOSSES", "SILU_MIN"]

NORMS = ("l1", "spectral")
LOSSES = ("mse", "ce")
#: min_t SiLU(t) = -0.27846... (at t = -1.27846)
SILU_MIN = -0.2784645


def bspline_kappa(k: int, h: float = 1.0) -> float:
    """:math:`\\sup_x (\\sum_j B_{j,k}'(x)^2)^{1/2}` for uniform B-splines of order ``k`` and spacing
    ``h``: the Frobenius-to-Frobenius Lipschitz constant of :math:`x \\mapsto (B_j(x))_j`.

    Numerical, on 20,001 points of one grid interval (the ``k + 1`` non-zero splines there, from the
    local recursion; derivatives :math:`(B_{j,k-1} - B_{j+1,k-1})/h`); for cubic splines it is
    :math:`\\sqrt{13/16}/h`, attained mid-interval. Chapter 15, notebook ``01-kan-from-basis``.
    """
    if not isinstance(k, int) or k < 0:
        raise ValueError(f"spline order k must be a non-negative integer, got {k!r}")
    if not h > 0:
        raise ValueError(f"grid spacing h must be > 0, got {h!r}")
    if k == 0:
        return 0.0
    t = torch.linspace(0, 1, 20001, dtype=torch.float64)
    sq = sum(v * v for v in local_bspline_slopes(t, k))
    return math.sqrt(float(sq.max())) / h


def silu_sup(m: float) -> float:
    """:math:`\\sup_{|t|\\le m} |\\mathrm{SiLU}(t)|` (SiLU's minimum is -0.27846 at -1.27846)."""
    m = float(m)
    if m < 0:
        raise ValueError(f"m must be >= 0, got {m}")
    neg = -(-min(m, 1.2784645)) / (1 + math.exp(min(m, 1.2784645)))   # |SiLU(-min(m, t*))|
    return max(m / (1 + math.exp(-m)), neg)


@dataclass
class LayerTerms:
    """The constants of one layer that enter the bound (see the module docstring)."""

    a: float            # ||[C_l | b_l]||_1, entrywise
    spectral: float     # ||C_l||_sigma
    row_l1: float       # max_j sum_m |[C_l | b_l]_{jm}|  (the inf -> inf operator norm)
    kappa: float        # Lipschitz constant of the basis map psi_l (Frobenius -> Frobenius)
    beta: float         # sup of every basis function (and the bias column) on the layer's input range
    W: int              # atoms: n_l * (n_{l-1} K_l + 1)
    m_in: float         # sup-norm bound on the layer's input
    m_out: float        # sup-norm bound on the layer's output and on its cover elements (= a * beta)
    param_dim: int = 0  # RKHS layers: r_l * M (the g's are covered too); 0 for fixed bases
    rho_h: float = 0.0  # RKHS layers: max_s ||g_s||_H


def _with_bias(layer) -> torch.Tensor:
    C = layer.coef_matrix().detach().double()
    b = layer.bias.detach().double()[:, None] if getattr(layer, "bias", None) is not None \
        else torch.zeros(C.shape[0], 1, dtype=torch.float64)
    return torch.cat([C, b], dim=1)


def layer_terms(layer, m_in: float) -> LayerTerms:
    """:class:`LayerTerms` of a :class:`~iclr25.kan_bounds.model.KANLayer` or
    :class:`~iclr25.kan_bounds.model.RKHSLayer` whose inputs are bounded by ``m_in`` in sup norm.
    Chapter 15, notebook ``02-bound-vs-gap``."""
    if not isinstance(layer, (KANLayer, RKHSLayer)):
        raise TypeError(f"expected a KANLayer or RKHSLayer, got {type(layer).__name__}")
    Cb = _with_bias(layer)
    a = float(Cb.abs().sum())
    row = float(Cb.abs().sum(1).max())
    spec = float(torch.linalg.matrix_norm(Cb[:, :-1], ord=2))
    W = int(Cb.shape[0] * Cb.shape[1])
    has_bias = getattr(layer, "bias", None) is not None
    if isinstance(layer, KANLayer):
        ks = bspline_kappa(layer.k, layer.h)
        beta = 1.0 if layer.k >= 0 else 0.0           # B-splines lie in [0, 1]
        if layer.base:
            kappa = math.sqrt(ks ** 2 + SILU_MAX_SLOPE ** 2)
            beta = max(beta, silu_sup(m_in))
        else:
            kappa = ks
        extra = dict()
    elif isinstance(layer, RKHSLayer):
        rho = float(layer.rkhs_norms().max().detach())
        kappa = math.sqrt(layer.rank) * rho / layer.lengthscale
        beta = rho
        extra = dict(param_dim=int(layer.rank * layer.centers.numel()), rho_h=rho)
    else:
        raise TypeError(f"expected a KANLayer or RKHSLayer, got {type(layer).__name__}")
    if has_bias:
        beta = max(beta, 1.0)
    return LayerTerms(a=a, spectral=spec, row_l1=row, kappa=kappa, beta=beta, W=W, m_in=float(m_in),
                      m_out=a * beta, **extra)


def _check_choice(name, value, valid):
    if value not in valid:
        raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(valid)}")


def entropy(terms: list[LayerTerms], eps, *, norms: str = "l1", lip_out: float = 1.0):
    """Upper bound on :math:`\\ln N(\\ell\\circ\\mathcal F, \\varepsilon, \\|\\cdot\\|_n)` at every ``eps``
    (array), for the class given by ``terms`` composed with a ``lip_out``-Lipschitz loss.

    Returns ``(log_n, rbar)``: the bound and :math:`\\bar R` (before the loss's factor).
    Chapter 15, notebook ``02-bound-vs-gap``.
    """
    _check_choice("norms", norms, NORMS)
    eps = np.asarray(eps, dtype=float) / float(lip_out)
    L = len(terms)
    s = [t.a if norms == "l1" else t.spectral for t in terms]
    rho = [math.prod(s[m] * terms[m].kappa for m in range(l + 1, L)) for l in range(L)]
    split = [2.0 if t.param_dim else 1.0 for t in terms]    # RKHS: half the budget covers the g's
    u = [split[l] * terms[l].a * terms[l].beta * rho[l] for l in range(L)]
    lw = [math.log(2 * t.W) for t in terms]
    v = [(u[l] ** 2 * lw[l]) ** (1 / 3) for l in range(L)]
    rbar = sum(v) ** 1.5
    out = rbar ** 2 / eps ** 2 + sum(lw)
    tot = sum(v)
    for l, t in enumerate(terms):
        if t.param_dim and t.a > 0:
            alpha = v[l] / tot if tot > 0 else 1.0 / L
            eps_l = alpha * eps / rho[l] if rho[l] > 0 else np.inf
            out = out + t.param_dim * np.log1p(4 * t.rho_h * t.a / eps_l)
    return out, rbar


def dudley(log_n, D: float, n: int, *, grid: int = 4000, lo: float = 1e-9):
    """:math:`\\inf_\\alpha\\, 4\\alpha + \\frac{12}{\\sqrt n}\\int_\\alpha^D \\sqrt{\\ln N(\\varepsilon)}\\,d\\varepsilon`
    for a decreasing entropy bound ``log_n`` (a function of an array of ``eps``): left Riemann sums
    on a geometric grid (upper bounds, the integrand decreasing), minimised over ``alpha`` on the
    same grid. Returns ``(value, alpha)``. Chapter 15, notebook ``02-bound-vs-gap``."""
    if not D > 0 or int(n) < 1:
        raise ValueError(f"need D > 0 and n >= 1, got D={D}, n={n}")
    e = D * np.geomspace(lo, 1.0, grid)
    f = np.sqrt(np.maximum(np.asarray(log_n(e), dtype=float), 0.0))
    pieces = f[:-1] * np.diff(e)                                   # left endpoints: upper sum
    tail = np.concatenate([np.cumsum(pieces[::-1])[::-1], [0.0]])  # integral from e[i] to D
    vals = 4 * e + 12 / math.sqrt(n) * tail
    vals = np.append(vals, 4 * D)                                  # alpha = D (no integral)
    i = int(np.argmin(vals))
    return float(vals[i]), float(e[i]) if i < len(e) else float(D)


def kan_bound(model, X, y=None, *, loss: str = "mse", n_classes: int | None = None,
              norms: str = "l1", delta: float = 0.05, y_bound: float | None = None) -> dict:
    """The generalisation bound of the module docstring for a trained ``model`` (a
    :class:`~iclr25.kan_bounds.model.KAN` or :class:`~iclr25.kan_bounds.model.LowRankRKHSKAN`) on its
    training sample ``X`` (and targets ``y`` for ``loss="mse"``).

    Returns a dict: ``complexity`` (:math:`\\bar R` of the network), ``main_term``
    (:math:`24\\,\\mathrm{Lip}(\\ell)\\bar R/\\sqrt n`: twice Dudley's leading term without its log factor,
    the quantity compared across runs), ``rademacher`` (Dudley's bound
    on :math:`\\hat{\\mathfrak R}_S(\\ell\\circ\\mathcal F)`), ``confidence``
    (:math:`3B\\sqrt{\\ln(2/\\delta)/2n}`), ``bound`` (:math:`2\\hat{\\mathfrak R} + ` confidence: the
    bound on test loss minus train loss), ``vacuous`` (bound :math:`\\ge B`, the largest possible
    loss: Dudley's optimum is then often the trivial :math:`\\alpha = D`), ``loss_range`` :math:`B`, ``lip_loss``, ``m_out``
    (:math:`M_L`) and ``layers`` (the :class:`LayerTerms`). Chapter 15, notebook ``02-bound-vs-gap``.
    """
    _check_choice("loss", loss, LOSSES)
    _check_choice("norms", norms, NORMS)
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    X = torch.as_tensor(X)
    if X.dim() != 2 or X.shape[1] != model.widths[0]:
        raise ValueError(f"X must have shape (n, {model.widths[0]}), got {tuple(X.shape)}")
    n = int(X.shape[0])
    m = float(X.abs().max())
    terms = []
    for layer in model.layers:
        t = layer_terms(layer, m)
        terms.append(t)
        m = t.m_out
    if loss == "mse":
        if y_bound is None:
            if y is None:
                raise ValueError("loss='mse' needs the targets y (or y_bound, a bound on |y|)")
            y_bound = float(torch.as_tensor(y).abs().max())
        B = (m + y_bound) ** 2
        lip = 2 * (m + y_bound)
    else:
        C = int(n_classes or model.widths[-1])
        B = 2 * m + math.log(C)
        lip = math.sqrt(2.0)
    rbar = entropy(terms, np.array([1.0]), norms=norms)[1]
    rad, alpha = dudley(lambda e: entropy(terms, e, norms=norms, lip_out=lip)[0], B, n)
    conf = 3 * B * math.sqrt(math.log(2 / delta) / (2 * n))
    main = 24 * lip * rbar / math.sqrt(n)
    return {"complexity": rbar, "main_term": main, "rademacher": rad, "confidence": conf,
            "bound": 2 * rad + conf, "vacuous": bool(2 * rad + conf >= B), "loss_range": B,
            "lip_loss": lip, "m_out": m, "alpha": alpha, "n": n, "layers": terms}


def terms_by_hand(model, X, y=None, *, loss: str = "mse", eps=(0.1, 1.0, 10.0)) -> dict:
    """The bound's terms recomputed from the raw parameters, one closed form per line, with plain
    numpy and loops (no call to :func:`layer_terms`, :func:`entropy` or :func:`kan_bound`): the
    reference the chapter's bound is checked against on small hand-built KANs (notebook 01).

    Per layer (``norms="l1"``): :math:`a_l = \\sum|c| + \\sum|b|`; :math:`W_l = n_l(n_{l-1}K_l + 1)`;
    spline layers: :math:`h = (\\text{grid range})/G`,
    :math:`\\kappa_l = \\sqrt{13/(16h^2) + 1.0998^2}` (cubic splines and SiLU; without SiLU
    :math:`\\sqrt{13/16}/h`), :math:`\\bar\\beta_l = \\max(1, \\sup_{|t|\\le M_{l-1}}|\\mathrm{SiLU}(t)|)`;
    RKHS layers: :math:`\\varrho_l = \\max_s\\sqrt{\\beta_s^\\top K\\beta_s}`, :math:`\\kappa_l = \\sqrt{r_l}\\varrho_l/\\ell`,
    :math:`\\bar\\beta_l = \\varrho_l` (1 with a bias), entropy gains
    :math:`r_lM\\ln(1 + 4\\varrho_la_l/\\varepsilon_l)` and :math:`\\bar u_l` a factor 2;
    :math:`M_l = a_l\\bar\\beta_l`; :math:`\\bar u_l = a_l\\bar\\beta_l\\prod_{m>l}a_m\\kappa_m`;
    :math:`\\bar R = (\\sum_l(\\bar u_l^2\\ln 2W_l)^{1/3})^{3/2}`; squared loss:
    :math:`B = (M_L + \\max|y|)^2`, :math:`\\mathrm{Lip} = 2(M_L + \\max|y|)`; cross-entropy:
    :math:`B = 2M_L + \\ln C`, :math:`\\mathrm{Lip} = \\sqrt2`; main term
    :math:`24\\,\\mathrm{Lip}\\,\\bar R/\\sqrt n`; and the entropy bound at each of ``eps``
    (the loss's Lipschitz constant included). Chapter 15, notebook ``01-kan-from-basis``.
    """
    X = np.asarray(torch.as_tensor(X).detach().double())
    n, m_in = X.shape[0], float(np.abs(X).max())
    layers = []
    for layer in model.layers:
        c = layer.coef.detach().double().numpy()
        b = layer.bias.detach().double().numpy() if getattr(layer, "bias", None) is not None else np.zeros(0)
        n_out, n_in, K = c.shape
        a = float(sum(abs(v) for v in c.ravel()) + sum(abs(v) for v in b))
        W = n_out * (n_in * K + 1)
        extra, rho_h = 0, 0.0
        if isinstance(layer, KANLayer):
            h = (layer.grid_range[1] - layer.grid_range[0]) / layer.grid_size
            spline = 13.0 / (16.0 * h * h)
            kappa = math.sqrt(spline + SILU_MAX_SLOPE ** 2) if layer.base else math.sqrt(spline)
            t = min(m_in, 1.2784645)
            silu = max(m_in / (1 + math.exp(-m_in)), t / (1 + math.exp(t)))
            beta = max(1.0, silu) if layer.base else 1.0
        else:
            z = layer.centers.detach().double().numpy()
            G = np.exp(-(z[:, None] - z[None, :]) ** 2 / (2 * layer.lengthscale ** 2))
            B_ = layer.beta.detach().double().numpy()
            rho_h = max(math.sqrt(max(float(B_[s] @ G @ B_[s]), 0.0)) for s in range(layer.rank))
            kappa = math.sqrt(layer.rank) * rho_h / layer.lengthscale
            beta = max(rho_h, 1.0) if len(b) else rho_h
            extra = layer.rank * len(z)
        layers.append(dict(a=a, W=W, kappa=kappa, beta=beta, m_out=a * beta, param_dim=extra, rho_h=rho_h))
        m_in = a * beta
    L = len(layers)
    u = []
    for l in range(L):
        prod = 1.0
        for q in range(l + 1, L):
            prod *= layers[q]["a"] * layers[q]["kappa"]
        u.append((2.0 if layers[l]["param_dim"] else 1.0) * layers[l]["a"] * layers[l]["beta"] * prod)
    lw = [math.log(2 * t["W"]) for t in layers]
    rbar = sum((u[l] ** 2 * lw[l]) ** (1.0 / 3.0) for l in range(L)) ** 1.5
    M = layers[-1]["m_out"]
    if loss == "mse":
        Y = float(np.abs(np.asarray(torch.as_tensor(y).detach().double())).max())
        B, lip = (M + Y) ** 2, 2 * (M + Y)
    else:
        B, lip = 2 * M + math.log(model.widths[-1]), math.sqrt(2.0)
    ent = []
    for e in eps:
        v = rbar ** 2 * lip ** 2 / e ** 2 + sum(lw)
        tot = sum((u[q] ** 2 * lw[q]) ** (1.0 / 3.0) for q in range(L))
        for l, t in enumerate(layers):
            if t["param_dim"]:
                share = (u[l] ** 2 * lw[l]) ** (1.0 / 3.0) / tot
                prod = 1.0
                for q in range(l + 1, L):
                    prod *= layers[q]["a"] * layers[q]["kappa"]
                eps_l = share * (e / lip) / prod
                v += t["param_dim"] * math.log(1 + 4 * t["rho_h"] * t["a"] / eps_l)
        ent.append(v)
    return {"layers": layers, "u": u, "complexity": rbar, "loss_range": B, "lip_loss": lip,
            "main_term": 24 * lip * rbar / math.sqrt(n), "entropy": ent, "eps": list(eps)}
