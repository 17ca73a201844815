"""The Fig. 3 testbed: a small MLP on sklearn's digits, SGD with a fixed batch order, and exact
trajectory-specific leave-one-out (TSLOO) by retraining.

TSLOO (Def. 1, Hara et al.'s SGD-influence): remove ``z*`` from the batches of chosen steps only,
rerun the same trajectory (same initialisation, same batch order, same step sizes; the removed
point's term is dropped from the summed update), and report ``loss(theta'_T, z_val) -
loss(theta_T, z_val)``. The retraining is exact: many leave-one-out runs go in parallel as one
batched network (one set of weights per removed point), in float64.

Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..progress import progress
from .recorder import GradRecorder

__all__ = ["load_digits_split", "load_mnist_idx", "MLP", "Schedule", "make_schedule", "train_mlp", "tsloo_exact",
           "per_sample_grads", "hessian", "gauss_newton_hessian", "REMOVALS", "HESSIAN_METHODS"]

REMOVALS = ("last", "all")


def load_digits_split(n_train: int, n_test: int, seed: int = 0, dtype=torch.float64):
    """sklearn's bundled 8x8 digits (1,797 images), pixels scaled to [0, 1], split at random.

    Returns ``X_train, y_train, X_test, y_test`` as tensors.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    from sklearn.datasets import load_digits

    d = load_digits()
    n = len(d.target)
    if n_train < 1 or n_test < 1 or n_train + n_test > n:
        raise ValueError(f"need 1 <= n_train, n_test and n_train + n_test <= {n} (digits has {n} "
                         f"images); got n_train={n_train}, n_test={n_test}")
    perm = np.random.default_rng(seed).permutation(n)
    X = torch.tensor(d.data / 16.0, dtype=dtype)
    y = torch.tensor(d.target, dtype=torch.long)
    tr, te = perm[:n_train], perm[n_train:n_train + n_test]
    return X[tr], y[tr], X[te], y[te]


class MLP(nn.Module):
    """``Linear(d_in, hidden) -> ReLU -> Linear(hidden, n_classes)``.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """

    def __init__(self, d_in: int = 64, hidden: int = 16, n_classes: int = 10, seed: int = 0,
                 dtype=torch.float64) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.fc1 = nn.Linear(d_in, hidden, dtype=dtype)
        self.fc2 = nn.Linear(hidden, n_classes, dtype=dtype)
        with torch.no_grad():
            for lin in (self.fc1, self.fc2):
                bound = 1.0 / np.sqrt(lin.in_features)
                lin.weight.copy_((torch.rand(lin.weight.shape, generator=gen, dtype=dtype) * 2 - 1) * bound)
                lin.bias.copy_((torch.rand(lin.bias.shape, generator=gen, dtype=dtype) * 2 - 1) * bound)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@dataclass(frozen=True)
class Schedule:
    """A fixed batch order: ``batches[t]`` holds step ``t``'s indices, ``epochs[t]`` its epoch."""

    batches: tuple
    epochs: tuple
    n_train: int

    def __len__(self) -> int:
        return len(self.batches)


