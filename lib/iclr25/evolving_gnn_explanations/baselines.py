"""What a user would reach for instead. Notebooks 01-03 of ``16-evolving-gnn-explanations``.

*Baselines that see the change* (the ones the authors' evolving-graph papers compare with), each an
``(M, C)`` attribution of the change ``Y(A1) - Y(A0)`` to the changed layer edges of an
:class:`~.flows.Attribution`, so that each can be fed to the same KL selection as ours:

- ``"grad"``: the gradient of the target logits with respect to each layer edge's weight on the new
  graph, times the weight change (the first-order Taylor term of the change at ``A1``);
- ``"deeplift"``: DeepLIFT's rescale rule with the old graph as reference: back-propagation on
  ``A1`` with every ReLU's derivative replaced by ``(ReLU(H1) - ReLU(H0)) / (H1 - H0)``, times the
  weight change (products of two changing factors are differentiated at the input, as Captum does);
- ``"gnn_lrp"``: GNN-LRP walk relevances (the LRP-0 rule, which for a bias-free ReLU GCN is
  gradient x input) on ``G1`` minus those on ``G0``, each walk's relevance split equally over its
  ``L`` layer edges; summed over *all* layer edges this is complete, but part of it lands on
  unchanged edges (their walks' ReLU gates moved);
- ``"ig"``: Integrated Gradients along the straight line ``A0 -> A1`` (complete only up to the
  quadrature error, which shrinks with the number of steps).

*Static* baselines: ranking by |Phi|, random choices, and torch_geometric's GNNExplainer /
GraphMaskExplainer on the new graph (they explain one snapshot and cannot see deleted edges).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from .flows import Attribution
from .graphs import EvolvingGraph
from .model import WeightedGCN

__all__ = ["integrated_gradients", "layer_edge_gradients", "change_attribution", "CHANGE_BASELINES", "CHANGE_LABELS", "top_abs", "random_choice", "pyg_edge_scores", "rank_input_edges",
           "PYG_EXPLAINERS", "fidelity_curves"]

PYG_EXPLAINERS = ("gnnexplainer", "graphmask")
CHANGE_BASELINES = ("deeplift", "gnn_lrp", "grad", "ig")
CHANGE_LABELS = {"deeplift": "DeepLIFT", "gnn_lrp": "GNN-LRP", "grad": "Grad", "ig": "IG"}


def _readout_jacobian(model: WeightedGCN, target, n: int, C_in: int) -> np.ndarray:
    """``d readout_c / d Y[k, i]`` as (C_out, N, C_in): the head is linear in the node logits."""
    from .flows import _readout

    read = _readout(model, target, n)
    end = np.repeat(np.arange(n), C_in)
    J = read(end, np.tile(np.eye(C_in), (n, 1)))              # (N * C_in, C_out)
    return J.reshape(n, C_in, -1).transpose(2, 0, 1)


def _edge_grads(Ws, X, ei, weights, jac, relu_mult=None) -> np.ndarray:
    """Reverse mode by hand for the bias-free GCN: (L, E, C) gradients of the readout with respect to
    each layer's edge weights ``weights[l]`` (``relu_mult``: replaces the ReLU derivatives)."""
    L = len(Ws)
    adjs = [sp.csr_matrix((w, (ei.dst, ei.src)), shape=(ei.n, ei.n)) for w in weights]
    Ms, Hs, z = [], [], np.asarray(X, dtype=np.float64)
    for l in range(L):
        Ms.append(z @ Ws[l])
        if l < L - 1:
            Hs.append(adjs[l] @ Ms[-1])
            z = np.maximum(Hs[-1], 0.0)
    C, n = jac.shape[0], ei.n
    G = jac                                                    # d out / d H^(l+1): (C, N, d)
    out = np.zeros((L, ei.n_edges, C))
    for l in range(L - 1, -1, -1):
        out[l] = np.einsum("cej,ej->ec", G[:, ei.dst, :], Ms[l][ei.src])
        if l == 0:
            break
        d = G.shape[2]
        dM = (adjs[l].T @ G.transpose(1, 0, 2).reshape(n, C * d)).reshape(n, C, d).transpose(1, 0, 2)
        dZ = dM @ Ws[l].T
        gate = (Hs[l - 1] > 0).astype(np.float64) if relu_mult is None else relu_mult[l - 1]
        G = dZ * gate[None]
    return out


def layer_edge_gradients(model: WeightedGCN, graph: EvolvingGraph, att: Attribution, weights,
                         relu_mult=None) -> np.ndarray:
    """``d y_target[c] / d w^l_e`` (L, E, C) for every layer ``l`` and every edge ``e`` of ``att.ei``,
    at the per-layer edge weights ``weights`` (one (E,) array per layer, or one for all layers);
    ``relu_mult`` (one (N, H) array per hidden layer) replaces each ReLU's derivative (DeepLIFT's
    rescale rule). Reverse mode written out in numpy (checked against finite differences)."""
    ei = att.ei
    L = model.n_layers
    weights = [weights] * L if np.ndim(weights[0]) == 0 else list(weights)
    if len(weights) != L or any(len(w) != ei.n_edges for w in weights):
        raise ValueError(f"weights must be {L} arrays of {ei.n_edges} edge weights")
    Ws = model.numpy_weights()
    jac = _readout_jacobian(model, att.target, ei.n, Ws[-1].shape[1])
    return _edge_grads(Ws, graph.X, ei, [np.asarray(w, dtype=np.float64) for w in weights], jac, relu_mult)


