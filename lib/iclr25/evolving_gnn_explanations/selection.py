"""Selecting the K layer edges (or input edges) whose change best explains the new prediction,
and measuring that explanation by re-running the GNN (fidelity). Notebook
``16-evolving-gnn-explanations/02-layer-edges-vs-baselines``.

The surrogate (the paper's selection problem): with ``s`` in {0,1}^M, ``sum(s) = K``,

    z(s) = y_old + sum_e s_e Phi_e,      minimise  KL(p_new || softmax(z(s)))
         = sum_c p_c log p_c - p . z(s) + logsumexp(z(s))            (convex in relaxed s).

The official code declares an integer cvxpy variable and solves with MOSEK. We offer
``"enumerate"`` (exact, small M), ``"scip"`` (exact MINLP through pyscipopt: binary s,
``sum_c exp(z_c - t) <= 1``) and ``"relax"`` (projected gradient on the continuous relaxation,
top-K, then local swaps: a heuristic whose gap to the exact optimum the notebook reports).

SCIP's budget is deterministic, so that a solve returns the same selection on any machine and
under any load: ``node_limit`` branch-and-bound nodes (``limits/nodes``, ``limits/totalnodes``), a
single thread and a fixed seed (``randomization/randomseedshift``). ``time_limit`` (seconds, SCIP's
default wall clock: its CPU clock made these solves some 60% slower) is only a safety net, far
beyond what the notebook's solves take; ``Selection.status`` says whether a limit stopped the
solve (then the selection is SCIP's best incumbent, polished, and with ``"timelimit"`` it depends
on the machine).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from .flows import Attribution
from .graphs import EvolvingGraph
from .model import WeightedGCN

__all__ = ["SOLVERS", "CARDINALITY", "kl_divergence", "softmax", "surrogate_kl", "select",
           "Selection", "layer_adjacencies", "fidelity_kl", "input_to_layer_edges"]

SOLVERS = ("enumerate", "scip", "relax")
CARDINALITY = ("exact", "at_most")
#: SCIP's default budget: branch-and-bound nodes (deterministic; notebook 02's book solves prove
#: optimality within 2,456 nodes, and SCIP visits some 1,400-2,000 nodes per second on these
#: models: a solve that finished within the old 60 s wall-clock limit needed fewer than some
#: 120,000) and seconds (a safety net only: 10 x that old limit)
SCIP_NODE_LIMIT = 200_000
SCIP_TIME_LIMIT = 600.0


def softmax(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """``KL(p || q) = sum p log(p / q)`` (terms with p = 0 are 0)."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    m = p > 0
    return float(np.sum(p[m] * (np.log(p[m]) - np.log(q[m]))))


def _lse(Z):
    m = Z.max(-1, keepdims=True)
    return (m + np.log(np.exp(Z - m).sum(-1, keepdims=True)))[..., 0]


def surrogate_kl(Phi: np.ndarray, y_old: np.ndarray, p_new: np.ndarray, S) -> np.ndarray:
    """The surrogate KL of one or many selections: ``S`` a 0/1 (or relaxed) vector (M,) or matrix (B, M)."""
    S = np.asarray(S, dtype=np.float64)
    Z = y_old + S @ Phi
    ent = float(np.sum(p_new[p_new > 0] * np.log(p_new[p_new > 0])))
    return ent - Z @ p_new + _lse(Z)


@dataclass
class Selection:
    """Chosen indices (into the rows of ``Phi``), their surrogate KL, and the solver used. For
    ``"scip"``: its ``status`` (``"optimal"``, or the limit that stopped it: ``"nodelimit"``,
    ``"totalnodelimit"``, ``"timelimit"``, ...) and the branch-and-bound ``nodes`` it used."""

    index: np.ndarray
    kl: float
    solver: str
    relaxed_kl: float | None = None
    status: str | None = None
    nodes: int | None = None

    @property
    def hit_limit(self) -> bool:
        """Whether a solver limit stopped the solve before it proved optimality (SCIP only)."""
        return self.status is not None and self.status != "optimal"


