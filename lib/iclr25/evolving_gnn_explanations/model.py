"""A bias-free GCN with explicit per-layer edge weights, and its training loop.

As in the official code, the GCN is run on a *given* weighted propagation matrix per layer
(``GCNConv(normalize=False, add_self_loops=False, bias=False)``), so that each layer can see a
different graph: ``H^(1) = A^0 X W_0``, ``Z^(l) = ReLU(H^(l))``, ``H^(l+1) = A^l Z^(l) W_l``,
``Y = H^(L)``. Heads: node (``Y[k]``), graph (mean of ``Y`` over nodes) and link (a linear map of
``[Y_u, Y_v]``). Introduced in ``16-evolving-gnn-explanations/01-message-flow-attribution``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from ..progress import progress
from .graphs import EvolvingGraph

__all__ = ["WeightedGCN", "HEADS", "Target", "to_torch_sparse", "forward_numpy",
           "forward_numpy_update", "train_gcn"]

HEADS = ("node", "graph", "link")


def to_torch_sparse(A: sp.spmatrix, dtype=torch.float64) -> torch.Tensor:
    """A scipy sparse matrix as a torch sparse COO tensor."""
    A = sp.coo_matrix(A)
    idx = torch.from_numpy(np.vstack([A.row, A.col]).astype(np.int64))
    return torch.sparse_coo_tensor(idx, torch.from_numpy(A.data).to(dtype), A.shape,
                                   check_invariants=False).coalesce()


@dataclass(frozen=True)
class Target:
    """What is explained: a node's logits (``kind="node"``, ``index=k``), a link's logits
    (``"link"``, ``index=(u, v)``) or the graph's logits (``"graph"``)."""

    kind: str
    index: int | tuple[int, int] | None = None

    def __post_init__(self):
        if self.kind not in HEADS:
            raise ValueError(f"unknown target kind {self.kind!r}; valid: {', '.join(HEADS)}")
        if self.kind == "node" and not isinstance(self.index, (int, np.integer)):
            raise ValueError("a node target needs index=<node id>")
        if self.kind == "link" and (self.index is None or len(self.index) != 2):
            raise ValueError("a link target needs index=(u, v)")


class _ConstSpMM(torch.autograd.Function):
    """``A @ M`` for a constant scipy sparse ``A`` (no gradient to ``A``): scipy's sparse products
    in both passes, much faster on CPU than torch's sparse COO backward for small hidden widths."""

    @staticmethod
    def forward(ctx, M, A):
        ctx.A = A
        return torch.from_numpy(np.asarray(A @ M.detach().numpy()))

    @staticmethod
    def backward(ctx, G):
        return torch.from_numpy(np.asarray(ctx.A.T @ G.numpy())), None