def _rows(att: Attribution, full: np.ndarray) -> np.ndarray:
    """(L, E, C) per-layer-edge values -> the (M, C) rows of ``att.layer_edges``."""
    return full[att.layer_edges[:, 0], att.layer_eids]


def change_attribution(model: WeightedGCN, graph: EvolvingGraph, att: Attribution, method: str,
                       ig_steps: int = 32, full: bool = False) -> np.ndarray:
    """A change-aware baseline's attribution of ``att``'s change to its changed layer edges: (M, C)
    aligned with ``att.layer_edges`` (``full=True``: (L, E, C) over every layer edge, unchanged ones
    included). ``method`` in ``CHANGE_BASELINES`` (see the module docstring). Chapter 16, notebooks
    ``01-message-flow-attribution`` to ``03-motif-case-study``."""
    if method not in CHANGE_BASELINES:
        raise ValueError(f"unknown change baseline {method!r}; valid: {', '.join(CHANGE_BASELINES)}")
    ei = att.ei
    L = model.n_layers
    dw = (ei.w1 - ei.w0)[None, :, None]
    if method == "ig":
        out = integrated_gradients(model, graph, att, ig_steps, full=True)
    elif method == "grad":
        out = layer_edge_gradients(model, graph, att, ei.w1) * dw
    elif method == "deeplift":
        from .flows import relu_multipliers
        from .model import forward_numpy

        Ws = model.numpy_weights()
        Hs0, _ = forward_numpy(Ws, graph.X, graph.A0)
        Hs1, _ = forward_numpy(Ws, graph.X, graph.A1)
        mult = [relu_multipliers(h0, h1)[0] for h0, h1 in zip(Hs0, Hs1)]
        out = layer_edge_gradients(model, graph, att, ei.w1, relu_mult=mult) * dw
    else:  # gnn_lrp: LRP-0 walk relevance through each layer edge = w * dy/dw; split over L layer edges
        r1 = layer_edge_gradients(model, graph, att, ei.w1) * ei.w1[None, :, None]
        r0 = layer_edge_gradients(model, graph, att, ei.w0) * ei.w0[None, :, None]
        out = (r1 - r0) / L
    return out if full else _rows(att, out)


def integrated_gradients(model: WeightedGCN, graph: EvolvingGraph, att: Attribution, n_steps: int = 32,
                         rule: str = "midpoint", full: bool = False) -> np.ndarray:
    """Integrated Gradients of the target logits over the per-layer edge weights along the straight
    line ``A(alpha) = A0 + alpha (A1 - A0)``: returns (M, C) for the rows of ``att.layer_edges``.
    Complete only up to the quadrature error (``rule``: ``"midpoint"`` or ``"left"`` Riemann sum).
    ``full=True`` returns (L, E, C) over every layer edge instead."""
    if rule not in ("midpoint", "left"):
        raise ValueError(f"unknown rule {rule!r}; valid: midpoint, left")
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    ei = att.ei
    L = model.n_layers
    alphas = (np.arange(n_steps) + (0.5 if rule == "midpoint" else 0.0)) / n_steps
    Ws = model.numpy_weights()
    jac = _readout_jacobian(model, att.target, ei.n, Ws[-1].shape[1])
    grads = sum(_edge_grads(Ws, graph.X, ei, [ei.w0 + a * (ei.w1 - ei.w0)] * L, jac) for a in alphas) / n_steps
    out = grads * (ei.w1 - ei.w0)[None, :, None]
    return out if full else out[att.layer_edges[:, 0], att.layer_eids]


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
                    explainers=PYG_EXPLAINERS, change_baselines=CHANGE_BASELINES, ig_steps: int = 32):
    """Fig. 5 in shape (``16-evolving-gnn-explanations/02-layer-edges-vs-baselines``): for each
    ``(model, graph, attribution)`` in ``cases`` and K = 1 ... ``k_max``, the fidelity KL of the
    layer edges chosen by our KL selection, the input edges chosen the same way, the layer edges the
    same KL selection chooses from each change-aware baseline's attribution in ``change_baselines``
    (``"<label> (KL)"``: DeepLIFT, GNN-LRP, Grad, IG with ``ig_steps``) and the K largest of that
    attribution (``"<label> (top)"``, how the authors' earlier papers use them), each PyG explainer in
    ``explainers`` (not for link heads), top-|Phi|, random layer edges and no edge at all. One row
    per (instance, method, K), plus ``"<method> time"`` rows in seconds."""
    import pandas as pd

    from .model import one_thread

    with one_thread():
        return pd.DataFrame(_fidelity_rows(cases, k_max, seed, pyg_epochs, explainers, change_baselines, ig_steps))


def _fidelity_rows(cases, k_max, seed, pyg_epochs, explainers, change_baselines, ig_steps):
    import time

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
        attrs = {}
        for name in change_baselines:
            t0 = time.perf_counter()
            attrs[CHANGE_LABELS[name]] = change_attribution(m, g, att, name, ig_steps=ig_steps)
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
            for label, Phi in attrs.items():
                sel[f"{label} (KL)"] = select(Phi, att.y_old, p_new, K, "relax").index
                sel[f"{label} (top)"] = top_abs(Phi, K)
            sel["top-|Φ| layer edges"] = top_abs(att.phi_layer, K)
            sel["random layer edges"] = random_choice(len(att.layer_edges), K, seed + 100 * i + K)
            sel["no edge (old prediction)"] = []
            for method, chosen in sel.items():
                rows.append({"instance": i, "method": method, "K": K, "KL": fidelity_kl(m, g, att, chosen),
                             "layer edges changed": len(chosen)})
    return rows
