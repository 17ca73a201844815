"""Full-batch gradient descent from a vanishing initialisation (the paper's Fig. 3 set-up).

Three implementations of the same update behind :func:`train_gd`:

``"numba"`` (default when numba imports)
    the whole loop compiled once: the network is tiny (N = 5, m = 50), so per-step Python
    overhead is what a plain loop pays for; compiled, a step costs about a microsecond.
``"numpy"``
    the plain reference: one vectorised numpy step per iteration, the same arithmetic.
``"torch"``
    a per-step PyTorch loop with ``optim.SGD`` and ``F.mse_loss``, as the official experiments run
    (float64 here so that it agrees with the others to rounding).

All three compute, for the loss L = (1/(N k)) sum ||f(x_n) - y_n||^2 (paper, Sec. 2):
    dL/dh_j = (2/(N k)) sum_n r_n sigma(w_j . x_n)
    dL/dw_j = (2/(N k)) sum_n (r_n . h_j) sigma'(w_j . x_n) x_n
and update theta <- theta - lr * grad, logging every ``log_every`` steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..progress import progress
from .net import ShallowNet

__all__ = ["Trajectory", "train_gd", "BACKENDS", "default_backend"]

from ..jit import available as _numba_available
from ..jit import numba, require  # numba is None without it: numpy and torch run without it

BACKENDS = ("numba", "numpy", "torch")


def default_backend() -> str:
    """``"numba"`` when available (set ``ICLR25_NO_NUMBA=1`` to force the reference), else ``"numpy"``."""
    return "numba" if _numba_available() else "numpy"


@dataclass
class Trajectory:
    """What :func:`train_gd` records.

    steps : (T,) iteration numbers of the snapshots (0 = the initialisation).
    loss : (T,) loss at each snapshot.
    W : (T, m, d) and H : (T, m, k) parameter snapshots.
    net : the final network (after the last step).
    lr : the learning rate (time in gradient-flow units is ``lr * steps``).
    """

    steps: np.ndarray
    loss: np.ndarray
    W: np.ndarray
    H: np.ndarray
    net: ShallowNet
    lr: float

    def at(self, i: int) -> ShallowNet:
        """The network at snapshot ``i``."""
        n = self.net
        return ShallowNet(self.W[i].copy(), self.H[i].copy(), n.rho_pos, n.rho_neg)

    def at_step(self, step: int) -> ShallowNet:
        """The network at the snapshot closest to iteration ``step``."""
        return self.at(int(np.argmin(np.abs(self.steps - step))))


# -- the numpy reference ---------------------------------------------------------------------------

def _gd_numpy(W, H, X, Y, lr, n_steps, log_every, rho_pos, rho_neg, stop_loss, bar):
    n_log = n_steps // log_every + 1
    Ws = np.empty((n_log,) + W.shape)
    Hs = np.empty((n_log,) + H.shape)
    losses = np.empty(n_log)
    c = 2.0 / Y.size
    i_log = 0
    last = 0
    for t in range(n_steps + 1):
        Z = X @ W.T
        A = np.where(Z > 0, rho_pos * Z, rho_neg * Z)
        R = A @ H - Y
        if t % log_every == 0:
            Ws[i_log], Hs[i_log], losses[i_log] = W, H, np.mean(R * R)
            i_log += 1
            if bar is not None and t:
                bar.update(t - last)
                last = t
            if losses[i_log - 1] < stop_loss:
                break
        if t == n_steps:
            break
        S = np.where(Z > 0, rho_pos, rho_neg)
        dH = c * (A.T @ R)
        dW = c * (((R @ H.T) * S).T @ X)
        W = W - lr * dW
        H = H - lr * dH
    return W, H, Ws[:i_log], Hs[:i_log], losses[:i_log]


# -- the compiled fast path ------------------------------------------------------------------------

if numba is not None:

    @numba.njit(cache=True, fastmath=False)
    def _gd_chunk(W, H, X, Y, lr, n_steps, rho_pos, rho_neg):  # pragma: no cover - compiled
        """n_steps GD steps in place; returns the loss before the first step."""
        N, d = X.shape
        m, k = H.shape
        c = 2.0 / (N * k)
        Z = np.empty((N, m))
        R = np.empty((N, k))
        gw = np.empty(d)
        gh = np.empty(k)
        loss0 = 0.0
        for t in range(n_steps + 1):
            for n in range(N):
                for j in range(m):
                    z = 0.0
                    for a in range(d):
                        z += X[n, a] * W[j, a]
                    Z[n, j] = z
                for o in range(k):
                    s = -Y[n, o]
                    for j in range(m):
                        z = Z[n, j]
                        s += (rho_pos * z if z > 0 else rho_neg * z) * H[j, o]
                    R[n, o] = s
            if t == 0:
                for n in range(N):
                    for o in range(k):
                        loss0 += R[n, o] * R[n, o]
                loss0 /= N * k
            if t == n_steps:
                break
            for j in range(m):
                # gradients of neuron j, then its update (Z and R hold the pre-step values)
                gw[:] = 0.0
                gh[:] = 0.0
                for n in range(N):
                    z = Z[n, j]
                    act = rho_pos * z if z > 0 else rho_neg * z
                    slope = rho_pos if z > 0 else rho_neg
                    rh = 0.0
                    for o in range(k):
                        rh += R[n, o] * H[j, o]
                        gh[o] += R[n, o] * act
                    for a in range(d):
                        gw[a] += rh * slope * X[n, a]
                for a in range(d):
                    W[j, a] -= lr * c * gw[a]
                for o in range(k):
                    H[j, o] -= lr * c * gh[o]
        return loss0


def _gd_numba(W, H, X, Y, lr, n_steps, log_every, rho_pos, rho_neg, stop_loss, bar):
    W = np.ascontiguousarray(W.copy())
    H = np.ascontiguousarray(H.copy())
    Ws, Hs, losses = [], [], []
    t = 0
    while True:
        Ws.append(W.copy())
        Hs.append(H.copy())
        losses.append(_gd_chunk(W, H, X, Y, lr, 0, rho_pos, rho_neg))  # loss, no step
        if losses[-1] < stop_loss or t == n_steps:
            break
        chunk = min(log_every, n_steps - t)
        _gd_chunk(W, H, X, Y, lr, chunk, rho_pos, rho_neg)
        t += chunk
        if bar is not None:
            bar.update(chunk)
        if t % log_every:  # a last partial chunk: the final state is not a snapshot
            break
    return W, H, np.array(Ws), np.array(Hs), np.array(losses)


# -- the official-style PyTorch loop (the benchmark's peer) ----------------------------------------

def _gd_torch(W, H, X, Y, lr, n_steps, log_every, rho_pos, rho_neg, stop_loss, bar):
    import torch
    import torch.nn.functional as F

    w = torch.tensor(W, requires_grad=True)
    h = torch.tensor(H, requires_grad=True)
    Xt, Yt = torch.tensor(X), torch.tensor(Y)
    opt = torch.optim.SGD([w, h], lr=lr)
    Ws, Hs, losses = [], [], []
    last = 0
    for t in range(n_steps + 1):
        Z = Xt @ w.T
        out = torch.where(Z > 0, rho_pos * Z, rho_neg * Z)
        loss = F.mse_loss(out @ h, Yt)
        if t % log_every == 0:
            Ws.append(w.detach().numpy().copy()); Hs.append(h.detach().numpy().copy())
            losses.append(loss.item())
            if bar is not None and t:
                bar.update(t - last); last = t
            if losses[-1] < stop_loss:
                break
        if t == n_steps:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    return (w.detach().numpy().copy(), h.detach().numpy().copy(), np.array(Ws), np.array(Hs),
            np.array(losses))


_IMPL = {"numpy": _gd_numpy, "numba": _gd_numba, "torch": _gd_torch}


def train_gd(net: ShallowNet, X: np.ndarray, Y: np.ndarray, *, lr: float, n_steps: int,
             log_every: int = 1000, stop_loss: float = 0.0, backend: str | None = None,
             show_progress: bool = True) -> Trajectory:
    """Full-batch gradient descent on the MSE loss, recording snapshots every ``log_every`` steps.

    ``net`` is not modified. ``stop_loss`` stops early once the loss falls below it (the official
    code uses 1e-5). ``backend`` is one of :data:`BACKENDS` (default :func:`default_backend`); all
    agree to floating-point rounding.

    Introduced in chapter 18, notebook ``01-saddle-to-saddle``.
    """
    backend = backend or default_backend()
    if backend not in _IMPL:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if backend == "numba":
        require("numba", "numpy")
    if n_steps < 0 or log_every <= 0:
        raise ValueError(f"need n_steps >= 0 and log_every > 0, got {n_steps}, {log_every}")
    X = np.ascontiguousarray(X, dtype=np.float64)
    Y = np.ascontiguousarray(np.asarray(Y, dtype=np.float64).reshape(len(X), -1))
    if Y.shape[1] != net.k or X.shape[1] != net.d:
        raise ValueError(f"data (d={X.shape[1]}, k={Y.shape[1]}) does not fit the network "
                         f"(d={net.d}, k={net.k})")
    bar = progress(total=n_steps, desc=f"GD ({backend})", unit="it", unit_scale=True) \
        if show_progress else None
    try:
        W, H, Ws, Hs, losses = _IMPL[backend](net.W.copy(), net.H.copy(), X, Y, float(lr),
                                              int(n_steps), int(log_every), float(net.rho_pos),
                                              float(net.rho_neg), float(stop_loss), bar)
    finally:
        if bar is not None:
            bar.close()
    steps = np.arange(len(losses)) * log_every
    final = ShallowNet(W, H, net.rho_pos, net.rho_neg)
    return Trajectory(steps=steps, loss=losses, W=Ws, H=Hs, net=final, lr=float(lr))


def run(cfg, *, backend: str | None = None, show_progress: bool = True) -> tuple[Trajectory, np.ndarray, np.ndarray]:
    """Train from a :class:`~.configs.RunConfig`: returns ``(trajectory, X, Y)``.

    Introduced in chapter 18, notebook ``01-saddle-to-saddle``.
    """
    from .data import load
    from .net import init_net

    X, Y = load(cfg.dataset)
    net = init_net(X.shape[1], cfg.width, Y.shape[1], init_scale=cfg.init_scale, seed=cfg.seed,
                   rho_neg=cfg.rho_neg, generator=cfg.generator)
    traj = train_gd(net, X, Y, lr=cfg.lr, n_steps=cfg.n_steps, log_every=cfg.log_every,
                    stop_loss=cfg.stop_loss, backend=backend, show_progress=show_progress)
    return traj, X, Y
