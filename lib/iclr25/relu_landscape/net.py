"""One-hidden-layer ReLU-like networks, f(x) = sum_j h_j sigma(w_j . x) (paper, Sec. 2).

``sigma(z) = rho_pos * z`` for ``z > 0`` and ``rho_neg * z`` for ``z < 0`` (ReLU: 1, 0; leaky ReLU:
1, alpha). Parameters are kept as plain arrays: ``W`` (m x d, input weights w_j as rows) and ``H``
(m x k, output weights h_j as rows). The loss is the mean squared error over all N*k outputs, as
PyTorch's ``F.mse_loss`` computes it in the official experiments:
``L = (1/(N k)) sum_n ||f(x_n) - y_n||^2``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

__all__ = ["ShallowNet", "init_net"]


@dataclass
class ShallowNet:
    """A one-hidden-layer network with a ReLU-like activation (chapter 18).

    Attributes
    ----------
    W : (m, d) array, input weights (row j is w_j).
    H : (m, k) array, output weights (row j is h_j).
    rho_pos, rho_neg : slopes of the activation for positive / negative pre-activations.
    """

    W: np.ndarray
    H: np.ndarray
    rho_pos: float = 1.0
    rho_neg: float = 0.0

    def __post_init__(self) -> None:
        self.W = np.asarray(self.W, dtype=np.float64)
        self.H = np.asarray(self.H, dtype=np.float64)
        if self.H.ndim == 1:
            self.H = self.H[:, None]
        if self.W.ndim != 2 or self.H.ndim != 2 or self.W.shape[0] != self.H.shape[0]:
            raise ValueError(f"W must be (m, d) and H (m, k) with the same m; got {self.W.shape}, "
                             f"{self.H.shape}")
        if self.rho_pos == self.rho_neg:
            raise ValueError("rho_pos == rho_neg makes the network linear; the paper needs them to differ")

    @property
    def width(self) -> int:
        return self.W.shape[0]

    @property
    def d(self) -> int:
        return self.W.shape[1]

    @property
    def k(self) -> int:
        return self.H.shape[1]

    def copy(self) -> "ShallowNet":
        return replace(self, W=self.W.copy(), H=self.H.copy())

    def act(self, Z: np.ndarray) -> np.ndarray:
        """sigma applied elementwise."""
        return np.where(Z > 0, self.rho_pos * Z, self.rho_neg * Z)

    def act_grad(self, Z: np.ndarray) -> np.ndarray:
        """sigma' elementwise, with sigma'(0) = rho_neg (PyTorch's convention for ReLU)."""
        return np.where(Z > 0, self.rho_pos, self.rho_neg)

    def hidden(self, X: np.ndarray) -> np.ndarray:
        """Hidden activations sigma(X W^T), shape (N, m)."""
        return self.act(X @ self.W.T)

    def forward(self, X: np.ndarray) -> np.ndarray:
        """Network outputs, shape (N, k)."""
        return self.hidden(X) @ self.H

    __call__ = forward

    def residuals(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """r_n = f(x_n) - y_n, shape (N, k)."""
        return self.forward(X) - np.asarray(Y, dtype=np.float64).reshape(len(X), -1)

    def loss(self, X: np.ndarray, Y: np.ndarray) -> float:
        """Mean squared error over all N*k outputs."""
        return float(np.mean(self.residuals(X, Y) ** 2))

    def grads(self, X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(dL/dW, dL/dH) where the loss is differentiable (sigma'(0) as in :meth:`act_grad`)."""
        Z = X @ self.W.T
        R = self.forward(X) - np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
        c = 2.0 / R.size
        dH = c * self.act(Z).T @ R
        dW = c * ((R @ self.H.T) * self.act_grad(Z)).T @ X
        return dW, dH


def init_net(d: int, width: int, k: int = 1, *, init_scale: float, seed: int = 0,
             rho_pos: float = 1.0, rho_neg: float = 0.0, generator: str = "numpy") -> ShallowNet:
    """Gaussian init with standard deviation ``init_scale`` for both layers.

    The paper parametrises the scale as ``width ** mu`` (``mu = -3``: 50^-3 = 8e-6 for Fig. 3).
    ``generator="numpy"`` draws from ``numpy.random.default_rng(seed)``; ``generator="torch"``
    draws as the official ``two_layer_net`` does (``torch.manual_seed(seed)``, then the input
    layer's m x d float32 weights ``normal_(0)`` times the scale, then the output layer's k x m),
    so that ``seed=12`` is the paper's own initialisation of Figs. 3, 11 and 12, to the bit (the
    float32 values, held in float64). Introduced in chapter 18, notebook ``01-saddle-to-saddle``.
    """
    if init_scale <= 0:
        raise ValueError(f"init_scale must be > 0, got {init_scale}")
    if generator == "numpy":
        rng = np.random.default_rng(seed)
        W = init_scale * rng.standard_normal((width, d))
        H = init_scale * rng.standard_normal((width, k))
    elif generator == "torch":
        import torch

        g = torch.Generator().manual_seed(int(seed))
        # the official order: input layer (m x d), then output layer (k x m), each N(0, 1) in
        # float32, scaled in float32 (``layer.weight.data * beta``)
        W = (torch.empty(width, d, dtype=torch.float32).normal_(0, generator=g) * init_scale).double().numpy()
        H = (torch.empty(k, width, dtype=torch.float32).normal_(0, generator=g) * init_scale).double().numpy().T
    else:
        raise ValueError(f"unknown generator {generator!r}; valid: numpy, torch")
    return ShallowNet(W, H, rho_pos, rho_neg)