def make_schedule(n_train: int, batch_size: int, n_epochs: int, seed: int = 0) -> Schedule:
    """Shuffle each epoch with a fixed seed and cut it into batches (the last may be smaller).

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    if batch_size < 1 or n_epochs < 1 or n_train < 1:
        raise ValueError(f"n_train, batch_size and n_epochs must be positive; got {n_train}, "
                         f"{batch_size}, {n_epochs}")
    rng = np.random.default_rng(seed)
    batches, epochs = [], []
    for e in range(n_epochs):
        perm = rng.permutation(n_train)
        for s in range(0, n_train, batch_size):
            batches.append(torch.tensor(perm[s:s + batch_size], dtype=torch.long))
            epochs.append(e)
    return Schedule(tuple(batches), tuple(epochs), n_train)


def train_mlp(model: MLP, X, y, schedule: Schedule, lr: float, *, recorder: GradRecorder | None = None,
              X_test=None, y_test=None) -> dict:
    """Plain SGD on the mean cross-entropy of each batch, in the schedule's order.

    With a ``recorder``, each step runs inside ``recorder.step``. With test data, the per-sample
    gradients of the test points before every step are returned too (for TracIn), as
    ``hist["test_grads"][t]`` (``(m, p)``, computed by ``recorder.probe``).

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr}")
    hist = {"loss": [], "test_grads": []}
    for t, idx in enumerate(schedule.batches):
        if recorder is not None and X_test is not None:
            with recorder.probe() as pr:
                model.zero_grad()
                F.cross_entropy(model(X_test), y_test).backward()
            hist["test_grads"].append(pr.grads)
        model.zero_grad()
        if recorder is not None:
            with recorder.step(idx, lr=lr, epoch=schedule.epochs[t]):
                loss = F.cross_entropy(model(X[idx]), y[idx])
                loss.backward()
        else:
            loss = F.cross_entropy(model(X[idx]), y[idx])
            loss.backward()
        with torch.no_grad():
            for prm in model.parameters():
                prm -= lr * prm.grad
        hist["loss"].append(float(loss.detach()))
    return hist


def _flat(model: MLP) -> list[torch.Tensor]:
    return [model.fc1.weight.detach(), model.fc1.bias.detach(), model.fc2.weight.detach(),
            model.fc2.bias.detach()]


def tsloo_exact(model0: MLP, X, y, schedule: Schedule, lr: float, points, X_test, y_test, *,
                removal: str = "last", chunk: int = 128, show_progress: bool = True) -> torch.Tensor:
    """Exact TSLOO by retraining: ``loss(theta'_T, z_test) - loss(theta_T, z_test)``.

    Parameters
    ----------
    model0
        The initial network (not modified).
    points
        Training indices to leave out, one retraining each.
    removal
        ``"last"``: drop the point from its step in the last epoch only; ``"all"``: from every
        step that uses it.

    Returns
    -------
    torch.Tensor
        ``(len(points), n_test)`` loss differences (float64).

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    if removal not in REMOVALS:
        raise ValueError(f"unknown removal {removal!r}; valid: {', '.join(REMOVALS)}")
    points = torch.as_tensor(points, dtype=torch.long).reshape(-1)
    if len(points) and (points.min() < 0 or points.max() >= schedule.n_train):
        raise ValueError(f"points must be training indices in 0..{schedule.n_train - 1}")
    last = max(schedule.epochs)
    W1, b1, W2, b2 = (p.clone() for p in _flat(model0))
    out = []
    chunks = [points[i:i + chunk] for i in range(0, len(points), chunk)]
    for pts in progress(chunks, desc=f"exact TSLOO ({removal})"):
        R = len(pts) + 1                                   # row 0: the unperturbed run
        P = [p.unsqueeze(0).repeat(R, *[1] * p.dim()).requires_grad_(True) for p in (W1, b1, W2, b2)]
        drop = torch.cat([torch.tensor([-1]), pts])
        for t, idx in enumerate(schedule.batches):
            xb, yb = X[idx], y[idx]
            w = torch.ones(R, len(idx), dtype=X.dtype)
            if removal == "all" or schedule.epochs[t] == last:
                w = w * (idx[None, :] != drop[:, None])
            h = torch.relu(torch.einsum("bi,rhi->rbh", xb, P[0]) + P[1][:, None])
            logits = torch.einsum("rbh,roh->rbo", h, P[2]) + P[3][:, None]
            ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.repeat(R),
                                 reduction="none").reshape(R, -1)
            # the summed update with eta = lr / B: a removed point's term is dropped, not re-averaged
            loss = (w * ce).sum() / len(idx)
            grads = torch.autograd.grad(loss, P)
            with torch.no_grad():
                for p, g in zip(P, grads):
                    p -= lr * g
        with torch.no_grad():
            h = torch.relu(torch.einsum("bi,rhi->rbh", X_test, P[0]) + P[1][:, None])
            logits = torch.einsum("rbh,roh->rbo", h, P[2]) + P[3][:, None]
            ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y_test.repeat(R),
                                 reduction="none").reshape(R, -1)
        out.append(ce[1:] - ce[:1])
    return torch.cat(out) if out else torch.zeros(0, len(y_test), dtype=X.dtype)


def per_sample_grads(model: MLP, X, y) -> torch.Tensor:
    """``(n, p)`` exact per-sample gradients of the cross-entropy, in the recorder's layout
    (per layer: the ``[W | b]`` matrix flattened row by row), by ``torch.func``.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    from torch.func import functional_call, grad, vmap

    params = {k: v.detach() for k, v in model.named_parameters()}

    def f(prm, x, t):
        return F.cross_entropy(functional_call(model, prm, (x[None],)), t[None])

    g = vmap(grad(f), in_dims=(None, 0, 0))(params, X, y)
    parts = []
    for lin in ("fc1", "fc2"):
        W, b = g[f"{lin}.weight"], g[f"{lin}.bias"]
        parts.append(torch.cat([W, b[..., None]], dim=2).reshape(len(X), -1))
    return torch.cat(parts, dim=1)