def _check(Phi, y_old, p_new, K, cardinality):
    Phi = np.asarray(Phi, dtype=np.float64)
    if Phi.ndim != 2:
        raise ValueError(f"Phi must be (n_candidates, n_classes), got shape {Phi.shape}")
    if np.shape(y_old) != (Phi.shape[1],) or np.shape(p_new) != (Phi.shape[1],):
        raise ValueError(f"y_old and p_new must have shape ({Phi.shape[1]},), got "
                         f"{np.shape(y_old)} and {np.shape(p_new)}")
    if not 0 <= K <= Phi.shape[0]:
        raise ValueError(f"K={K} infeasible: choose 0 <= K <= {Phi.shape[0]} (the number of candidates)")
    if cardinality not in CARDINALITY:
        raise ValueError(f"unknown cardinality {cardinality!r}; valid: {', '.join(CARDINALITY)}")
    return Phi, np.asarray(y_old, float), np.asarray(p_new, float)


def _enumerate(Phi, y_old, p_new, K, cardinality, max_subsets, chunk=20000):
    M = Phi.shape[0]
    sizes = range(K + 1) if cardinality == "at_most" else [K]
    total = sum(math.comb(M, k) for k in sizes)
    if total > max_subsets:
        raise ValueError(f"enumeration would visit {total:,} subsets (> max_subsets={max_subsets:,}); "
                         "use solver='scip' or 'relax'")
    best, best_kl = np.zeros(0, np.int64), float(surrogate_kl(Phi, y_old, p_new, np.zeros(M)))
    if cardinality == "exact" and K > 0:
        best_kl = np.inf
    for k in sizes:
        if k == 0:
            continue
        it = itertools.combinations(range(M), k)
        while True:
            block = list(itertools.islice(it, chunk))
            if not block:
                break
            idx = np.array(block)
            Z = y_old + Phi[idx].sum(1)
            kl = float(np.sum(p_new[p_new > 0] * np.log(p_new[p_new > 0]))) - Z @ p_new + _lse(Z)
            i = int(np.argmin(kl))
            if kl[i] < best_kl - 1e-15:
                best_kl, best = float(kl[i]), idx[i]
    return best, best_kl


def _project_capped_simplex(v, K):
    """Euclidean projection onto {0 <= s <= 1, sum s = K} (bisection on the shift)."""
    lo, hi = v.min() - 1.0, v.max()
    for _ in range(50):
        tau = 0.5 * (lo + hi)
        if np.clip(v - tau, 0, 1).sum() > K:
            lo = tau
        else:
            hi = tau
    return np.clip(v - 0.5 * (lo + hi), 0, 1)


def _relax(Phi, y_old, p_new, K, n_iter=200, tol=1e-10):
    M = Phi.shape[0]
    lip = 0.5 * np.linalg.norm(Phi, 2) ** 2 + 1e-12
    s = np.full(M, K / M)
    x_prev, tk = s.copy(), 1.0
    for _ in range(n_iter):  # FISTA with projection
        q = softmax(y_old + s @ Phi)
        grad = Phi @ (q - p_new)
        x = _project_capped_simplex(s - grad / lip, K)
        if np.abs(x - x_prev).max() < tol:
            return x
        tn = 0.5 * (1 + math.sqrt(1 + 4 * tk * tk))
        s = x + (tk - 1) / tn * (x - x_prev)
        x_prev, tk = x, tn
    return x_prev


def _swap(Phi, y_old, p_new, sel, max_rounds=50):
    """Local search: swap one selected and one unselected candidate while the KL drops."""
    M = Phi.shape[0]
    sel = list(sel)
    cur = float(surrogate_kl(Phi, y_old, p_new, np.isin(np.arange(M), sel)))
    for _ in range(max_rounds):
        out = np.setdiff1d(np.arange(M), sel)
        if not len(out) or not sel:
            break
        z = y_old + Phi[sel].sum(0)
        Z = z[None, None, :] - Phi[sel][:, None, :] + Phi[out][None, :, :]
        ent = float(np.sum(p_new[p_new > 0] * np.log(p_new[p_new > 0])))
        kl = ent - Z @ p_new + _lse(Z)
        i, j = np.unravel_index(np.argmin(kl), kl.shape)
        if kl[i, j] >= cur - 1e-12:
            break
        sel[i] = int(out[j])
        cur = float(kl[i, j])
    return np.array(sorted(sel), dtype=np.int64), cur


