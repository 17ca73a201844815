"""KANs as "basis expansion, then one linear map" per layer (chapter 15).

Layer ``l`` maps :math:`\\mathbb{R}^{n_{l-1}} \\to \\mathbb{R}^{n_l}` by
:math:`y_j = \\sum_i \\varphi_{l,j,i}(x_i)` with, in pykan's parametrisation,

.. math:: \\varphi_{j,i}(x) = w^{b}_{j,i}\\,\\mathrm{SiLU}(x) + \\sum_{k=1}^{G+k_s} c_{j,i,k} B_k(x).

Stacking :math:`b(x) = (\\mathrm{SiLU}(x), B_1(x), \\dots, B_{G+k_s}(x)) \\in \\mathbb{R}^K` for every
input gives :math:`B_l(x) \\in \\mathbb{R}^{n_{l-1} K}` and :math:`\\Phi_l(x) = C_l B_l(x)` with
:math:`C_l \\in \\mathbb{R}^{n_l \\times n_{l-1} K}` -- the view the paper's covering argument uses
(notebook ``01-kan-from-basis``). pykan keeps a separate spline scale :math:`w^s_{j,i}`; we fold it into
the coefficients (:meth:`KAN.from_pykan`), which changes nothing in the function.

The low-rank RKHS KAN replaces the basis by ``r`` learned functions
:math:`g_s(x) = \\sum_m \\beta_{s,m} \\exp(-(x - z_m)^2 / 2\\ell^2)` shared by the layer's edges
(notebook ``03-digits-and-low-rank``).
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Sequence

import torch
from torch import nn

from .basis import BACKENDS, bspline_basis, kan_basis

__all__ = ["KANLayer", "KAN", "RKHSLayer", "LowRankRKHSKAN", "DROPOUT_MODES", "OutOfGridWarning",
           "outside_grid_share", "warn_outside_grid"]

DROPOUT_MODES = ("edge", "node")


def _check_widths(widths) -> list[int]:
    try:
        w = [int(v) for v in widths]
    except (TypeError, ValueError):
        raise ValueError(f"widths must be a list of positive integers, got {widths!r}") from None
    if len(w) < 2 or any(v < 1 for v in w) or any(int(a) != a for a in widths):
        raise ValueError(f"widths must list at least 2 positive integers [n_0, ..., n_L], got {widths!r}")
    return w


def _check_dropout(p: float, mode: str) -> None:
    if not 0.0 <= float(p) < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {p!r}")
    if mode not in DROPOUT_MODES:
        raise ValueError(f"unknown dropout mode {mode!r}; valid: {', '.join(DROPOUT_MODES)}")


class OutOfGridWarning(UserWarning):
    """Inputs outside a KAN's spline grid ``[lo, hi]``: its B-splines vanish beyond the grid (pykan's
    convention), so only the SiLU branch is left there and the spline part the model learned is
    not used. ``warnings.simplefilter("ignore", OutOfGridWarning)`` silences it. Chapter 15."""


def outside_grid_share(X: torch.Tensor, grid_range: Sequence[float]) -> float:
    """The share of the entries of ``X`` outside ``[lo, hi]`` (chapter 15)."""
    if X.numel() == 0:
        return 0.0
    lo, hi = float(grid_range[0]), float(grid_range[1])
    return float(((X < lo) | (X > hi)).sum()) / X.numel()


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside torch and this package
    (the user's ``model(X)``, however many torch wrappers lie between)."""
    import sys

    skip = (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(torch.__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(skip):
        frame, level = frame.f_back, level + 1
    return level


def warn_outside_grid(X: torch.Tensor, grid_range: Sequence[float], what: str = "inputs",
                      advice: str | None = None) -> float:
    """Warn (:class:`OutOfGridWarning`) when entries of ``X`` lie outside the spline grid; return
    their share. Chapter 15."""
    share = outside_grid_share(X, grid_range)
    if share > 0:
        lo, hi = float(grid_range[0]), float(grid_range[1])
        advice = advice or (f"scale them as the training inputs were (e.g. with the same sklearn "
                            f"MinMaxScaler(feature_range=({lo:g}, {hi:g}))), or widen grid_range")
        warnings.warn(f"{share:.1%} of the {what} lie outside the spline grid [{lo:g}, {hi:g}], "
                      f"where the B-splines are zero and only the SiLU branch is left: {advice}",
                      OutOfGridWarning, stacklevel=_caller_stacklevel())
    return share


def _as_input(x, dtype: torch.dtype) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        kind = f"{type(x).__module__}.{type(x).__name__}".replace("builtins.", "")
        raise TypeError(f"the input is a {kind}, not a torch.Tensor: convert it with "
                        f"torch.as_tensor(X, dtype={dtype})")
    return x


class _BasisLayer(nn.Module):
    """Common part: ``y = C B(x) (+ bias)`` with dropout on the edge activations."""

    n_basis: int

    def basis(self, x: torch.Tensor) -> torch.Tensor:  # (batch, n_in, K)
        raise NotImplementedError

    def coef_matrix(self) -> torch.Tensor:
        """:math:`C_l` as an ``(n_out, n_in * K)`` matrix (input-major, basis-minor columns)."""
        return self.coef.reshape(self.out_dim, self.in_dim * self.n_basis)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _as_input(x, self.coef.dtype)
        if x.dim() != 2 or x.shape[1] != self.in_dim:
            raise ValueError(f"expected input of shape (batch, {self.in_dim}), got {tuple(x.shape)}")
        if x.dtype != self.coef.dtype:
            raise TypeError(f"the input is {x.dtype} but the layer's coefficients are "
                            f"{self.coef.dtype}: convert the input (x.to({self.coef.dtype})) or "
                            f"build the model with dtype={x.dtype}")
        Bx = self.basis(x)                                     # (batch, n_in, K)
        p = self.dropout if self.training else 0.0
        if p > 0 and self.dropout_mode == "edge":
            # dropout on each activation phi_{j,i}(x_i): per sample and edge
            phi = torch.einsum("bik,jik->bji", Bx, self.coef)
            mask = (torch.rand_like(phi) >= p).to(phi.dtype) / (1 - p)
            y = (phi * mask).sum(-1)
        else:
            if p > 0:   # "node": one mask per sample and input, shared by its outgoing edges
                Bx = Bx * ((torch.rand(x.shape, device=x.device) >= p).to(x.dtype) / (1 - p))[..., None]
            y = Bx.reshape(x.shape[0], -1) @ self.coef_matrix().T   # Phi_l(x) = C_l B_l(x)
        if self.bias is not None:
            y = y + self.bias
        return y


class KANLayer(_BasisLayer):
    """One KAN layer with SiLU + B-spline activations on every edge.

    Parameters
    ----------
    in_dim, out_dim:
        :math:`n_{l-1}`, :math:`n_l`.
    grid_size:
        ``G``, grid intervals on ``grid_range`` (pykan's ``grid``; paper brief: 5).
    k:
        spline order (3: cubic).
    grid_range:
        ``(lo, hi)``; the splines live on ``[lo - k h, hi + k h]`` and are zero outside (pykan).
    base:
        include the SiLU base branch (column 0 of each input's basis block).
    dropout, dropout_mode:
        dropout on the activations during training (the paper's regularised KAN uses 0.1);
        ``"edge"`` drops each :math:`\\varphi_{j,i}(x_i)` independently, ``"node"`` drops an input's
        whole basis row (cheaper).
    backend:
        ``"fast"`` (compiled uniform-grid kernel), ``"torch"`` (uniform-grid local B-splines in torch
        ops, custom backward) or ``"reference"`` (Cox--de Boor, autograd).
    init_scale:
        standard deviation of the initial spline coefficients; the SiLU weights start uniform in
        ``+-1/sqrt(in_dim)`` (as pykan).

    Introduced in chapter 15, notebook ``01-kan-from-basis``.
    """

    def __init__(self, in_dim: int, out_dim: int, grid_size: int = 5, k: int = 3,
                 grid_range: Sequence[float] = (-1.0, 1.0), *, base: bool = True, bias: bool = False,
                 dropout: float = 0.0, dropout_mode: str = "edge", backend: str = "fast",
                 init_scale: float = 0.1, dtype=torch.float32):
        super().__init__()
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
        _check_dropout(dropout, dropout_mode)
        if int(in_dim) < 1 or int(out_dim) < 1:
            raise ValueError(f"in_dim and out_dim must be positive, got {in_dim}, {out_dim}")
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.grid_size, self.k = int(grid_size), int(k)
        self.grid_range = (float(grid_range[0]), float(grid_range[1]))
        bspline_basis(torch.zeros(1, 1), self.grid_size, self.k, self.grid_range)  # validates
        self.base, self.backend = bool(base), backend
        self.dropout, self.dropout_mode = float(dropout), dropout_mode
        self.n_basis = self.grid_size + self.k + int(self.base)
        coef = torch.randn(out_dim, in_dim, self.n_basis, dtype=dtype) * init_scale / math.sqrt(in_dim)
        if self.base:
            coef[..., 0] = (torch.rand(out_dim, in_dim, dtype=dtype) * 2 - 1) / math.sqrt(in_dim)
        self.coef = nn.Parameter(coef)                          # c_{j,i,k}
        self.bias = nn.Parameter(torch.zeros(out_dim, dtype=dtype)) if bias else None

    @property
    def h(self) -> float:
        """Grid spacing."""
        return (self.grid_range[1] - self.grid_range[0]) / self.grid_size

    def basis(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`b(x_i)` for every input: ``(batch, n_in, K)``, SiLU first when ``base``."""
        return kan_basis(x, self.grid_size, self.k, self.grid_range, base=self.base, backend=self.backend)

    def extra_repr(self) -> str:
        return (f"{self.in_dim} -> {self.out_dim}, G={self.grid_size}, k={self.k}, "
                f"range={self.grid_range}, dropout={self.dropout} ({self.dropout_mode}), "
                f"backend={self.backend}")


class KAN(nn.Module):
    """A KAN of widths ``[n_0, ..., n_L]``: ``f = Phi_L o ... o Phi_1`` with :class:`KANLayer` s.

    ``**layer_kw`` go to every layer (``grid_size``, ``k``, ``grid_range``, ``dropout``, ...).
    Introduced in chapter 15, notebook ``01-kan-from-basis``.
    """

    def __init__(self, widths: Sequence[int], **layer_kw):
        super().__init__()
        self.widths = _check_widths(widths)
        self.layers = nn.ModuleList(KANLayer(a, b, **layer_kw)
                                    for a, b in zip(self.widths[:-1], self.widths[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``f(x)``. In eval mode (prediction: after :func:`~iclr25.kan_bounds.train`, or
        ``model.eval()``), inputs outside the first layer's spline grid raise an
        :class:`OutOfGridWarning`, as training inputs do in
        :func:`~iclr25.kan_bounds.train.check_data`."""
        x = _as_input(x, self.layers[0].coef.dtype)
        if not self.training:
            warn_outside_grid(x, self.layers[0].grid_range, "inputs to the model")
        for layer in self.layers:
            x = layer(x)
        return x

    def coef_matrices(self) -> list[torch.Tensor]:
        """The :math:`C_l`, each ``(n_l, n_{l-1} K_l)``."""
        return [layer.coef_matrix() for layer in self.layers]

    def basis(self, x: torch.Tensor) -> list[torch.Tensor]:
        """:math:`B_l` of every layer along the forward pass, each ``(batch, n_{l-1} K_l)``."""
        out = []
        for layer in self.layers:
            out.append(layer.basis(x).reshape(x.shape[0], -1))
            x = layer(x)
        return out

    def set_dropout(self, p: float, mode: str | None = None) -> "KAN":
        """Set the activation dropout of every layer (0.1: the paper's regularised KAN)."""
        for layer in self.layers:
            _check_dropout(p, mode or layer.dropout_mode)
            layer.dropout, layer.dropout_mode = float(p), mode or layer.dropout_mode
        return self

    def set_backend(self, backend: str) -> "KAN":
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
        for layer in self.layers:
            layer.backend = backend
        return self

    @classmethod
    def from_pykan(cls, model, **layer_kw) -> "KAN":
        """The same function as a pykan ``MultKAN`` (no multiplication nodes, uniform grids, no
        symbolic branch in use), with its coefficients: ``C[j, i] = (w^b_{ij}, w^s_{ij} c_{ij,:})``
        times pykan's node and subnode scales; their biases become layer biases.

        Introduced in chapter 15, notebook ``01-kan-from-basis``.
        """
        widths = [int(w[0]) if isinstance(w, (list, tuple)) else int(w) for w in model.width]
        if any((w[1] if isinstance(w, (list, tuple)) else 0) for w in model.width):
            raise ValueError("from_pykan supports KANs without multiplication nodes")
        first = model.act_fun[0]
        grid = first.grid.detach()
        lo, hi = float(grid[0, first.k]), float(grid[0, -first.k - 1])
        ours = cls(widths, grid_size=int(first.num), k=int(first.k), grid_range=(lo, hi), bias=True,
                   dtype=grid.dtype, **layer_kw)
        for l, (mine, theirs) in enumerate(zip(ours.layers, model.act_fun)):
            g = theirs.grid.detach()
            ref = torch.linspace(lo, hi, int(theirs.num) + 1, dtype=g.dtype)
            if not torch.allclose(g[:, theirs.k:-theirs.k], ref[None].expand_as(g[:, theirs.k:-theirs.k]),
                                  atol=1e-6):
                raise ValueError(f"layer {l}: pykan grid is not the uniform grid on ({lo}, {hi}); "
                                 "call from_pykan before update_grid")
            mask = theirs.mask.detach()                              # (in, out)
            sb = (theirs.scale_base.detach() * mask).T               # (out, in)
            sp = (theirs.scale_sp.detach() * mask).T
            spline = theirs.coef.detach().permute(1, 0, 2) * sp[..., None]   # (out, in, G+k)
            s1, b1 = model.subnode_scale[l].detach(), model.subnode_bias[l].detach()
            s2, b2 = model.node_scale[l].detach(), model.node_bias[l].detach()
            scale = (s1 * s2)[:, None, None]
            with torch.no_grad():
                mine.coef.copy_(torch.cat([sb[..., None], spline], dim=-1) * scale)
                mine.bias.copy_(s2 * b1 + b2)
        return ours


class RKHSLayer(_BasisLayer):
    """A low-rank RKHS KAN layer: :math:`\\varphi_{j,i}(x) = \\sum_{s=1}^{r} a_{j,i,s} g_s(x)` with
    :math:`g_s = \\sum_m \\beta_{s,m} k(\\cdot, z_m)`, Gaussian kernel of length scale ``lengthscale``
    and ``n_centers`` fixed centres evenly spaced on ``center_range``.

    :math:`C_l` is the ``(n_out, n_in r)`` matrix of the :math:`a_{j,i,s}`; ``beta`` (``(r, M)``) is
    learned too. Introduced in chapter 15, notebook ``03-digits-and-low-rank``.
    """

    def __init__(self, in_dim: int, out_dim: int, rank: int, *, n_centers: int = 12,
                 center_range: Sequence[float] = (-2.0, 2.0), lengthscale: float = 0.5,
                 dropout: float = 0.0, dropout_mode: str = "edge", bias: bool = False,
                 dtype=torch.float32):
        super().__init__()
        if int(rank) < 1:
            raise ValueError(f"rank must be a positive integer, got {rank!r}")
        if int(n_centers) < 1 or not lengthscale > 0:
            raise ValueError(f"need n_centers >= 1 and lengthscale > 0, got {n_centers}, {lengthscale}")
        _check_dropout(dropout, dropout_mode)
        self.in_dim, self.out_dim, self.rank = int(in_dim), int(out_dim), int(rank)
        self.n_basis = self.rank
        self.lengthscale = float(lengthscale)
        self.dropout, self.dropout_mode = float(dropout), dropout_mode
        self.register_buffer("centers", torch.linspace(float(center_range[0]), float(center_range[1]),
                                                       int(n_centers), dtype=dtype))
        self.beta = nn.Parameter(torch.randn(self.rank, int(n_centers), dtype=dtype) / math.sqrt(n_centers))
        self.coef = nn.Parameter(torch.randn(out_dim, in_dim, self.rank, dtype=dtype)
                                 / math.sqrt(in_dim * self.rank))
        self.bias = nn.Parameter(torch.zeros(out_dim, dtype=dtype)) if bias else None

    def gram(self) -> torch.Tensor:
        """Kernel matrix of the centres, ``k(z_m, z_m')``."""
        d = self.centers[:, None] - self.centers[None, :]
        return torch.exp(-d ** 2 / (2 * self.lengthscale ** 2))

    def rkhs_norms(self) -> torch.Tensor:
        """:math:`\\|g_s\\|_{\\mathcal H} = \\sqrt{\\beta_s^\\top K \\beta_s}` for each ``s``."""
        return torch.sqrt(torch.clamp(torch.einsum("sm,mn,sn->s", self.beta, self.gram(), self.beta), min=0))

    def basis(self, x: torch.Tensor) -> torch.Tensor:
        kx = torch.exp(-(x[..., None] - self.centers) ** 2 / (2 * self.lengthscale ** 2))  # (b, n, M)
        return kx @ self.beta.T                                                            # (b, n, r)


class LowRankRKHSKAN(nn.Module):
    """A KAN whose activations lie in a rank-``rank`` subspace of a Gaussian RKHS (per layer).

    Introduced in chapter 15, notebook ``03-digits-and-low-rank``.
    """

    def __init__(self, widths: Sequence[int], rank: int | Sequence[int], **layer_kw):
        super().__init__()
        self.widths = _check_widths(widths)
        ranks = [int(rank)] * (len(self.widths) - 1) if isinstance(rank, (int, float)) else list(rank)
        if len(ranks) != len(self.widths) - 1:
            raise ValueError(f"need one rank per layer ({len(self.widths) - 1}), got {ranks}")
        self.layers = nn.ModuleList(RKHSLayer(a, b, r, **layer_kw)
                                    for a, b, r in zip(self.widths[:-1], self.widths[1:], ranks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def coef_matrices(self) -> list[torch.Tensor]:
        return [layer.coef_matrix() for layer in self.layers]

    def set_dropout(self, p: float, mode: str | None = None) -> "LowRankRKHSKAN":
        for layer in self.layers:
            _check_dropout(p, mode or layer.dropout_mode)
            layer.dropout, layer.dropout_mode = float(p), mode or layer.dropout_mode
        return self