def _theta_logits(model: MLP):
    """``theta`` (flat, in :func:`per_sample_grads`'s layout) and ``logits(theta, X)``."""
    h1, d = model.fc1.out_features, model.fc1.in_features
    c = model.fc2.out_features
    n1 = h1 * (d + 1)

    def logits(theta, X):
        A = theta[:n1].reshape(h1, d + 1)
        B = theta[n1:].reshape(c, h1 + 1)
        hid = torch.relu(X @ A[:, :d].T + A[:, d])
        return hid @ B[:, :h1].T + B[:, h1]

    theta = torch.cat([torch.cat([model.fc1.weight, model.fc1.bias[:, None]], 1).reshape(-1),
                       torch.cat([model.fc2.weight, model.fc2.bias[:, None]], 1).reshape(-1)]).detach()
    return theta, logits


HESSIAN_METHODS = ("closed", "autograd")


def _relu_cross_term(model: MLP, X, y) -> torch.Tensor:
    """The part of the exact Hessian that the Gauss-Newton Hessian leaves out, in closed form.

    For ``logits = B [relu(A x~), 1]`` the second derivatives of a logit vanish within ``A`` (ReLU
    is piecewise linear) and within ``B`` (linear); only ``d^2 z_c / dB[c,h] dA[h,k] =
    1[A_h . x~ > 0] x~_k`` remains. Weighted by the residuals ``r = softmax - onehot`` and summed
    over the data it is ``K[c,h,k] = sum_i r_ic m_ih x~_ik``, placed in the (B, A) blocks.
    """
    theta, logits = _theta_logits(model)
    h1, d = model.fc1.out_features, model.fc1.in_features
    c = model.fc2.out_features
    n1 = h1 * (d + 1)
    with torch.no_grad():
        xt = torch.cat([X, X.new_ones(len(X), 1)], 1)                     # x~ = [x, 1]
        mask = (xt @ torch.cat([model.fc1.weight, model.fc1.bias[:, None]], 1).T > 0).to(X.dtype)
        r = torch.softmax(logits(theta, X), -1)
        r[torch.arange(len(y)), y] -= 1.0
        K = torch.einsum("ic,ih,ik->chk", r, mask, xt)                     # (C, H, d+1)
        out = torch.zeros(theta.numel(), theta.numel(), dtype=theta.dtype)
        rows = n1 + torch.arange(c)[:, None] * (h1 + 1) + torch.arange(h1)[None, :]   # B[c, h]
        for cc in range(c):
            for hh in range(h1):
                out[rows[cc, hh], hh * (d + 1):(hh + 1) * (d + 1)] = K[cc, hh]
    return out + out.T