class WeightedGCN(torch.nn.Module):
    """``L``-layer bias-free GCN on explicit weighted adjacencies (one per layer).

    Parameters: ``in_dim``, ``hidden`` (paper: 16), ``out_dim`` (classes), ``n_layers``
    (paper: 2), ``head`` in ``HEADS``; the link head maps ``[Y_u, Y_v]`` to ``n_link_classes``
    logits with a bias. Weights are float64 so attributions are exact to round-off.
    """

    def __init__(self, in_dim: int, hidden: int = 16, out_dim: int = 2, n_layers: int = 2,
                 head: str = "node", n_link_classes: int = 2, dropout: float = 0.0, seed: int = 0):
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"unknown head {head!r}; valid: {', '.join(HEADS)}")
        if n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {n_layers}")
        g = torch.Generator().manual_seed(seed)
        dims = [in_dim] + [hidden] * (n_layers - 1) + [out_dim]
        self.weights = torch.nn.ParameterList([
            torch.nn.Parameter(torch.randn(a, b, generator=g, dtype=torch.float64) * (2.0 / (a + b)) ** 0.5)
            for a, b in zip(dims[:-1], dims[1:])])
        self.head, self.n_layers, self.dropout = head, n_layers, dropout
        self.link = torch.nn.Linear(2 * out_dim, n_link_classes, dtype=torch.float64) if head == "link" else None

    def _adjs(self, adjs) -> list:
        if isinstance(adjs, (list, tuple)):
            if len(adjs) != self.n_layers:
                raise ValueError(f"{len(adjs)} per-layer adjacencies for a {self.n_layers}-layer GCN")
            return [a if isinstance(a, torch.Tensor) else sp.csr_matrix(a, dtype=np.float64) for a in adjs]
        a = adjs if isinstance(adjs, torch.Tensor) else sp.csr_matrix(adjs, dtype=np.float64)
        return [a] * self.n_layers

    def node_logits(self, X, adjs) -> torch.Tensor:
        """``Y`` (N, C): the last layer's output, before any head."""
        X = torch.as_tensor(X, dtype=torch.float64)
        h = X
        for l, (A, W) in enumerate(zip(self._adjs(adjs), self.weights)):
            if l > 0:
                h = torch.relu(h)
                h = torch.nn.functional.dropout(h, self.dropout, self.training)
            if sp.issparse(A):
                h = _ConstSpMM.apply((h @ W).contiguous(), A)
            else:
                h = torch.sparse.mm(A, h @ W) if A.is_sparse else A @ (h @ W)
        return h

    def readout(self, Y: torch.Tensor, target: Target | None = None, pairs=None) -> torch.Tensor:
        """The head applied to node logits: a node's, the graph's (mean) or links' logits."""
        if self.head == "graph":
            return Y.mean(0)
        if self.head == "link":
            pairs = torch.as_tensor([target.index] if pairs is None else pairs, dtype=torch.long)
            out = self.link(torch.cat([Y[pairs[:, 0]], Y[pairs[:, 1]]], 1))
            return out[0] if target is not None and pairs.shape[0] == 1 else out
        return Y if target is None else Y[target.index]

    def forward(self, X, adjs, target: Target | None = None, pairs=None) -> torch.Tensor:
        return self.readout(self.node_logits(X, adjs), target, pairs)

    def numpy_weights(self) -> list[np.ndarray]:
        return [w.detach().numpy().astype(np.float64) for w in self.weights]


def forward_numpy(Ws: Sequence[np.ndarray], X: np.ndarray, adjs) -> tuple[list[np.ndarray], np.ndarray]:
    """Reference forward pass: the hidden pre-activations ``[H^(1), ..., H^(L-1)]`` and ``Y``.
    ``adjs`` is one sparse matrix or a list with one per layer."""
    L = len(Ws)
    adjs = adjs if isinstance(adjs, (list, tuple)) else [adjs] * L
    Hs, h = [], np.asarray(X, dtype=np.float64)
    for l in range(L):
        if l > 0:
            Hs.append(h)
            h = np.maximum(h, 0.0)
        h = adjs[l] @ (h @ Ws[l])
    return Hs, np.asarray(h)


def forward_numpy_update(Ws: Sequence[np.ndarray], X: np.ndarray, A_old, A_new, Hs_old, Y_old,
                         changed_dst: np.ndarray, out_neighbours=None
                         ) -> tuple[list[np.ndarray], np.ndarray]:
    """:func:`forward_numpy` on ``A_new`` given the pass ``(Hs_old, Y_old)`` on ``A_old``,
    recomputing only the rows that can differ.

    At layer 1 those are the nodes whose incoming weights changed (``changed_dst``: every ``k``
    with ``A_new[k] != A_old[k]``); at each later layer, those plus every node fed by a node whose
    row changed below. ``out_neighbours(nodes)`` returns the nodes they feed (in either snapshot;
    a superset is fine); by default it is read off ``|A_old| + |A_new|``. Each recomputed row is
    summed exactly as in the full pass, so the result equals ``forward_numpy(Ws, X, A_new)``
    bit for bit, at a cost that follows the L-hop neighbourhood of the change. Chapter 16.
    """
    A_new = sp.csr_matrix(A_new)
    if out_neighbours is None:
        feeds = (abs(sp.csr_matrix(A_old)) + abs(A_new)).T.tocsr()   # row j: the nodes j feeds
        out_neighbours = lambda nodes: feeds[nodes].indices
    L = len(Ws)
    n = A_new.shape[0]
    seed = np.zeros(n, bool)
    seed[np.asarray(changed_dst, dtype=np.int64)] = True
    Hs, h = [], np.asarray(X, dtype=np.float64)
    moved = np.zeros(0, np.int64)            # rows of this layer's input that differ
    for l in range(L):
        if l > 0:
            Hs.append(h)
            h = np.maximum(h, 0.0)
        rows = seed.copy()
        if len(moved):
            rows[out_neighbours(moved)] = True
        rows = np.flatnonzero(rows)
        out = (Hs_old[l] if l < L - 1 else np.asarray(Y_old)).copy()
        if len(rows):
            out[rows] = A_new[rows] @ (h @ Ws[l])
        moved, h = rows, out
    return Hs, np.asarray(h)


