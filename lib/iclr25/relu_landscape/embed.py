"""Network embedding: widening a network without changing its function (paper, Sec. 5).

Splitting a neuron into copies with the same w_j and output weights summing to h_j keeps a local
minimum a local minimum; adding a zero-output neuron keeps stationarity when g(w_new) = 0, but makes
the point a saddle when the new neuron is an escape neuron (w_new = 0 with some D_S != 0, or w_new
next to a sector with D_S != 0).
"""

from __future__ import annotations

import numpy as np

from .net import ShallowNet

__all__ = ["split_neuron", "add_zero_neuron"]


def split_neuron(net: ShallowNet, j: int, alpha: float = 0.5) -> ShallowNet:
    """Replace neuron ``j`` by two copies with input weight w_j and output weights
    ``alpha h_j`` and ``(1 - alpha) h_j`` (the function is unchanged). Chapter 18, ``03-network-embedding``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if not 0 <= j < net.width:
        raise IndexError(f"neuron {j} out of range for width {net.width}")
    W = np.vstack([net.W, net.W[j:j + 1]])
    H = np.vstack([net.H, (1 - alpha) * net.H[j:j + 1]])
    H[j] = alpha * net.H[j]
    return ShallowNet(W, H, net.rho_pos, net.rho_neg)


def add_zero_neuron(net: ShallowNet, w: np.ndarray | None = None) -> ShallowNet:
    """Append a neuron with output weight 0 and input weight ``w`` (default: 0). The function is
    unchanged. Chapter 18, ``03-network-embedding``."""
    w = np.zeros(net.d) if w is None else np.asarray(w, dtype=np.float64).reshape(net.d)
    W = np.vstack([net.W, w[None]])
    H = np.vstack([net.H, np.zeros((1, net.k))])
    return ShallowNet(W, H, net.rho_pos, net.rho_neg)
