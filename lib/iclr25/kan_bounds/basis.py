"""B-spline bases for a whole batch: the reference Cox--de Boor recursion and the fast uniform path.

A KAN layer (chapter 15, notebook ``01-kan-from-basis``) expands every input coordinate
:math:`x_i` in a fixed basis :math:`b_1, \\dots, b_K` (SiLU plus the B-splines of order ``k`` on a
grid of ``G`` intervals) and then applies one linear map,

.. math:: \\Phi_l(x) = C_l\\, B_l(x), \\qquad B_l(x) = (b_k(x_i))_{i,k} \\in \\mathbb{R}^{n_{l-1} K}.

Two paths compute :math:`B_l(x)`:

``reference``
    the textbook Cox--de Boor recursion over the full extended grid (any, also non-uniform, knots),
    differentiated by autograd -- plain and slow;
``fast``
    uniform knots only: a compiled (numba) kernel writes SiLU and the ``k + 1`` non-zero B-splines
    of every entry in one pass, and its backward computes ``dx`` in one more (falls back to
    ``torch`` without numba);
``torch``
    uniform knots only, in torch ops: locate each :math:`x_i` in its grid interval, evaluate the ``k + 1``
    non-zero B-splines there with the local recursion, and scatter them into the dense basis. A
    custom autograd function saves only ``x`` and recomputes the local values in the backward pass
    (the derivative of a uniform B-spline is a difference of two of order ``k - 1``).

Both agree to float rounding (``tests/kan_bounds``). The grid follows pykan's convention: ``G + 1``
points on ``grid_range``, extended by ``k`` points of the same spacing on each side, giving ``G + k``
B-splines supported on ``[lo - k h, hi + k h]`` and zero outside.
"""

from __future__ import annotations


import torch
import torch.nn.functional as F

__all__ = ["extended_grid", "bspline_reference", "bspline_uniform", "bspline_basis", "kan_basis", "HAVE_NUMBA",
           "local_bspline", "SILU_MAX_SLOPE", "bspline_max_slope", "BACKENDS"]

BACKENDS = ("fast", "torch", "reference")

from ..jit import available as _numba_available
from ..jit import numba as _nb

if _nb is not None:  # the compiled kernels; without numba "fast" falls back to the torch local path
    from . import _numba
else:  # pragma: no cover
    _numba = None
HAVE_NUMBA = _numba is not None

#: sup_x |d/dx SiLU(x)| = 1.0998... (attained near x = 2.3994)
SILU_MAX_SLOPE = 1.0998393


def _check_grid(grid_size: int, k: int, grid_range) -> tuple[float, float]:
    if not isinstance(grid_size, int) or grid_size < 1:
        raise ValueError(f"grid_size must be a positive integer (number of grid intervals G), got {grid_size!r}")
    if not isinstance(k, int) or k < 0:
        raise ValueError(f"spline order k must be a non-negative integer, got {k!r}")
    lo, hi = (float(v) for v in grid_range)
    if not hi > lo:
        raise ValueError(f"grid_range must be (lo, hi) with hi > lo, got {tuple(grid_range)}")
    return lo, hi


def extended_grid(grid_size: int, k: int, grid_range=(-1.0, 1.0), *, dtype=torch.float32) -> torch.Tensor:
    """Knots ``lo - k h, ..., hi + k h`` (``G + 2k + 1`` of them, spacing ``h = (hi - lo) / G``).

    Introduced in chapter 15, notebook ``01-kan-from-basis``.
    """
    lo, hi = _check_grid(grid_size, k, grid_range)
    h = (hi - lo) / grid_size
    return lo + h * torch.arange(-k, grid_size + k + 1, dtype=torch.float64).to(dtype)


