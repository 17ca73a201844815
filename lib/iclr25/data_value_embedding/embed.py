"""Data value embeddings by the backward recursion (Theorem 2, Algorithm 1) and influence.

Notation (paper, Sec. 4): SGD ``theta_{t+1} = theta_t - eta_t sum_{z in B_t} g_t(z)``. The data
value embedding of ``z*`` used at step ``t_s`` is (Eq. 2)

    DVEmb^{(t_s)}(z*) = eta_{t_s} [prod_{k > t_s} (I - eta_k H_k)] g_{t_s}(z*),

and with the Gauss-Newton Hessian ``H_k = sum_{z in B_k} g_k(z) g_k(z)^T`` it obeys the
recursion (Theorem 2)

    E_t(z) = eta_t g_t(z) - eta_t M_{>t} g_t(z),    M_{>t} = sum_{s > t} sum_{z in B_s} E_s(z) g_s(z)^T.

Two paths compute it (``method=``):

``"reference"``
    Algorithm 1 literally: one step at a time from the last, updating the ``p x p`` matrix ``M``.
``"blocked"``
    The steps are grouped into blocks of about ``block_rows`` samples. Inside a block the
    recursion is a unit lower-triangular linear system in the block's rows,
    ``(I + D (R o mask)) E = D (G - G M^T)`` with ``R = G G^T`` the block's Gram matrix, ``D`` the
    step sizes and ``mask`` "row j's step is later than row i's" -- solved by one triangular solve;
    ``M`` is updated once per block with one large product. When the whole trajectory has fewer
    samples than half the gradient's coordinates, a single block needs no ``p x p`` matrix at all.
``"auto"`` (default)
    ``"blocked"`` for ``p >= 512``, where its large products pay off (measured in
    ``benchmarks/bench_data_value_embedding.py``), else ``"reference"``.

Introduced in ``notebooks/02-data-value-embedding/02-recursion-and-cost.ipynb``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .recorder import Records

__all__ = ["DVEmb", "compute_dvemb", "influence", "influence_checkpointing",
           "explicit_product_dvemb", "METHODS"]

METHODS = ("auto", "blocked", "reference")


@dataclass
class DVEmb:
    """Data value embeddings of every (step, sample) pair of a recorded trajectory.

    Attributes
    ----------
    rows
        ``(N, p)``: the embedding ``E_t(z)`` of each recorded (step, sample), in record order.
    row_step, row_index, row_epoch
        ``(N,)``: the step, training index and epoch of each row.
    n_train
        Number of training points (one more than the largest index).

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """

    rows: torch.Tensor
    row_step: torch.Tensor
    row_index: torch.Tensor
    row_epoch: torch.Tensor
    n_train: int

    @property
    def epochs(self) -> list[int]:
        return sorted(set(self.row_epoch.tolist()))

    def by_epoch(self, epoch: int) -> torch.Tensor:
        """``(n_train, p)``: each point's embedding for its uses in ``epoch`` (TSLOO of that epoch)."""
        if epoch not in self.epochs:
            raise ValueError(f"no steps of epoch {epoch}; recorded epochs: {self.epochs}")
        sel = self.row_epoch == epoch
        out = self.rows.new_zeros(self.n_train, self.rows.shape[1])
        return out.index_add_(0, self.row_index[sel], self.rows[sel])

    @property
    def total(self) -> torch.Tensor:
        """``(n_train, p)``: embeddings summed over every use (removal from all epochs)."""
        out = self.rows.new_zeros(self.n_train, self.rows.shape[1])
        return out.index_add_(0, self.row_index, self.rows)


def _check(records: Records) -> None:
    if not isinstance(records, Records):
        raise TypeError(f"expected Records (GradRecorder.records), got {type(records).__name__}")
    if records.n_steps == 0:
        raise ValueError("no steps recorded: run training steps inside GradRecorder.step first")


