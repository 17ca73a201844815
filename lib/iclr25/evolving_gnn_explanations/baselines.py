"""What a user would reach for instead: Integrated Gradients over edge weights, ranking by |Phi|,
random choices, and torch_geometric's GNNExplainer / GraphMaskExplainer on the new graph.
Notebooks 01 and 02 of ``16-evolving-gnn-explanations``.
"""

from __future__ import annotations

import numpy as np
import torch

from .flows import Attribution
from .graphs import EvolvingGraph
from .model import WeightedGCN

__all__ = ["integrated_gradients", "top_abs", "random_choice", "pyg_edge_scores", "rank_input_edges",
           "PYG_EXPLAINERS", "fidelity_curves"]

PYG_EXPLAINERS = ("gnnexplainer", "graphmask")


def integrated_gradients(model: WeightedGCN, graph: EvolvingGraph, att: Attribution, n_steps: int = 32,
                         rule: str = "midpoint") -> np.ndarray:
    """Integrated Gradients of the target logits over the per-layer edge weights along the straight
    line ``A(alpha) = A0 + alpha (A1 - A0)``: returns (M, C) for the rows of ``att.layer_edges``.
    Complete only up to the quadrature error (``rule``: ``"midpoint"`` or ``"left"`` Riemann sum)."""
    if rule not in ("midpoint", "left"):
        raise ValueError(f"unknown rule {rule!r}; valid: midpoint, left")
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    ei = att.ei
    L = model.n_layers
    idx = torch.from_numpy(np.vstack([ei.dst, ei.src]).astype(np.int64))
    w0, dw = torch.from_numpy(ei.w0), torch.from_numpy(ei.w1 - ei.w0)
    alphas = (np.arange(n_steps) + (0.5 if rule == "midpoint" else 0.0)) / n_steps
    C = len(att.y_old)
    grads = np.zeros((L, ei.n_edges, C))
    X = torch.from_numpy(graph.X)
    for a in alphas:
        ws = [(w0 + a * dw).clone().requires_grad_(True) for _ in range(L)]
        adjs = [torch.sparse_coo_tensor(idx, w, (ei.n, ei.n), check_invariants=False) for w in ws]
        out = model(X, adjs, att.target)
        for c in range(C):
            gs = torch.autograd.grad(out[c], ws, retain_graph=c < C - 1, allow_unused=True)
            for l, g in enumerate(gs):
                if g is not None:
                    grads[l, :, c] += g.detach().numpy()
    grads /= n_steps
    full = grads * (ei.w1 - ei.w0)[None, :, None]
    return full[att.layer_edges[:, 0], att.layer_eids]


def top_abs(Phi: np.ndarray, K: int) -> np.ndarray:
    """The K rows with the largest ``|Phi - mean(Phi)|_1`` (logits are shift-invariant)."""
    score = np.abs(Phi - Phi.mean(1, keepdims=True)).sum(1)
    return np.sort(np.argsort(-score, kind="stable")[:K])


def random_choice(M: int, K: int, seed: int = 0) -> np.ndarray:
    """K of M candidates uniformly at random."""
    if not 0 <= K <= M:
        raise ValueError(f"K={K} infeasible with {M} candidates")
    return np.sort(np.random.default_rng(seed).choice(M, K, replace=False))


class _PygGCN(torch.nn.Module):
    """Our GCN's weights inside PyG ``GCNConv`` layers (``normalize=False``, no self-loops added,
    no bias), so that PyG's explainers can mask its messages."""

    def __init__(self, model: WeightedGCN):
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.convs = torch.nn.ModuleList()
        for W in model.weights:
            conv = GCNConv(W.shape[0], W.shape[1], normalize=False, add_self_loops=False, bias=False)
            conv.lin.weight.data = W.detach().T.float().clone()
            self.convs.append(conv)
        self.head = model.head

    def forward(self, x, edge_index, edge_weight=None, batch=None):
        h = x
        for l, conv in enumerate(self.convs):
            if l > 0:
                h = torch.relu(h)
            h = conv(h, edge_index, edge_weight)
        if self.head == "graph":
            return h.mean(0, keepdim=True)
        return h