def bspline_reference(x: torch.Tensor, knots: torch.Tensor, k: int) -> torch.Tensor:
    """All B-splines of order ``k`` on ``knots`` at every entry of ``x`` by Cox--de Boor.

    ``x``: ``(batch, n_in)``; ``knots``: ``(n_knots,)`` (shared) or ``(n_in, n_knots)`` (per input,
    any non-decreasing knots). Returns ``(batch, n_in, n_knots - k - 1)``. Order 0 is the indicator
    of ``[t_j, t_{j+1})``; order ``d`` is
    ``B_{j,d}(x) = (x - t_j)/(t_{j+d} - t_j) B_{j,d-1}(x) + (t_{j+d+1} - x)/(t_{j+d+1} - t_{j+1}) B_{j+1,d-1}(x)``.

    Introduced in chapter 15, notebook ``01-kan-from-basis``.
    """
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (batch, n_in), got shape {tuple(x.shape)}")
    t = knots if knots.dim() == 2 else knots[None, :].expand(x.shape[1], -1)
    if t.shape[0] != x.shape[1]:
        raise ValueError(f"knots have {t.shape[0]} rows but x has {x.shape[1]} inputs")
    if t.shape[1] < k + 2:
        raise ValueError(f"need at least k + 2 = {k + 2} knots, got {t.shape[1]}")
    t = t.to(x.dtype)[None]                                   # (1, n_in, n_knots)
    xx = x[:, :, None]
    B = ((xx >= t[..., :-1]) & (xx < t[..., 1:])).to(x.dtype)  # order 0
    for d in range(1, k + 1):
        left = (xx - t[..., :-(d + 1)]) / (t[..., d:-1] - t[..., :-(d + 1)])
        right = (t[..., d + 1:] - xx) / (t[..., d + 1:] - t[..., 1:-d])
        B = torch.nan_to_num(left * B[..., :-1] + right * B[..., 1:])
    return B


def local_bspline(t: torch.Tensor, k: int) -> list[torch.Tensor]:
    """The ``k + 1`` uniform B-splines of order ``k`` that are non-zero at local position
    ``t`` in ``[0, 1)`` of grid interval ``m``: entry ``r`` is ``B_{m-k+r}``.

    Recursion on unit knots: ``N_d[r] = (t + d - r)/d N_{d-1}[r-1] + (r + 1 - t)/d N_{d-1}[r]``.
    """
    if k == 3:   # the cubic pieces in closed form (fewer tensor ops than the recursion)
        t2 = t * t
        t3 = t2 * t
        s = 1.0 - t
        b0 = s * s * s / 6.0
        b3 = t3 / 6.0
        b1 = 0.5 * t3 - t2 + 2.0 / 3.0
        return [b0, b1, 1.0 - b0 - b1 - b3, b3]
    N = [torch.ones_like(t)]
    for d in range(1, k + 1):
        new = []
        for r in range(d + 1):
            v = 0.0
            if r >= 1:
                v = v + (t + d - r) / d * N[r - 1]
            if r <= d - 1:
                v = v + (r + 1 - t) / d * N[r]
            new.append(v)
        N = new
    return N


def local_bspline_slopes(t: torch.Tensor, k: int) -> list[torch.Tensor]:
    """Derivatives, on unit knots, of the ``k + 1`` splines :func:`local_bspline` returns:
    ``d/dt B_{m-k+r,k} = B_{m-k+r,k-1} - B_{m-k+r+1,k-1}`` (divide by the spacing ``h`` for
    ``d/dx``). Needs ``k >= 1``."""
    low = local_bspline(t, k - 1)                        # k values: B_{m-k+1+r, k-1}
    slopes = []
    for r in range(k + 1):
        v = torch.zeros_like(t)
        if r >= 1:
            v = v + low[r - 1]
        if r <= k - 1:
            v = v - low[r]
        slopes.append(v)
    return slopes


def _locate(x: torch.Tensor, lo: float, h: float, G: int, k: int):
    """Interval index ``m`` on the extended grid, local position ``t`` and the in-support mask."""
    u = (x - (lo - k * h)) / h
    m = torch.floor(u)
    t = u - m
    m = m.long()
    inside = (m >= 0) & (m < G + 2 * k)
    return m, t, inside


def _scatter(x, G, k, lo, h, values):
    """Scatter local values (list of k+1 tensors (batch, n_in)) into (batch, n_in, G + k)."""
    K = G + k
    m, t, inside = _locate(x, lo, h, G, k)
    out = x.new_zeros(x.shape[0], x.shape[1], K + 2 * k)   # padded: index j + k for j in [-k, K + k)
    vals = torch.stack(values, dim=-1) * inside[..., None]  # (batch, n_in, k+1)
    idx = (m.clamp(0, G + 2 * k - 1) - k)[..., None] + torch.arange(k + 1, device=x.device) + k
    out.scatter_(2, idx, vals)
    return out[..., k:k + K]


