"""Compiled (numba) kernels for the KAN basis: one pass over the batch forward, one backward.

Forward writes, for every ``(b, i)``, ``out[b, i, 0] = SiLU(x)`` (when ``base``) and the ``k + 1``
non-zero uniform B-splines of order ``k`` into their columns (the rest stays zero). Backward
computes ``dx[b, i] = sum_c g[b, i, c] * d out[b, i, c] / dx`` with
``d/dx B_{j,k} = (B_{j,k-1} - B_{j+1,k-1}) / h`` and ``SiLU'(x) = s(x) (1 + x (1 - s(x)))``.
Used by :mod:`iclr25.kan_bounds.basis` (chapter 15, notebook ``01-kan-from-basis``).
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _local(t, k, N):
    # N[0..k]: B_{m-k+r, k} at local position t (unit knots), by the local Cox-de Boor recursion
    N[0] = 1.0
    for d in range(1, k + 1):
        prev = 0.0
        for r in range(d + 1):
            cur = N[r] if r <= d - 1 else 0.0
            v = 0.0
            if r >= 1:
                v += (t + d - r) / d * prev
            if r <= d - 1:
                v += (r + 1 - t) / d * cur
            prev = cur
            N[r] = v


def _basis_forward(x, G, k, lo, h, base, out):
    B, n = x.shape
    off = 1 if base else 0
    g0 = lo - k * h
    K = G + k
    for b in numba.prange(B):  # noqa: prange is range in the serial build
        N = np.empty(k + 1, dtype=np.float64)
        for i in range(n):
            xv = x[b, i]
            if base:
                out[b, i, 0] = xv / (1.0 + math.exp(-xv))
            u = (xv - g0) / h
            mf = math.floor(u)
            if mf < 0 or mf >= G + 2 * k:
                continue
            m = int(mf)
            _local(u - mf, k, N)
            for r in range(k + 1):
                j = m - k + r
                if 0 <= j < K:
                    out[b, i, off + j] = N[r]


def _basis_backward(x, g, G, k, lo, h, base, dx):
    B, n = x.shape
    off = 1 if base else 0
    g0 = lo - k * h
    K = G + k
    for b in numba.prange(B):  # noqa: prange is range in the serial build
        N = np.empty(k + 1, dtype=np.float64)
        for i in range(n):
            xv = x[b, i]
            acc = 0.0
            if base:
                s = 1.0 / (1.0 + math.exp(-xv))
                acc += g[b, i, 0] * s * (1.0 + xv * (1.0 - s))
            u = (xv - g0) / h
            mf = math.floor(u)
            if k >= 1 and 0 <= mf < G + 2 * k:
                m = int(mf)
                _local(u - mf, k - 1, N)      # N[0..k-1]: B_{m-k+1+r, k-1}
                for r in range(k + 1):
                    j = m - k + r
                    if 0 <= j < K:
                        d = 0.0
                        if r >= 1:
                            d += N[r - 1]
                        if r <= k - 1:
                            d -= N[r]
                        acc += g[b, i, off + j] * d / h
            dx[b, i] = acc


# serial kernels for small batches or one thread (a parallel region's thread start-up and
# spinning cost far more than the work there), parallel ones for large batches
basis_forward = numba.njit(cache=True)(_basis_forward)
basis_backward = numba.njit(cache=True)(_basis_backward)
# (not cached: both builds come from the same Python function and would share one cache index)
basis_forward_parallel = numba.njit(parallel=True)(_basis_forward)
basis_backward_parallel = numba.njit(parallel=True)(_basis_backward)
PARALLEL_MIN_ENTRIES = 100_000


def use_parallel(n_entries: int, n_threads: int) -> bool:
    """Parallel kernels only for at least ``PARALLEL_MIN_ENTRIES`` entries and > 1 thread."""
    return n_threads > 1 and n_entries >= PARALLEL_MIN_ENTRIES