def _scip(Phi, y_old, p_new, K, cardinality, node_limit, time_limit, seed):
    from pyscipopt import Model, exp, quicksum

    M, C = Phi.shape
    m = Model("kl-selection")
    m.hideOutput()
    # deterministic budget (see the module docstring); seconds only as a safety net
    m.setParam("limits/nodes", node_limit)
    m.setParam("limits/totalnodes", node_limit)
    m.setParam("randomization/randomseedshift", seed)
    m.setParam("parallel/maxnthreads", 1)
    m.setParam("lp/threads", 1)
    m.setParam("limits/time", time_limit)
    m.setParam("limits/gap", 0.0)
    m.setParam("limits/absgap", 0.0)
    m.setParam("numerics/feastol", 1e-7)
    s = [m.addVar(vtype="B", name=f"s{e}") for e in range(M)]
    shift = float(np.max(y_old))
    z = [m.addVar(lb=None, ub=None, name=f"z{c}") for c in range(C)]
    t = m.addVar(lb=None, ub=None, name="t")
    for c in range(C):  # z_c = y_old_c + sum_e Phi_ec s_e (shifted for numerical range)
        m.addCons(z[c] == float(y_old[c] - shift) + quicksum(float(Phi[e, c]) * s[e] for e in range(M)))
    m.addCons(quicksum(exp(z[c] - t) for c in range(C)) <= 1)   # t >= logsumexp(z)
    if cardinality == "exact":
        m.addCons(quicksum(s) == K)
    else:
        m.addCons(quicksum(s) <= K)
    m.setObjective(t - quicksum(float(p_new[c]) * z[c] for c in range(C)), "minimize")
    m.optimize()
    if m.getNSols() == 0:
        raise RuntimeError(f"SCIP found no solution (status {m.getStatus()}); raise node_limit")
    idx = np.array([e for e in range(M) if m.getVal(s[e]) > 0.5], dtype=np.int64)
    return (*_polish(Phi, y_old, p_new, idx, K, cardinality), m.getStatus(),
            int(m.getNTotalNodes()))


def _polish(Phi, y_old, p_new, idx, K, cardinality):
    """Local moves after a solver (guards against its numerical tolerances): swaps, and with
    ``at_most`` also drops and additions, while the surrogate KL falls."""
    M = Phi.shape[0]
    cur = set(int(i) for i in idx)
    f = lambda S: float(surrogate_kl(Phi, y_old, p_new, np.isin(np.arange(M), sorted(S))))
    best = f(cur)
    while True:
        moves = []
        if cur:
            sel, kl = _swap(Phi, y_old, p_new, sorted(cur), max_rounds=1)
            moves.append((kl, set(sel.tolist())))
        if cardinality == "at_most":
            moves += [(f(cur - {d}), cur - {d}) for d in cur]
            if len(cur) < K:
                moves += [(f(cur | {a}), cur | {a}) for a in range(M) if a not in cur]
        if not moves:
            break
        kl, S = min(moves, key=lambda t: t[0])
        if kl >= best - 1e-15:
            break
        best, cur = kl, S
    return np.array(sorted(cur), dtype=np.int64), best