class _UniformBSpline(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, G, k, lo, h):
        m, t, inside = _locate(x, lo, h, G, k)
        ctx.save_for_backward(x)
        ctx.args = (G, k, lo, h)
        return _scatter(x, G, k, lo, h, local_bspline(t, k))

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        G, k, lo, h = ctx.args
        if k == 0:
            return torch.zeros_like(x), None, None, None, None
        m, t, inside = _locate(x, lo, h, G, k)
        # d/dx B_{j,k} = (B_{j,k-1} - B_{j+1,k-1}) / h; in local offsets r = 0..k
        dvals = [v / h for v in local_bspline_slopes(t, k)]
        K = G + k
        pad = torch.nn.functional.pad(grad_out, (k, k))  # index j + k
        idx = (m.clamp(0, G + 2 * k - 1) - k)[..., None] + torch.arange(k + 1, device=x.device) + k
        g = torch.gather(pad, 2, idx)                        # (batch, n_in, k+1)
        dx = (g * torch.stack(dvals, -1)).sum(-1) * inside
        return dx, None, None, None, None


def bspline_uniform(x: torch.Tensor, grid_size: int, k: int, grid_range=(-1.0, 1.0)) -> torch.Tensor:
    """Fast path: the ``G + k`` B-splines on the uniform extended grid at every entry of ``x``.

    Same values as :func:`bspline_reference` on :func:`extended_grid`; shape ``(batch, n_in, G + k)``.
    Introduced in chapter 15, notebook ``01-kan-from-basis``.
    """
    lo, hi = _check_grid(grid_size, k, grid_range)
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (batch, n_in), got shape {tuple(x.shape)}")
    return _UniformBSpline.apply(x, grid_size, k, lo, (hi - lo) / grid_size)


class _CompiledBasis(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, G, k, lo, h, base):
        xd = x.detach().contiguous()
        out = torch.zeros(x.shape[0], x.shape[1], G + k + int(base), dtype=x.dtype)
        threads = torch.get_num_threads()
        par = _numba.use_parallel(xd.numel(), threads)
        if par:
            import numba
            numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
        kernel = _numba.basis_forward_parallel if par else _numba.basis_forward
        kernel(xd.numpy(), G, k, lo, h, base, out.numpy())
        ctx.save_for_backward(xd)
        ctx.args = (G, k, lo, h, base, par)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        G, k, lo, h, base, par = ctx.args
        dx = torch.empty_like(x)
        kernel = _numba.basis_backward_parallel if par else _numba.basis_backward
        kernel(x.numpy(), grad_out.contiguous().to(x.dtype).numpy(), G, k, lo, h, base,
                              dx.numpy())
        return dx, None, None, None, None, None


def kan_basis(x: torch.Tensor, grid_size: int = 5, k: int = 3, grid_range=(-1.0, 1.0), *,
              base: bool = True, backend: str = "fast") -> torch.Tensor:
    """The whole KAN basis of every input, ``(batch, n_in, [1 +] G + k)``: SiLU first (if ``base``),
    then the B-splines. ``backend``: ``"fast"`` (compiled), ``"torch"`` or ``"reference"``.
    Introduced in chapter 15, notebook ``01-kan-from-basis``."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    lo, hi = _check_grid(grid_size, k, grid_range)
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (batch, n_in), got shape {tuple(x.shape)}")
    if backend == "fast" and HAVE_NUMBA and _numba_available() and x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        return _CompiledBasis.apply(x, grid_size, k, lo, (hi - lo) / grid_size, bool(base))
    Bs = bspline_basis(x, grid_size, k, grid_range, backend="torch" if backend == "fast" else backend)
    if base:
        return torch.cat([F.silu(x)[..., None], Bs], dim=-1)
    return Bs


def bspline_basis(x: torch.Tensor, grid_size: int = 5, k: int = 3, grid_range=(-1.0, 1.0), *,
                  backend: str = "fast") -> torch.Tensor:
    """The B-spline part of a KAN basis, ``(batch, n_in, G + k)``, by ``backend`` ``"fast"``,
    ``"torch"`` or ``"reference"`` (see the module docstring). Introduced in chapter 15, notebook
    ``01-kan-from-basis``."""
    if backend == "fast":
        return kan_basis(x, grid_size, k, grid_range, base=False, backend="fast")
    if backend == "torch":
        return bspline_uniform(x, grid_size, k, grid_range)
    if backend == "reference":
        return bspline_reference(x, extended_grid(grid_size, k, grid_range, dtype=x.dtype), k)
    raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")


def bspline_max_slope(k: int, h: float = 1.0) -> float:
    """``sup_x |B'_{j,k}(x)|`` for a uniform B-spline of order ``k`` and spacing ``h`` (numerical,
    on a fine local grid: 1/h for k = 1 and 2, 2/(3h) for k = 3)."""
    if k == 0:
        return 0.0
    t = torch.linspace(0, 1, 20001, dtype=torch.float64)[:-1]
    best = max(float(v.abs().max()) for v in local_bspline_slopes(t, k))
    return best / h