def pyg_edge_scores(model: WeightedGCN, graph: EvolvingGraph, att: Attribution, explainer: str = "gnnexplainer",
                    epochs: int = 100, seed: int = 0) -> np.ndarray:
    """Edge-mask scores from a static PyG explainer of the *new* graph's prediction, one per row of
    ``att.layer_edges`` (the mask of that directed edge; GraphMask's mask is shared by layers in
    PyG's output). Only node and graph targets (PyG's link explanations need a link model)."""
    if explainer not in PYG_EXPLAINERS:
        raise ValueError(f"unknown explainer {explainer!r}; valid: {', '.join(PYG_EXPLAINERS)}")
    if att.target.kind == "link":
        raise ValueError("pyg_edge_scores supports node and graph targets")
    from torch_geometric.explain import Explainer, GNNExplainer
    from torch_geometric.explain.algorithm import GraphMaskExplainer

    torch.manual_seed(seed)
    ei = att.ei
    keep = ei.w1 != 0
    eids = np.flatnonzero(keep)
    edge_index = torch.from_numpy(np.vstack([ei.src[eids], ei.dst[eids]]).astype(np.int64))
    edge_weight = torch.from_numpy(ei.w1[eids]).float()
    algo = GNNExplainer(epochs=epochs) if explainer == "gnnexplainer" else \
        GraphMaskExplainer(model.n_layers, epochs=epochs, log=False)
    level = "graph" if att.target.kind == "graph" else "node"
    exp = Explainer(_PygGCN(model), algo, explanation_type="phenomenon", edge_mask_type="object",
                    node_mask_type=None,
                    model_config=dict(mode="multiclass_classification", task_level=level, return_type="raw"))
    if level == "graph":
        target, kw = torch.tensor([int(np.argmax(att.y_new))]), {}
    else:
        with torch.no_grad():
            target = model.node_logits(graph.X, graph.A1).argmax(1)
        kw = {"index": int(att.target.index)}
    out = exp(torch.from_numpy(graph.X).float(), edge_index, target=target, edge_weight=edge_weight, **kw)
    mask = np.zeros(ei.n_edges)
    mask[eids] = out.edge_mask.detach().numpy()
    return mask[att.layer_eids]


def rank_input_edges(att: Attribution, row_scores: np.ndarray, K: int) -> np.ndarray:
    """The K input edges with the largest score (max over their layer-edge rows)."""
    s = np.array([row_scores[m].max() if len(m) else -np.inf for m in att.input_members])
    return np.sort(np.argsort(-s, kind="stable")[:K])


_EXPLAINER_LABELS = {"gnnexplainer": "GNNExplainer", "graphmask": "GraphMaskExplainer"}


def fidelity_curves(cases, k_max: int, seed: int = 0, pyg_epochs: int = 200,
                    explainers=PYG_EXPLAINERS):
    """Fig. 5 in shape (``16-evolving-gnn-explanations/02-layer-edges-vs-baselines``): for each
    ``(model, graph, attribution)`` in ``cases`` and K = 1 ... ``k_max``, the fidelity KL of the
    layer edges chosen by our KL selection, the input edges chosen the same way, each PyG explainer
    in ``explainers`` (not for link heads), top-|Phi|, random layer edges and no edge at all. One
    row per (instance, method, K), plus ``"<method> time"`` rows in seconds."""
    import time

    import pandas as pd

    from ..progress import progress
    from .selection import fidelity_kl, input_to_layer_edges, select, softmax

    rows = []
    for i, (m, g, att) in enumerate(progress(cases, desc="instances")):
        p_new = softmax(att.y_new)
        scores = {}
        if att.target.kind != "link":
            for name in explainers:
                t0 = time.perf_counter()
                scores[name] = pyg_edge_scores(m, g, att, name, epochs=pyg_epochs, seed=seed)
                rows.append({"instance": i, "method": f"{name} time", "K": 0, "KL": time.perf_counter() - t0})
        for K in range(1, min(k_max, len(att.layer_edges)) + 1):
            t0 = time.perf_counter()
            sel = {"layer edges (KL)": select(att.phi_layer, att.y_old, p_new, K, "relax").index}
            rows.append({"instance": i, "method": "ours time", "K": K, "KL": time.perf_counter() - t0})
            if K <= len(att.input_edges):
                q = select(att.phi_input, att.y_old, p_new, K, "relax").index
                sel["input edges (KL)"] = input_to_layer_edges(att, q)
                for name, s in scores.items():
                    sel[_EXPLAINER_LABELS[name]] = input_to_layer_edges(att, rank_input_edges(att, s, K))
            sel["top-|Φ| layer edges"] = top_abs(att.phi_layer, K)
            sel["random layer edges"] = random_choice(len(att.layer_edges), K, seed + 100 * i + K)
            sel["no edge (old prediction)"] = []
            for method, chosen in sel.items():
                rows.append({"instance": i, "method": method, "K": K, "KL": fidelity_kl(m, g, att, chosen),
                             "layer edges changed": len(chosen)})
    return pd.DataFrame(rows)