def select(Phi: np.ndarray, y_old: np.ndarray, p_new: np.ndarray, K: int, solver: str = "relax",
           cardinality: str = "exact", swap: bool = True, max_subsets: int = 2_000_000,
           node_limit: int = SCIP_NODE_LIMIT, time_limit: float = SCIP_TIME_LIMIT,
           seed: int = 0) -> Selection:
    """Choose ``K`` rows of ``Phi`` (layer-edge or input-edge attributions of the target) that
    minimise the surrogate KL. ``cardinality="exact"`` is the paper's ``sum(s) = K``;
    ``"at_most"`` allows fewer. ``solver`` in ``SOLVERS``. SCIP's budget: ``node_limit``
    branch-and-bound nodes and the ``seed`` of its random choices (deterministic), and
    ``time_limit`` seconds (a safety net only); ``Selection.hit_limit`` says whether a limit
    stopped it. Introduced in ``16-evolving-gnn-explanations/02-layer-edges-vs-baselines``."""
    if solver not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; valid: {', '.join(SOLVERS)}")
    if int(node_limit) != node_limit or node_limit < 1:
        raise ValueError(f"node_limit must be a positive integer, got {node_limit!r}")
    if not time_limit > 0:
        raise ValueError(f"time_limit must be positive, got {time_limit!r}")
    Phi, y_old, p_new = _check(Phi, y_old, p_new, K, cardinality)
    M = Phi.shape[0]
    if K == 0 or M == 0:
        return Selection(np.zeros(0, np.int64), float(surrogate_kl(Phi, y_old, p_new, np.zeros(M))), solver)
    if solver == "enumerate":
        idx, kl = _enumerate(Phi, y_old, p_new, K, cardinality, max_subsets)
        return Selection(np.sort(idx), kl, solver)
    if solver == "scip":
        idx, kl, status, nodes = _scip(Phi, y_old, p_new, K, cardinality, int(node_limit),
                                       float(time_limit), int(seed))
        return Selection(idx, kl, solver, status=status, nodes=nodes)
    s = _relax(Phi, y_old, p_new, K)
    relaxed = float(surrogate_kl(Phi, y_old, p_new, s))
    idx = np.sort(np.argsort(-s, kind="stable")[:K])
    kl = float(surrogate_kl(Phi, y_old, p_new, np.isin(np.arange(M), idx)))
    if swap:
        idx, kl = _swap(Phi, y_old, p_new, idx)
    if cardinality == "at_most":  # drop selected edges while that helps
        cur = list(idx)
        while cur:
            trials = [float(surrogate_kl(Phi, y_old, p_new, np.isin(np.arange(M), [c for c in cur if c != d])))
                      for d in cur]
            j = int(np.argmin(trials))
            if trials[j] >= kl - 1e-12:
                break
            kl = trials[j]
            cur.pop(j)
        idx = np.array(sorted(cur), dtype=np.int64)
    return Selection(idx, kl, solver, relaxed)


def input_to_layer_edges(att: Attribution, input_index) -> np.ndarray:
    """Rows of ``att.layer_edges`` covered by the chosen input edges (all layers, both directions)."""
    rows = [att.input_members[int(q)] for q in np.atleast_1d(input_index)]
    return np.unique(np.concatenate(rows)) if rows else np.zeros(0, np.int64)


def layer_adjacencies(att: Attribution, layer_rows, n_layers: int) -> list[sp.csr_matrix]:
    """Per-layer propagation matrices: ``A0`` with the chosen layer edges set to their ``A1``
    weights in their own layer (the official ``verify_layeredge``)."""
    ei = att.ei
    rows = np.asarray(layer_rows, dtype=np.int64)
    out = []
    for l in range(n_layers):
        w = ei.w0.copy()
        r = rows[att.layer_edges[rows, 0] == l] if len(rows) else rows
        w[att.layer_eids[r]] = ei.w1[att.layer_eids[r]]
        A = ei.adjacency(w)
        A.eliminate_zeros()
        out.append(A)
    return out


def fidelity_kl(model: WeightedGCN, graph: EvolvingGraph, att: Attribution, layer_rows) -> float:
    """``KL(p_new || p_explained)`` where ``p_explained`` is the GNN's output on G0 with only the
    chosen layer edges changed, each in its own layer. Lower is better."""
    adjs = layer_adjacencies(att, layer_rows, model.n_layers)
    with torch.no_grad():
        z = model(graph.X, adjs, att.target).numpy()
    return kl_divergence(softmax(att.y_new), softmax(z))