def _reference(grads, etas, M=None):
    """Algorithm 1: E_t = eta_t (g - M g); M <- M + sum_z E_t(z) g_t(z)^T, from the last step."""
    p = grads[0].shape[1]
    M = torch.zeros(p, p, dtype=grads[0].dtype, device=grads[0].device) if M is None else M
    out = [None] * len(grads)
    for t in range(len(grads) - 1, -1, -1):
        g, eta = grads[t], etas[t]
        E = torch.addmm(g, g, M.T, alpha=-1.0).mul_(eta)  # E_t = eta_t (g - M g), Theorem 2 (rows)
        M.addmm_(E.T, g)                                  # M <- M + sum_z E_t(z) g_t(z)^T
        if not torch.isfinite(E).all():
            raise FloatingPointError(f"non-finite embedding at step {t}: the learning rate may be "
                                     "too large for the recursion")
        out[t] = E
    return out


def _blocked(grads, etas, block_rows: int):
    p = grads[0].shape[1]
    T = len(grads)
    out = [None] * T
    M = None
    end = T
    while end > 0:
        start, rows = end, 0
        while start > 0 and (rows == 0 or rows + grads[start - 1].shape[0] <= block_rows):
            start -= 1
            rows += grads[start].shape[0]
        steps = list(range(end - 1, start - 1, -1))                     # latest step first
        G = torch.cat([grads[t] for t in steps])
        sizes = [grads[t].shape[0] for t in steps]
        sizes_t = torch.tensor(sizes, device=G.device)
        step_of_row = torch.repeat_interleave(torch.tensor(steps, device=G.device), sizes_t)
        eta = torch.repeat_interleave(
            torch.tensor([etas[t] for t in steps], dtype=G.dtype, device=G.device), sizes_t)
        X = G if M is None else G - G @ M.T                              # g - M_{after block} g
        later = step_of_row[None, :] > step_of_row[:, None]             # row j used after row i
        L = (G @ G.T) * later * eta[:, None]                            # strictly lower-triangular
        E = torch.linalg.solve_triangular(L, eta[:, None] * X, upper=False, unitriangular=True)
        if not torch.isfinite(E).all():
            raise FloatingPointError(f"non-finite embedding in steps {start}..{end - 1}: the "
                                     "learning rate may be too large for the recursion")
        pos = 0
        for t, n in zip(steps, sizes):
            out[t] = E[pos:pos + n]
            pos += n
        if start > 0:                                                   # M += sum E g^T
            M = E.T @ G if M is None else M.addmm_(E.T, G)
        end = start
    return out