def hessian(model: MLP, X, y, method: str = "closed", *,
            gauss_newton: torch.Tensor | None = None) -> torch.Tensor:
    """The exact ``p x p`` Hessian of the *summed* training cross-entropy at the current weights,
    in :func:`per_sample_grads`'s layout (for the influence-function baseline). Indefinite away
    from a minimum.

    ``method="closed"`` (default): the Gauss-Newton Hessian plus the ReLU network's cross term
    between the two layers, in closed form (a few times faster); ``"autograd"``: the reference,
    ``torch.func.hessian`` of the loss. Both agree to rounding (tested). ``gauss_newton``: the
    :func:`gauss_newton_hessian` of the same model and data, when already computed (closed form).

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    if method not in HESSIAN_METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(HESSIAN_METHODS)}")
    if method == "closed":
        GN = gauss_newton_hessian(model, X, y) if gauss_newton is None else gauss_newton
        return GN + _relu_cross_term(model, X, y)
    from torch.func import hessian as fhess

    theta, logits = _theta_logits(model)
    return fhess(lambda th: F.cross_entropy(logits(th, X), y, reduction="sum"))(theta)


def gauss_newton_hessian(model: MLP, X, y, chunk: int = 256) -> torch.Tensor:
    """The Gauss-Newton Hessian of the summed cross-entropy, ``sum_i J_i^T (diag(p_i) - p_i p_i^T) J_i``
    (``J_i``: Jacobian of the logits in the parameters, ``p_i``: softmax), in
    :func:`per_sample_grads`'s layout. PSD: the curvature of a linearised network, the usual
    choice for influence functions of networks (chapter 02's PSD IF baseline). Unlike the paper's
    Theorem 2, which uses the empirical-Fisher form ``sum_z g g^T``, it does not depend on the labels.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    from torch.func import jacrev

    theta, logits = _theta_logits(model)
    p = theta.numel()
    out = torch.zeros(p, p, dtype=theta.dtype)
    for s in range(0, len(X), chunk):
        Xc = X[s:s + chunk]
        J = jacrev(logits)(theta, Xc)                                  # (n, C, p)
        with torch.no_grad():
            pr = torch.softmax(logits(theta, Xc), dim=-1)              # (n, C)
            SJ = pr[:, :, None] * (J - torch.einsum("nc,ncp->np", pr, J)[:, None, :])
            out += J.reshape(-1, p).T @ SJ.reshape(-1, p)
    return (out + out.T) / 2


def load_mnist_idx(images_path, labels_path, dtype=torch.float64):
    """The paper's data for users who have it: MNIST in its IDX files (``train-images-idx3-ubyte``
    and ``train-labels-idx1-ubyte``, optionally gzipped). Returns ``X`` (``(n, 784)``, scaled to
    [0, 1]) and ``y``; pass them to :func:`train_mlp` instead of :func:`load_digits_split`'s.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb`` (not run there:
    nothing is downloaded).
    """
    import gzip
    from pathlib import Path

    def read(path, magic):
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file; MNIST's IDX files are expected "
                                    "(e.g. train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz])")
        raw = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
        got = int.from_bytes(raw[:4], "big")
        if got != magic:
            raise ValueError(f"{path}: IDX magic number {got:#010x}, expected {magic:#010x}")
        ndim = magic & 0xFF
        dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
        arr = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
        if arr.size != int(np.prod(dims)):
            raise ValueError(f"{path}: header says {dims} but the file holds {arr.size} values")
        return arr.reshape(dims)

    X = read(images_path, 0x00000803)
    y = read(labels_path, 0x00000801)
    if len(X) != len(y):
        raise ValueError(f"{len(X)} images but {len(y)} labels")
    return (torch.tensor(X.reshape(len(X), -1) / 255.0, dtype=dtype),
            torch.tensor(y.astype(np.int64)))
