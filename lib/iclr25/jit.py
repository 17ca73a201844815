"""The optional numba switch, in one place (part of the shared core).

Chapters 01, 04, 15 and 18 compile their fast path with numba when it imports; without it (or with
``ICLR25_NO_NUMBA=1``) their default backend is the numpy/torch path, which computes the same
thing. Use::

    from ..jit import numba, available

    if numba is not None:          # define the compiled kernels
        kernel = numba.njit(cache=True)(_kernel)

    def default_backend():
        return "numba" if available() else "numpy"
"""

from __future__ import annotations

import os

try:  # the compiled paths; every chapter runs without it, slower
    import numba
except ImportError:  # pragma: no cover
    numba = None

__all__ = ["numba", "available", "disabled", "require"]

ENV = "ICLR25_NO_NUMBA"


def disabled() -> bool:
    """``$ICLR25_NO_NUMBA=1``: default backends use the uncompiled path (for tests, comparisons)."""
    return os.environ.get(ENV, "0") == "1"


def available() -> bool:
    """numba imports and ``$ICLR25_NO_NUMBA`` is not ``1``: the compiled path is the default."""
    return numba is not None and not disabled()


def require(backend: str = "numba", fallback: str = "numpy") -> None:
    """Raise a clear error when ``backend`` is asked for explicitly but numba is not installed."""
    if numba is None:
        raise ValueError(f"backend {backend!r} needs numba installed (pip install numba); "
                         f"use {fallback!r}")