def compute_dvemb(records: Records, *, method: str = "auto", per_layer: bool = False,
                  block_rows: int | None = None, until: int | None = None) -> DVEmb:
    """Data value embeddings of a recorded SGD trajectory (paper: Theorem 2, Algorithm 1).

    Parameters
    ----------
    records
        :attr:`GradRecorder.records` (or a :class:`Records` filled by hand).
    method
        ``"auto"`` (default), ``"blocked"`` (fast for large ``p``) or ``"reference"`` (Algorithm 1
        step by step); they agree to rounding.
    per_layer
        Treat layers as independent (a block-diagonal ``M``, one recursion per layer; the paper's
        cheaper variant). Needs ``records.layer_slices``.
    block_rows
        Rows per block of the blocked path (default: one block when the trajectory has at most
        ``p / 2`` samples, else ``max(p // 4, batch)``).
    until
        Influence checkpointing: embeddings for the model at checkpoint ``until`` (the first
        ``until`` steps only).

    Returns
    -------
    DVEmb
        ``influence(emb.total, test_grads)`` approximates the change of the test loss when each
        point is left out of all its steps; ``emb.by_epoch(e)`` when left out of epoch ``e`` only.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    _check(records)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    if until is not None:
        records = records.truncate(int(until))
    if per_layer:
        if not records.layer_slices:
            raise ValueError("per_layer=True needs records.layer_slices (recorded by GradRecorder)")
        parts = [compute_dvemb(records.columns(sl), method=method, block_rows=block_rows).rows
                 for sl in records.layer_slices.values()]
        rows = torch.cat(parts, dim=1)
    else:
        grads, etas = records.grads, records.lrs
        if method == "auto":
            method = "blocked" if records.dim >= 512 else "reference"
        if method == "reference":
            E = _reference(grads, etas)
        else:
            p, N = grads[0].shape[1], records.n_rows
            if block_rows is None:
                block_rows = N if 2 * N <= p else max(p // 4, max(g.shape[0] for g in grads))
            if block_rows < 1:
                raise ValueError(f"block_rows must be positive, got {block_rows}")
            E = _blocked(grads, etas, int(block_rows))
        rows = torch.cat(E)
    dev = rows.device
    sizes = torch.tensor([g.shape[0] for g in records.grads], device=dev)
    row_step = torch.repeat_interleave(torch.arange(records.n_steps, device=dev), sizes)
    row_epoch = torch.repeat_interleave(torch.tensor(records.epochs, device=dev), sizes)
    return DVEmb(rows=rows, row_step=row_step, row_index=torch.cat(records.indices).to(dev),
                 row_epoch=row_epoch, n_train=records.n_train)


def influence(emb, test_grads: torch.Tensor) -> torch.Tensor:
    """Influence scores ``emb @ test_grads^T``: the first-order TSLOO estimate (Eq. 1).

    ``emb`` is an ``(n, p)`` tensor (e.g. ``DVEmb.total``) or a :class:`DVEmb` (its total);
    ``test_grads`` is ``(p,)`` or ``(m, p)`` gradients of the test loss at the final model.
    Returns ``(n,)`` or ``(n, m)``; positive means the test loss rises when the point is removed.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    E = emb.total if isinstance(emb, DVEmb) else torch.as_tensor(emb)
    g = torch.as_tensor(test_grads).to(E.dtype)
    if E.dim() != 2:
        raise ValueError(f"embeddings must be (n_train, p), got shape {tuple(E.shape)}")
    if g.shape[-1] != E.shape[1] or g.dim() not in (1, 2):
        raise ValueError(f"test_grads must be (p,) or (m, p) with p = {E.shape[1]}, "
                         f"got shape {tuple(g.shape)}")
    return E @ g.T


def influence_checkpointing(records: Records, n_checkpoints: int, **kwargs) -> dict[int, DVEmb]:
    """Embeddings for ``n_checkpoints`` evenly spaced checkpoints (paper: influence checkpointing).

    Returns ``{k: DVEmb}`` where ``k`` is the number of steps done at the checkpoint (the last
    is the final model). The paper computes these in parallel; here they run one after another.

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """
    _check(records)
    if not 1 <= int(n_checkpoints) <= records.n_steps:
        raise ValueError(f"n_checkpoints must be in 1..{records.n_steps}, got {n_checkpoints}")
    ks = sorted({round(records.n_steps * (i + 1) / n_checkpoints) for i in range(n_checkpoints)})
    return {k: compute_dvemb(records, until=k, **kwargs) for k in ks}


def explicit_product_dvemb(records: Records) -> torch.Tensor:
    """Brute force: ``eta_t [prod_{k>t} (I - eta_k H_k)] g_t(z)`` with explicit ``p x p`` products.

    ``H_k = sum_{z in B_k} g_k(z) g_k(z)^T`` (the Gauss-Newton Hessian of Theorem 2). Returns the
    ``(N, p)`` rows in record order. Cost ``O(T p^3)``: for checking the recursion on small cases.

    Introduced in ``notebooks/02-data-value-embedding/02-recursion-and-cost.ipynb``.
    """
    _check(records)
    p = records.dim
    P = torch.eye(p, dtype=records.grads[0].dtype, device=records.grads[0].device)  # prod_{k>t}, latest left
    out = [None] * records.n_steps
    for t in range(records.n_steps - 1, -1, -1):
        g, eta = records.grads[t], records.lrs[t]
        out[t] = eta * g @ P.T
        P = P @ (torch.eye(p, dtype=g.dtype, device=g.device) - eta * g.T @ g)
    return torch.cat(out)