class one_thread:
    """Run torch on one intra-op thread inside the block (restored after). The chapter's GCNs are
    tiny: on a busy 2-core machine torch's second thread makes each small op ~10x slower."""

    def __enter__(self):
        self.n = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.n)


def train_gcn(graphs: Sequence[EvolvingGraph] | EvolvingGraph, head: str = "node", *, hidden: int = 16,
              n_layers: int = 2, n_steps: int = 200, lr: float = 0.01, weight_decay: float = 5e-4,
              dropout: float = 0.0, train_mask: np.ndarray | None = None, snapshot: str = "both",
              link_pairs: np.ndarray | None = None, link_labels: np.ndarray | None = None,
              seed: int = 0, desc: str = "train GCN") -> WeightedGCN:
    """Train a :class:`WeightedGCN` with Adam on the node labels (``head="node"``, one graph),
    graph labels (``"graph"``, a list) or link labels (``"link"``: ``link_pairs`` (P, 2) with
    ``link_labels`` (P,)). ``snapshot``: train on G0, G1 or both. Paper: 20 epochs, lr 0.1,
    hidden 16, dropout 0.5; we use Adam at lr 0.01 for ``n_steps`` full-batch steps.
    """
    if snapshot not in ("old", "new", "both"):
        raise ValueError(f"unknown snapshot {snapshot!r}; valid: old, new, both")
    gs = [graphs] if isinstance(graphs, EvolvingGraph) else list(graphs)
    if not gs:
        raise ValueError("no graphs to train on")
    torch.manual_seed(seed)
    if head == "graph":
        n_cls = int(max(int(g.y) for g in gs)) + 1
    elif head == "node":
        n_cls = int(gs[0].y.max()) + 1
    else:
        if link_pairs is None or link_labels is None:
            raise ValueError("head='link' needs link_pairs and link_labels")
        n_cls = hidden
    model = WeightedGCN(gs[0].X.shape[1], hidden, n_cls, n_layers, head, dropout=dropout, seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    snaps = {"old": ("A0",), "new": ("A1",), "both": ("A0", "A1")}[snapshot]
    data = [(torch.from_numpy(g.X), getattr(g, s), g) for g in gs for s in snaps]
    if head == "graph":   # one block-diagonal pass over all graphs; mean pooling as a sparse matrix
        yg = torch.tensor([int(g.y) for _, _, g in data])
        sizes = [g.n_nodes for _, _, g in data]
        X_all = torch.from_numpy(np.vstack([g.X for _, _, g in data]))
        A_all = sp.block_diag([getattr(g, s) for g in gs for s in snaps], format="csr")
        pool = sp.csr_matrix((np.repeat([1.0 / n for n in sizes], sizes),
                              (np.repeat(np.arange(len(sizes)), sizes), np.arange(sum(sizes)))),
                             shape=(len(sizes), sum(sizes)))
    with one_thread():
        _fit(model, opt, head, data, n_steps, desc, train_mask, link_pairs, link_labels,
             (X_all, A_all, pool, yg) if head == "graph" else None)
    model.eval()
    return model


def _fit(model, opt, head, data, n_steps, desc, train_mask, link_pairs, link_labels, batch):
    if batch is not None:
        X_all, A_all, pool, yg = batch
    for _ in progress(range(n_steps), desc=desc):
        opt.zero_grad()
        model.train()
        if head == "graph":
            out = _ConstSpMM.apply(model.node_logits(X_all, A_all), pool)
            loss = torch.nn.functional.cross_entropy(out, yg)
        elif head == "node":
            loss = 0.0
            for X, A, g in data:
                m = slice(None) if train_mask is None else torch.as_tensor(train_mask)
                loss = loss + torch.nn.functional.cross_entropy(model(X, A)[m], torch.as_tensor(g.y)[m])
        else:
            loss = 0.0
            for X, A, g in data:
                out = model(X, A, pairs=link_pairs)
                loss = loss + torch.nn.functional.cross_entropy(out, torch.as_tensor(link_labels))
        loss.backward()
        opt.step()
