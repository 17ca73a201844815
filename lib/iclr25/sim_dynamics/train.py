"""Training MLPs on the SIM task, an ensemble of runs at once.

The paper (and the official ``main.py``) trains an MLP of depth 1-4 with plain SGD on the identity
map and evaluates the held-out composition before every step. Sweeps need many such runs (seeds x
settings). :func:`train_sim` trains ``R`` runs in one batched computation: the weights of layer
``l`` of every run are stacked into one ``(R, d_out, d_in)`` tensor, a forward pass is a chain of
``torch.bmm``, and one backward pass of the summed per-run losses gives every run its own gradient
(the runs share no parameter). The plain reference, ``backend="loop"``, trains the same runs one
after another with an ``nn.Sequential`` and ``torch.optim.SGD`` as the official loop does; both use
the same initial weights and the same batch order, so they agree to rounding (tested).

Loss and time. We minimise the paper's ``L = 1/2 E ||f(x) - x||^2`` (mean over the batch), so
gradient-flow time is ``t = lr * step``. The official code uses ``F.mse_loss`` (mean over the batch
*and* the ``dim`` coordinates), i.e. ``2 L / dim``: its ``lr = 0.1`` in 64 dimensions is our
``lr = 0.1 * 2 / 64 = 0.003125``.

Introduced in notebook ``09-sim-dynamics/01-linear-theory``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from ..progress import progress
from .data import SIMData

__all__ = ["MLPSpec", "Trajectory", "train_sim", "init_params", "mirror_init", "forward", "BACKENDS",
           "OOD_EVALS"]

BACKENDS = ("batched", "loop")
OOD_EVALS = ("auto", "samples", "moments")
INIT_DISTS = ("normal", "uniform")


@dataclass(frozen=True)
class MLPSpec:
    """An MLP ``dim -> hdim -> ... -> dim`` with ``n_layers`` linear layers (official ``models/mlp.py``).

    n_layers : 1 (a single ``dim x dim`` matrix) to 4.
    hdim : hidden width (paper: 64). relu : ReLU between layers (not after the last).
    bias : whether layers have biases (the theory has none).
    init_scale : ``None`` = PyTorch's default ``nn.Linear`` init, U(-1/sqrt(fan_in), 1/sqrt(fan_in));
        a float = weights drawn from ``init_dist`` at that scale, zero biases (the theory's small init).
    init_dist : ``"normal"`` (N(0, init_scale^2)) or ``"uniform"`` (U(0, init_scale): non-negative
        entries, as in the official theory figures, ``figure/theory/stages.py``).
    symmetric : the theory's symmetric two-layer linear model ``f(x) = V^T V x`` (one ``hdim x dim``
        matrix ``V``; needs ``n_layers=2``, no ReLU, no bias).
    """

    n_layers: int = 1
    hdim: int = 64
    relu: bool = False
    bias: bool = False
    init_scale: float | None = None
    init_dist: str = "normal"
    symmetric: bool = False

    def __post_init__(self):
        if int(self.n_layers) != self.n_layers or not 1 <= self.n_layers <= 4:
            raise ValueError(f"n_layers must be 1, 2, 3 or 4, got {self.n_layers}")
        if self.init_dist not in INIT_DISTS:
            raise ValueError(f"unknown init_dist {self.init_dist!r}; valid: {', '.join(INIT_DISTS)}")
        if self.symmetric and (self.n_layers != 2 or self.relu or self.bias):
            raise ValueError("symmetric=True is the model f(x) = V^T V x: it needs n_layers=2, "
                             "relu=False and bias=False")
        if int(self.hdim) != self.hdim or self.hdim < 1:
            raise ValueError(f"hdim must be a positive integer, got {self.hdim}")
        if self.init_scale is not None and not (self.init_scale > 0 and math.isfinite(self.init_scale)):
            raise ValueError(f"init_scale must be None or a positive number, got {self.init_scale}")

    def shapes(self, dim: int) -> list[tuple[int, int]]:
        """``(d_out, d_in)`` of each layer."""
        if self.symmetric:
            return [(self.hdim, dim)]
        dims = [dim] + [self.hdim] * (self.n_layers - 1) + [dim]
        return [(dims[i + 1], dims[i]) for i in range(self.n_layers)]


@dataclass
class Trajectory:
    """What :func:`train_sim` records for ``R`` runs.

    steps : (T,) SGD steps at which the OOD set was evaluated (before the step).
    t : (T,) gradient-flow time ``lr * steps``.
    ood_loss : (R, T) ``1/2 mean ||f(x) - x||^2`` on the OOD samples.
    ood_pred : (R, T, s) the prediction at the OOD centroid ``x_b``, mapped to concept space.
    ood_centroid_loss : (R, T) ``1/2 ||f(x_b) - x_b||^2`` in the full input space: the quantity the
        official loss figure plots (``paint/loss_multi.py``, at epoch checkpoints).
    train_loss : (R, T) the loss of the batch taken at that step (NaN after the last step).
    jac_steps : (Tj,) steps of the Jacobian snapshots; jac : (R, Tj, s, s) ``U df/dx(x_b) U^T``.
    params : final weights (list over layers of ``(R, d_out, d_in)`` numpy arrays) and biases.
    """

    steps: np.ndarray
    t: np.ndarray
    ood_loss: np.ndarray
    ood_pred: np.ndarray
    ood_centroid_loss: np.ndarray
    train_loss: np.ndarray
    jac_steps: np.ndarray
    jac: np.ndarray
    weights: list
    biases: list
    spec: MLPSpec
    lr: float
    seeds: list
    info: dict = field(default_factory=dict)

    @property
    def n_runs(self) -> int:
        return int(self.ood_loss.shape[0])


def init_params(spec: MLPSpec, dim: int, seed: int, dtype=torch.float32):
    """Initial weights and biases of one run, drawn from ``torch.Generator().manual_seed(seed)``.

    Returns ``(weights, biases)``: lists of ``(d_out, d_in)`` and ``(d_out,)`` tensors (biases are
    zero tensors when ``spec.bias`` is false). Introduced in ``01-linear-theory``.
    """
    g = torch.Generator().manual_seed(int(seed))
    Ws, bs = [], []
    for d_out, d_in in spec.shapes(dim):
        if spec.init_scale is None:
            bound = 1.0 / math.sqrt(d_in)
            W = (torch.rand(d_out, d_in, generator=g, dtype=torch.float64) * 2 - 1) * bound
            b = (torch.rand(d_out, generator=g, dtype=torch.float64) * 2 - 1) * bound
        elif spec.init_dist == "uniform":
            W = torch.rand(d_out, d_in, generator=g, dtype=torch.float64) * spec.init_scale
            b = torch.zeros(d_out, dtype=torch.float64)
        else:
            W = torch.randn(d_out, d_in, generator=g, dtype=torch.float64) * spec.init_scale
            b = torch.zeros(d_out, dtype=torch.float64)
        Ws.append(W.to(dtype))
        bs.append((b if spec.bias else torch.zeros(d_out, dtype=torch.float64)).to(dtype))
    return Ws, bs


def mirror_init(weights, biases, U, spec: MLPSpec, concept: int = 1):
    """The same initial weights with the sign of the off-diagonal Jacobian entries of ``concept`` flipped.

    With the reflection ``R = I - 2 u u^T`` along concept direction ``u = U[concept]`` of the input
    space, the symmetric model's ``V`` becomes ``V R`` (so ``W = V^T V`` becomes ``R W R``), and an
    MLP's first layer becomes ``W_1 R`` and its last layer ``R W_L`` (bias ``R b_L``), so its end-to-end
    map ``x -> f(x)`` becomes ``x -> R f(R x)``. In concept coordinates the Jacobian ``J`` becomes
    ``R J R``: ``w_12`` and ``w_21`` change sign and every other entry keeps its value. For bias-free
    linear models the loss depends on the data only through ``E[x x^T]``, which ``R`` leaves
    unchanged, so the mirrored start is exactly as likely as the original and trains by the mirrored
    dynamics: only the sign of ``w_12(0)`` differs. (With biases or ReLU the mirrored run also sees
    the data's mean mirrored; it is then not an exact pair.) Returns new ``(weights, biases)`` lists.
    Introduced in ``02-swing-by`` (the init-sign ablation).
    """
    U = torch.as_tensor(np.asarray(U), dtype=weights[0].dtype)
    if U.ndim != 2 or not 0 <= concept < U.shape[0]:
        raise ValueError(f"U must be (s, dim) and concept in [0, s), got shape {tuple(U.shape)} and {concept}")
    u = U[concept]
    R = torch.eye(U.shape[1], dtype=U.dtype) - 2 * torch.outer(u, u)
    Ws, bs = [w.clone() for w in weights], [b.clone() for b in biases]
    if spec.symmetric:
        Ws[0] = Ws[0] @ R
        return Ws, bs
    Ws[0] = Ws[0] @ R
    Ws[-1] = R @ Ws[-1]
    bs[-1] = R @ bs[-1]
    return Ws, bs


def forward(weights, biases, X, relu: bool, bias: bool, symmetric: bool = False):
    """Batched MLP: ``X`` (R, B, d_in), ``weights[l]`` (R, d_out, d_in), ``biases[l]`` (R, d_out).

    ``symmetric``: ``weights == [V]`` and ``f(x) = V^T V x``."""
    if symmetric:
        return torch.bmm(torch.bmm(X, weights[0].transpose(1, 2)), weights[0])
    h = X
    L = len(weights)
    for l, (W, b) in enumerate(zip(weights, biases)):
        h = torch.bmm(h, W.transpose(1, 2))
        if bias:
            h = h + b[:, None, :]
        if relu and l < L - 1:
            h = torch.relu(h)
    return h


def _jacobian(weights, biases, x_b, Uc, relu, bias, symmetric=False):
    """``U J(x_b) U^T`` for every run: J = W_L D_{L-1} W_{L-1} ... D_1 W_1 (D: ReLU masks)."""
    if symmetric:
        VU = torch.bmm(weights[0], Uc.transpose(1, 2))                          # (R, hdim, s)
        return torch.bmm(VU.transpose(1, 2), VU)
    h = x_b                                          # (R, 1, dim)
    V = Uc.transpose(1, 2)                           # (R, dim, s): J applied to U^T
    for l, (W, b) in enumerate(zip(weights, biases)):
        h = torch.bmm(h, W.transpose(1, 2)) + (b[:, None, :] if bias else 0)
        V = torch.bmm(W, V)
        if relu and l < len(weights) - 1:
            mask = (h > 0).to(V.dtype)               # (R, 1, d_out)
            h = torch.relu(h)
            V = V * mask.transpose(1, 2)
    return torch.bmm(Uc, V)                           # (R, s, s)


class _Symmetric(torch.nn.Module):
    """The reference symmetric model ``f(x) = V^T V x`` as a module (``V = lin.weight``)."""

    def __init__(self, lin):
        super().__init__()
        self.lin = lin

    def forward(self, x):
        return self.lin(x) @ self.lin.weight


def _as_list(data, R):
    if isinstance(data, SIMData):
        return [data] * R
    data = list(data)
    if len(data) != R:
        raise ValueError(f"got {len(data)} data sets for {R} seeds; pass one data set or one per seed")
    shapes = {(d.X.shape, d.X_ood.shape, d.U.shape) for d in data}
    if len(shapes) != 1:
        raise ValueError(f"the data sets of one ensemble must have equal shapes, got {sorted(shapes)}")
    return data


def _batch_orders(N, batch_size, n_epochs, seeds, reshuffle: bool = True):
    """Per run, per epoch, a permutation of the N training rows (the same in both backends).

    ``reshuffle=False``: the rows in their stored order every epoch (the official ``main.py`` shuffles
    the data once when it is made and then walks it in order)."""
    if not reshuffle:
        return torch.arange(N).expand(len(seeds), n_epochs, N)
    orders = []
    for s in seeds:
        g = torch.Generator().manual_seed(10_000 + int(s))
        orders.append(torch.stack([torch.randperm(N, generator=g) for _ in range(n_epochs)]))
    return torch.stack(orders)                        # (R, n_epochs, N)


def train_sim(data: SIMData | Sequence[SIMData], spec: MLPSpec = MLPSpec(), *, seeds=(0,),
              lr: float = 0.003125, batch_size: int = 128, n_epochs: int = 40,
              n_steps: int | None = None, log_every: int = 1, jac_every: int | None = None,
              backend: str = "batched", ood_eval: str = "auto", dtype=torch.float32,
              reshuffle: bool = True, inits=None, show_progress: bool = True) -> Trajectory:
    """Train ``len(seeds)`` runs of ``spec`` on ``data`` with SGD; log the OOD set before steps.

    Parameters
    ----------
    data : one :class:`SIMData` shared by all runs, or one per run (equal shapes; e.g. a sweep
        over a concept's variance).
    seeds : one per run; the seed sets the run's initial weights and its batch order.
    lr : SGD step on ``L = 1/2 E||f(x) - x||^2`` (official lr 0.1 with ``F.mse_loss`` in 64-d = 0.003125).
    n_epochs : passes over the training set (paper: 40); ``n_steps`` stops earlier when given.
    log_every : evaluate the OOD set every this many steps (1 = before every step, as the paper).
    jac_every : Jacobian snapshot period in steps (default: ``log_every * 10``).
    backend : ``"batched"`` (stacked weights, bmm; the fast path) or ``"loop"`` (one
        ``nn.Sequential`` + ``optim.SGD`` after another; the reference).
    ood_eval : how the batched path computes the OOD loss. ``"samples"``: a forward pass over the
        OOD set. ``"moments"`` (linear models only): exactly the same mean, from the OOD set's first
        and second moments and the end-to-end map ``x -> W_eff x + b_eff``:
        ``1/2 mean ||x G + b||^2 = 1/2 ||L [G; b]||_F^2`` with ``G = W_eff^T - I`` and
        ``L^T L = mean [x, 1]^T [x, 1]`` (rank-revealing: ``L`` has one row per non-null direction),
        costing ``rank * dim^2`` per run instead of ``n_ood * dim^2``. ``"auto"``: moments when the
        model is linear. The loop backend always uses samples.
    reshuffle : a new batch order every epoch (default) or, ``False``, the stored order of the rows
        every epoch, as the official loop does.
    inits : optional initial ``(weights, biases)`` per run (as :func:`init_params` returns them, e.g.
        from :func:`mirror_init`); default: :func:`init_params` of each seed.

    Introduced in ``09-sim-dynamics/01-linear-theory``.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if ood_eval not in OOD_EVALS:
        raise ValueError(f"unknown ood_eval {ood_eval!r}; valid: {', '.join(OOD_EVALS)}")
    if ood_eval == "moments" and spec.relu:
        raise ValueError("ood_eval='moments' is exact only for linear models; use 'samples' with relu=True")
    use_moments = ood_eval == "moments" or (ood_eval == "auto" and not spec.relu)
    seeds = [int(s) for s in np.atleast_1d(seeds)]
    if not seeds:
        raise ValueError("seeds must name at least one run")
    for name, v in (("batch_size", batch_size), ("n_epochs", n_epochs), ("log_every", log_every)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v}")
    if not (lr > 0 and math.isfinite(lr)):
        raise ValueError(f"lr must be a positive number, got {lr}")
    R = len(seeds)
    dsets = _as_list(data, R)
    d0 = dsets[0]
    N, dim = d0.X.shape
    per_epoch = math.ceil(N / batch_size)
    total = n_epochs * per_epoch if n_steps is None else int(n_steps)
    if n_steps is not None and not 1 <= total <= n_epochs * per_epoch:
        raise ValueError(f"n_steps must be in [1, n_epochs * ceil(N / batch_size)] = "
                         f"[1, {n_epochs * per_epoch}], got {n_steps}")
    jac_every = int(jac_every or log_every * 10)

    shared = all(d is d0 for d in dsets)        # one data set for every run: no copies

    def stacked(get):
        if shared:
            return torch.as_tensor(get(d0), dtype=dtype)[None].expand(R, *get(d0).shape)
        return torch.as_tensor(np.stack([get(d) for d in dsets]), dtype=dtype)

    X = stacked(lambda d: d.X)                                                 # (R, N, dim)
    Xo = stacked(lambda d: d.X_ood)                                            # (R, n_ood, dim)
    xb = stacked(lambda d: d.x_b)[:, None, :]
    Uc = stacked(lambda d: d.U)                                                # (R, s, dim)
    orders = _batch_orders(N, batch_size, math.ceil(total / per_epoch), seeds, reshuffle)
    if inits is None:
        inits = [init_params(spec, dim, s, dtype) for s in seeds]
    else:
        inits = list(inits)
        want = [tuple(sh) for sh in spec.shapes(dim)]
        if len(inits) != R or any([tuple(w.shape) for w in ws] != want for ws, _ in inits):
            raise ValueError(f"inits must hold one (weights, biases) per seed ({R}) with weight shapes {want}")
        inits = [([w.to(dtype) for w in ws], [b.to(dtype) for b in bs]) for ws, bs in inits]

    log_steps = np.arange(0, total + 1, log_every)
    jac_steps = np.arange(0, total + 1, jac_every)
    T, Tj, s = len(log_steps), len(jac_steps), d0.s
    ood_loss = torch.full((R, T), float("nan"), dtype=torch.float64)
    ood_pred = torch.full((R, T, s), float("nan"), dtype=torch.float64)
    ood_cl = torch.full((R, T), float("nan"), dtype=torch.float64)
    train_loss = torch.full((R, T), float("nan"), dtype=torch.float64)
    jac = torch.full((R, Tj, s, s), float("nan"), dtype=torch.float64)

    def batch_rows(step):
        e, k = divmod(step, per_epoch)
        return orders[:, e, k * batch_size:(k + 1) * batch_size]              # (R, B)

    if use_moments:
        # E over the OOD set of 1/2 ||[x, 1] [G; b]||^2 = 1/2 ||L [G; b]||_F^2 with L^T L = E[[x,1]^T [x,1]]:
        # a sum of squares (never negative, no cancellation); L keeps the non-null eigen-directions.
        srcs = [d0] if shared else dsets
        Ls = []
        for d in srcs:
            Xa = np.hstack([d.X_ood, np.ones((len(d.X_ood), 1))])
            lam, Q = np.linalg.eigh(Xa.T @ Xa / len(Xa))
            keep = lam > 1e-12 * lam.max()
            Ls.append(np.sqrt(lam[keep])[:, None] * Q[:, keep].T)
        r_max = max(L.shape[0] for L in Ls)
        Ls = [np.vstack([L, np.zeros((r_max - L.shape[0], dim + 1))]) for L in Ls]
        L_ood = torch.as_tensor(np.stack(Ls), dtype=dtype).expand(R, r_max, dim + 1)
        eye = torch.eye(dim, dtype=dtype).expand(R, dim, dim)
        zero = torch.zeros(R, 1, dim, dtype=dtype)

    def ood_loss_now(Ws, bs):
        if not use_moments:
            out = forward(Ws, bs, Xo, spec.relu, spec.bias, spec.symmetric)
            return 0.5 * ((out - Xo) ** 2).sum(-1).mean(-1)
        b = forward(Ws, bs, zero, False, spec.bias, spec.symmetric) if spec.bias else zero   # b_eff
        G = forward(Ws, bs, eye, False, spec.bias, spec.symmetric) - b - eye               # W_eff^T - I
        LG = torch.bmm(L_ood, torch.cat([G, b], 1))                                        # (R, r, dim)
        return 0.5 * (LG * LG).sum((1, 2))

    if backend == "batched":
        n_mats = len(inits[0][0])
        Ws = [torch.stack([w[l] for w, _ in inits]).requires_grad_(True) for l in range(n_mats)]
        bs = [torch.stack([b[l] for _, b in inits]).requires_grad_(spec.bias) for l in range(n_mats)]
        params = Ws + (bs if spec.bias else [])
        ridx = torch.arange(R)[:, None]
        bar = progress(total=total, desc=f"SGD, {R} runs batched") if show_progress else None
        for step in range(total + 1):
            if step % log_every == 0 or step % jac_every == 0:
                with torch.no_grad():
                    if step % log_every == 0:
                        i = step // log_every
                        ood_loss[:, i] = ood_loss_now(Ws, bs).double()
                        pb = forward(Ws, bs, xb, spec.relu, spec.bias, spec.symmetric)[:, 0, :]
                        ood_pred[:, i] = torch.bmm(pb[:, None, :], Uc.transpose(1, 2))[:, 0, :].double()
                        ood_cl[:, i] = 0.5 * ((pb - xb[:, 0, :]) ** 2).sum(-1).double()
                    if step % jac_every == 0:
                        jac[:, step // jac_every] = _jacobian(Ws, bs, xb, Uc, spec.relu, spec.bias, spec.symmetric).double()
            if step == total:
                break
            xbatch = X[ridx, batch_rows(step)]                                 # (R, B, dim)
            out = forward(Ws, bs, xbatch, spec.relu, spec.bias, spec.symmetric)
            per_run = 0.5 * ((out - xbatch) ** 2).sum(-1).mean(-1)             # L of each run
            for p in params:
                p.grad = None
            per_run.sum().backward()                                           # runs are independent
            with torch.no_grad():
                for p in params:
                    p -= lr * p.grad
            if step % log_every == 0:
                train_loss[:, step // log_every] = per_run.detach().double()
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        weights = [w.detach().numpy().copy() for w in Ws]
        biases = [b.detach().numpy().copy() for b in bs]
    else:
        n_mats = len(inits[0][0])
        weights = [[] for _ in range(n_mats)]
        biases = [[] for _ in range(n_mats)]
        bar = progress(total=total * R, desc=f"SGD, {R} runs in a loop") if show_progress else None
        for r, (W0, b0) in enumerate(inits):
            layers = []
            for l, (d_out, d_in) in enumerate(spec.shapes(dim)):
                lin = torch.nn.Linear(d_in, d_out, bias=spec.bias, dtype=dtype)
                with torch.no_grad():
                    lin.weight.copy_(W0[l])
                    if spec.bias:
                        lin.bias.copy_(b0[l])
                layers.append(lin)
                if spec.relu and l < spec.n_layers - 1:
                    layers.append(torch.nn.ReLU())
            model = _Symmetric(layers[0]) if spec.symmetric else torch.nn.Sequential(*layers)
            opt = torch.optim.SGD(model.parameters(), lr=lr)
            lins = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
            zeros = [torch.zeros(m.out_features, dtype=dtype) for m in lins]
            for step in range(total + 1):
                with torch.no_grad():
                    if step % log_every == 0:
                        i = step // log_every
                        out = model(Xo[r])
                        ood_loss[r, i] = 0.5 * ((out - Xo[r]) ** 2).sum(-1).mean()
                        ood_pred[r, i] = (model(xb[r]) @ Uc[r].T)[0].double()
                        ood_cl[r, i] = 0.5 * ((model(xb[r]) - xb[r]) ** 2).sum().double()
                    if step % jac_every == 0:
                        Wl = [m.weight[None] for m in lins]
                        bl = [m.bias[None] if spec.bias else z[None] for m, z in zip(lins, zeros)]
                        jac[r, step // jac_every] = _jacobian(Wl, bl, xb[r:r + 1], Uc[r:r + 1],
                                                              spec.relu, spec.bias, spec.symmetric)[0].double()
                if step == total:
                    break
                xbatch = X[r, batch_rows(step)[r]]
                loss = 0.5 * ((model(xbatch) - xbatch) ** 2).sum(-1).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                if step % log_every == 0:
                    train_loss[r, step // log_every] = loss.item()
                if bar is not None:
                    bar.update(1)
            for l, m in enumerate(lins):
                weights[l].append(m.weight.detach().numpy().copy())
                biases[l].append(m.bias.detach().numpy().copy() if spec.bias else zeros[l].numpy())
        if bar is not None:
            bar.close()
        weights = [np.stack(w) for w in weights]
        biases = [np.stack(b) for b in biases]

    return Trajectory(steps=log_steps, t=lr * log_steps, ood_loss=ood_loss.numpy(),
                      ood_pred=ood_pred.numpy(), ood_centroid_loss=ood_cl.numpy(), train_loss=train_loss.numpy(),
                      jac_steps=jac_steps, jac=jac.numpy(), weights=weights, biases=biases,
                      spec=spec, lr=lr, seeds=seeds,
                      info={"backend": backend, "batch_size": batch_size, "n_steps": total,
                            "N": N, "dim": dim, "s": s, "reshuffle": reshuffle,
                            "ood_eval": "moments" if use_moments and backend == "batched" else "samples"})
