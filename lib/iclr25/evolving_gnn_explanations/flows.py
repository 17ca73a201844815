"""Message flows, their exact contributions to a prediction change, and the Shapley split onto
layer edges -- the heart of the chapter (notebooks 01 and 02 of ``16-evolving-gnn-explanations``).

Notation (the paper's method; a 2-layer GCN in the official code, ``L`` layers here). A *message flow*
is a path ``p = (i_0 -> i_1 -> ... -> i_L)``; its layer-``l`` edge is ``i_l -> i_{l+1}`` at
layer ``l`` with weight ``A^l[i_{l+1}, i_l]``. With ``dA = A1 - A0`` and the ReLU multipliers of
every hidden node (rescale rule)

    m_D = (ReLU(H_new) - ReLU(H_old)) / (H_new - H_old),   m_new = ReLU(H_new)/H_new,
    m_old = ReLU(H_old)/H_old                               (0 where a denominator is 0),

each layer's change telescopes as ``A1 Z1 - A0 Z0 = A_sel dZ + dA Z_sel`` with
``(A_sel, Z_sel) = (A0, Z_new)`` if ``dA >= 0`` else ``(A1, Z_old)``. Expanding down the layers
gives one exact term per path and per "switch" layer ``t`` (the layer whose ``dA`` is used):
above ``t`` the weights are ``A_sel`` and the multipliers ``m_D``; below ``t`` the weights and
multipliers are those of the state chosen at ``t`` (new if ``dA^t >= 0``). The sum over all paths
through at least one changed edge equals ``Y_new - Y_old`` exactly (*completeness*).

The Shapley game of a path has the changed layer edges on it as players; ``v(S)`` is the path's
contribution with the layer edges outside ``S`` held at their old weights. When the path has changed
edges below the switch but all are outside ``S``, the part below ``t`` is the old state (old weights
and ``m_old``). For ``L = 2`` this is the official code's ``f4``/``f5``; ``v(all) = c(p)`` and
``v(empty) = 0``, so the Shapley values of a path sum to its contribution.

Two paths behind one function: ``method="vectorised"`` (paths as integer arrays built by CSR
expansion, contributions as batched matrix products, scatter-add into layer edges) and
``method="loop"`` (a Python DFS anchored at the changed edges and a per-path loop with
dictionaries, like the official code).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .graphs import EvolvingGraph
from .model import Target, WeightedGCN, forward_numpy, forward_numpy_update

__all__ = ["EdgeIndex", "edge_index", "Paths", "message_flows", "relu_multipliers",
           "coalition_values", "shapley_from_values", "shapley_bruteforce", "Attribution",
           "explain_change", "METHODS"]

METHODS = ("vectorised", "loop")


@dataclass
class EdgeIndex:
    """The union support of ``A0`` and ``A1`` as directed edges ``src -> dst`` sorted by
    ``(dst, src)`` (CSR rows = targets), with both snapshots' weights and the changed mask."""

    n: int
    src: np.ndarray
    dst: np.ndarray
    w0: np.ndarray
    w1: np.ndarray
    changed: np.ndarray
    indptr_in: np.ndarray
    out_order: np.ndarray
    indptr_out: np.ndarray

    @property
    def n_edges(self) -> int:
        return len(self.src)

    def lookup(self, src, dst) -> np.ndarray:
        """Edge ids of ``src -> dst`` (-1 where absent)."""
        key = self.dst.astype(np.int64) * self.n + self.src
        q = np.asarray(dst, dtype=np.int64) * self.n + np.asarray(src, dtype=np.int64)
        pos = np.searchsorted(key, q)
        pos = np.minimum(pos, len(key) - 1)
        return np.where(key[pos] == q, pos, -1)

    def adjacency(self, w: np.ndarray) -> sp.csr_matrix:
        """``A[dst, src] = w`` as a CSR matrix."""
        return sp.csr_matrix((w, (self.dst, self.src)), shape=(self.n, self.n))


def _stable_order(values: np.ndarray, n: int) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` for integers in ``[0, n)``: numpy radix-sorts 8- and
    16-bit integers in linear time, so small graphs take that path."""
    if n <= np.iinfo(np.uint16).max + 1:
        values = values.astype(np.uint16)
    return np.argsort(values, kind="stable")


def _coalesced_keys(A: sp.csr_matrix, n: int):
    """Row-major keys ``dst * n + src`` (sorted) and data of a coalesced CSR matrix."""
    A = sp.csr_matrix(A, copy=True)
    A.sum_duplicates()                      # also sorts the column indices of every row
    rows = np.repeat(np.arange(A.shape[0], dtype=np.int64), np.diff(A.indptr))
    return rows * n + A.indices, A.data


def edge_index(A0: sp.spmatrix, A1: sp.spmatrix, atol: float = 1e-12) -> EdgeIndex:
    """Build the :class:`EdgeIndex` of two snapshots (``A[k, j]``: message ``j -> k``)."""
    if A0.shape != A1.shape or A0.shape[0] != A0.shape[1]:
        raise ValueError(f"A0 and A1 must be square and of one shape, got {A0.shape} and {A1.shape}")
    n = A0.shape[0]
    k0, d0 = _coalesced_keys(A0, n)
    k1, d1 = _coalesced_keys(A1, n)
    # both key lists are sorted: a stable sort of their concatenation is a linear-time merge
    keys = np.sort(np.r_[k0, k1], kind="stable")
    keys = keys[np.r_[True, keys[1:] != keys[:-1]]] if len(keys) else keys
    dst, src = keys // n, keys % n

    def weights(k, d):  # coalesced: no duplicate keys, so plain assignment is exact
        w = np.zeros(len(keys))
        w[np.searchsorted(keys, k)] = d
        return w

    w0, w1 = weights(k0, d0), weights(k1, d1)
    indptr_in = np.searchsorted(dst, np.arange(n + 1))
    out_order = _stable_order(src, n)   # keys are dst-major: a stable sort by src gives (src, dst)
    indptr_out = np.searchsorted(src[out_order], np.arange(n + 1))
    return EdgeIndex(n, src, dst, w0, w1, np.abs(w1 - w0) > atol, indptr_in, out_order, indptr_out)


@dataclass
class Paths:
    """Message flows as arrays: ``nodes`` (P, L+1) = ``i_0 .. i_L``; ``edges`` (P, L) the edge id of
    the layer-``l`` edge ``i_l -> i_{l+1}``."""

    nodes: np.ndarray
    edges: np.ndarray

    def __len__(self) -> int:
        return len(self.nodes)

    def sorted(self) -> "Paths":
        o = np.lexsort(self.nodes.T[::-1])
        return Paths(self.nodes[o], self.edges[o])


def _expand(nodes: np.ndarray, indptr: np.ndarray, order: np.ndarray | None = None):
    """For each node, its CSR neighbour slots: (row in ``nodes``, edge id)."""
    start = indptr[nodes]
    cnt = indptr[nodes + 1] - start
    rep = np.repeat(np.arange(len(nodes)), cnt)
    off = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    pos = start[rep] + off
    return rep, (pos if order is None else order[pos])


def _reach(ei: EdgeIndex, targets: np.ndarray | None, L: int) -> list[np.ndarray]:
    """``R[s]``: nodes from which a target is reached by exactly ``s`` message steps."""
    R = [np.ones(ei.n, bool) if targets is None else np.isin(np.arange(ei.n), targets)]
    for _ in range(L):
        m = np.zeros(ei.n, bool)
        m[ei.src[R[-1][ei.dst]]] = True
        R.append(m)
    return R


def message_flows(ei: EdgeIndex, n_layers: int, targets=None, method: str = "vectorised") -> Paths:
    """All length-``n_layers`` message flows ending in ``targets`` (None: every node) that contain
    at least one changed layer edge. ``method="vectorised"``: anchored at each changed edge (its
    lowest changed layer), expanded backwards over unchanged and forwards over all edges with CSR
    slicing; ``"loop"``: a Python DFS anchored at each changed edge, as the official code does."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    L = n_layers
    if L < 1:
        raise ValueError(f"n_layers must be >= 1, got {L}")
    tg = None if targets is None else np.unique(np.atleast_1d(np.asarray(targets, dtype=np.int64)))
    if tg is not None and (tg.min() < 0 or tg.max() >= ei.n):
        raise ValueError(f"target nodes must lie in [0, {ei.n})")
    if method == "loop":
        return _flows_dfs(ei, L, tg)
    R = _reach(ei, tg, L)
    ch = np.flatnonzero(ei.changed)
    all_nodes, all_edges = [], []
    for t in range(L):
        e = ch[R[L - t - 1][ei.dst[ch]]]  # dst of the layer-t edge must reach a target in L-t-1 steps
        nodes = np.stack([ei.src[e], ei.dst[e]], 1)
        edges = e[:, None]
        for _ in range(t):  # backwards over unchanged edges (t = the lowest changed layer)
            rep, eid = _expand(nodes[:, 0], ei.indptr_in)
            keep = ~ei.changed[eid]
            rep, eid = rep[keep], eid[keep]
            nodes = np.column_stack([ei.src[eid], nodes[rep]])
            edges = np.column_stack([eid, edges[rep]])
        for s in range(L - t - 1):  # forwards over any edge, pruned by reachability
            rep, eid = _expand(nodes[:, -1], ei.indptr_out, ei.out_order)
            keep = R[L - t - 2 - s][ei.dst[eid]]
            rep, eid = rep[keep], eid[keep]
            nodes = np.column_stack([nodes[rep], ei.dst[eid]])
            edges = np.column_stack([edges[rep], eid])
        all_nodes.append(nodes)
        all_edges.append(edges)
    return Paths(np.concatenate(all_nodes).astype(np.int64), np.concatenate(all_edges).astype(np.int64))


def _flows_dfs(ei: EdgeIndex, L: int, tg) -> Paths:
    """Python DFS anchored at each changed edge, as the official code enumerates flows: a changed
    edge placed at layer ``t`` (the flow's lowest changed layer) is extended backwards over ``t``
    unchanged edges and forwards over ``L - t - 1`` edges of any kind to a target."""
    into = {k: [] for k in range(ei.n)}
    out = {k: [] for k in range(ei.n)}
    for e in range(ei.n_edges):
        into[int(ei.dst[e])].append((int(ei.src[e]), e))
        out[int(ei.src[e])].append((int(ei.dst[e]), e))
    is_target = (lambda v: True) if tg is None else set(tg.tolist()).__contains__
    out_n, out_e = [], []

    def forward(nodes, eids, steps):
        if steps == 0:
            if is_target(nodes[-1]):
                out_n.append(nodes)
                out_e.append(eids)
            return
        for k, e in out[nodes[-1]]:
            forward(nodes + [k], eids + [e], steps - 1)

    def backward(nodes, eids, steps, t):
        if steps == 0:
            forward(nodes, eids, L - t - 1)
            return
        for j, e in into[nodes[0]]:
            if not ei.changed[e]:
                backward([j] + nodes, [e] + eids, steps - 1, t)

    for e in np.flatnonzero(ei.changed).tolist():
        for t in range(L):
            backward([int(ei.src[e]), int(ei.dst[e])], [e], t, t)
    if not out_n:
        return Paths(np.zeros((0, L + 1), np.int64), np.zeros((0, L), np.int64))
    return Paths(np.array(out_n, dtype=np.int64), np.array(out_e, dtype=np.int64))


def _ratio(a, b):
    out = np.zeros_like(a)
    np.divide(a, b, out=out, where=b != 0)
    return out


def relu_multipliers(H_old: np.ndarray, H_new: np.ndarray):
    """``(m_D, m_new, m_old)`` of one hidden layer (rescale rule; 0 where a denominator is 0)."""
    r = lambda h: np.maximum(h, 0.0)
    return _ratio(r(H_new) - r(H_old), H_new - H_old), _ratio(r(H_new), H_new), _ratio(r(H_old), H_old)


def _setup(model_or_weights, graph: EvolvingGraph, paths: Paths | None = None,
           ei: EdgeIndex | None = None):
    Ws = model_or_weights.numpy_weights() if isinstance(model_or_weights, WeightedGCN) else \
        [np.asarray(w, dtype=np.float64) for w in model_or_weights]
    Hs0, Y0 = forward_numpy(Ws, graph.X, graph.A0)
    if ei is None:
        Hs1, Y1 = forward_numpy(Ws, graph.X, graph.A1)
    else:  # only the neighbourhood of the change is recomputed (equal to the full pass)
        moved = ei.dst[ei.w0 != ei.w1]

        def out_neighbours(nodes):
            return ei.dst[_expand(nodes, ei.indptr_out, ei.out_order)[1]]

        Hs1, Y1 = forward_numpy_update(Ws, graph.X, graph.A0, graph.A1, Hs0, Y0, moved,
                                       out_neighbours)
    mult = []  # hidden layers 1..L-1; only the rows that flows pass through are needed
    for l, (h0, h1) in enumerate(zip(Hs0, Hs1)):
        if paths is None:
            mult.append(relu_multipliers(h0, h1))
            continue
        rows = np.unique(paths.nodes[:, l + 1])
        full = [np.zeros_like(h0) for _ in range(3)]
        for f, m in zip(full, relu_multipliers(h0[rows], h1[rows])):
            f[rows] = m
        mult.append(tuple(full))
    return Ws, Y0, Y1, mult


def coalition_values(Ws, X, ei: EdgeIndex, paths: Paths, mult) -> np.ndarray:
    """``V`` (P, 2^L, C): each path's value ``v(S)`` for every coalition ``S`` of its layers
    (bit ``l`` of the index: the layer-``l`` edge is in ``S``); ``V[:, -1]`` is the contribution.

    The value is multilinear: the edge weights are scalars per path and factor out, so only the
    chain ``(...((X W_0)[i_0] * m[i_1]) W_1 ...) * m[i_{L-1}]) W_{L-1}`` depends on the multipliers, and
    it takes one of ``2L - 1`` forms (switch layer ``t``, state new/old). They are computed once per
    path as batched matrix products; each coalition only recombines scalars.
    """
    L = len(Ws)
    P = len(paths)
    E = paths.edges
    ch = ei.changed[E]                                 # (P, L) the players
    w0, w1 = ei.w0[E], ei.w1[E]
    dA = w1 - w0
    a_sel = np.where(dA >= 0, w0, w1)                  # weight above the switch
    U = X[paths.nodes[:, 0]] @ Ws[0]                   # (X W_0)[i_0]
    C = Ws[-1].shape[1]

    def chain(t, new):
        g = U
        for l in range(L - 1):
            mD, mN, mO = mult[l]
            m = (mN if new else mO) if l + 1 <= t else mD
            g = (g * m[paths.nodes[:, l + 1]]) @ Ws[l + 1]
        return g

    chains = {}
    for t in range(L):
        chains[t, True] = chain(t, True)
        chains[t, False] = chains[t, True] if t == 0 else chain(t, False)
    V = np.zeros((P, 2 ** L, C))
    for S in range(1, 2 ** L):
        inS = np.array([(S >> l) & 1 for l in range(L)], bool)[None, :] & ch   # effective S
        for t in range(L):
            act = inS[:, t]
            if not act.any():
                continue
            new_state = dA[:, t] >= 0
            lower_ch = ch[:, :t].any(1)
            lower_in = inS[:, :t].any(1)
            use_new = new_state & ~(lower_ch & ~lower_in)   # all changed lower edges outside S: old
            coef = np.where(act, dA[:, t], 0.0)
            for l in range(L):
                if l > t:
                    coef = coef * np.where(inS[:, l], a_sel[:, l], w0[:, l])
                elif l < t:
                    coef = coef * np.where(inS[:, l] & use_new, w1[:, l], w0[:, l])
            g = np.where(use_new[:, None], chains[t, True], chains[t, False]) if t > 0 else chains[t, True]
            V[:, S] += coef[:, None] * g
    return V


def shapley_from_values(V: np.ndarray) -> np.ndarray:
    """Exact Shapley values ``phi`` (P, L, C) from coalition values ``V`` (P, 2^L, C):
    ``phi_l = sum_{S not containing l} |S|!(L-|S|-1)!/L! (v(S+l) - v(S))``."""
    n_coal = V.shape[1]
    L = int(round(math.log2(n_coal)))
    if 2 ** L != n_coal:
        raise ValueError(f"V must have 2^L coalitions on axis 1, got {n_coal}")
    phi = np.zeros((V.shape[0], L) + V.shape[2:])
    for l in range(L):
        for S in range(n_coal):
            if (S >> l) & 1:
                continue
            s = bin(S).count("1")
            w = math.factorial(s) * math.factorial(L - s - 1) / math.factorial(L)
            phi[:, l] += w * (V[:, S | (1 << l)] - V[:, S])
    return phi


def shapley_bruteforce(v, n_players: int) -> np.ndarray:
    """Shapley values by averaging marginal contributions over all orderings (tests only);
    ``v`` maps a frozenset of players to a value."""
    phi = np.zeros(n_players)
    perms = list(itertools.permutations(range(n_players)))
    for order in perms:
        S = frozenset()
        for p in order:
            phi[p] += v(S | {p}) - v(S)
            S = S | {p}
    return phi / len(perms)


@dataclass
class Attribution:
    """The explanation of one target's change G0 -> G1.

    ``y_old``/``y_new``: the target's logits; ``paths`` and ``contrib`` (P, C) their exact
    contributions; ``layer_edges`` (M, 3) rows ``(layer, src, dst)`` of the changed layer edges
    with ``phi_layer`` (M, C); ``input_edges`` (Q, 2) undirected changed pairs ``(u <= v)`` with
    ``phi_input`` (Q, C) = the sum of their layer edges' values over layers and directions.
    """

    target: Target
    y_old: np.ndarray
    y_new: np.ndarray
    paths: Paths
    contrib: np.ndarray
    layer_edges: np.ndarray
    layer_eids: np.ndarray
    phi_layer: np.ndarray
    input_edges: np.ndarray
    phi_input: np.ndarray
    input_members: list
    ei: EdgeIndex
    phi_paths: np.ndarray | None = None   # (P, L, C) per-flow Shapley values (vectorised method only)

    @property
    def delta(self) -> np.ndarray:
        return self.y_new - self.y_old

    def completeness_error(self) -> dict:
        """max |sum - delta| for path contributions, layer-edge and input-edge attributions."""
        d = self.delta
        return {"paths": float(np.abs(self.contrib.sum(0) - d).max(initial=0.0)),
                "layer_edges": float(np.abs(self.phi_layer.sum(0) - d).max(initial=0.0)),
                "input_edges": float(np.abs(self.phi_input.sum(0) - d).max(initial=0.0))}


def _readout(model, target: Target, n: int):
    """The head as a linear map of a path's end-node contribution: returns f(end, c) -> (P, C')."""
    if target.kind == "node":
        return lambda end, c: c * (end == target.index)[:, None]
    if target.kind == "graph":
        return lambda end, c: c / n
    W = model.link.weight.detach().numpy()
    C = W.shape[1] // 2
    Wu, Wv = W[:, :C], W[:, C:]
    u, v = target.index
    return lambda end, c: (end == u)[:, None] * (c @ Wu.T) + (end == v)[:, None] * (c @ Wv.T)


def explain_change(model: WeightedGCN, graph: EvolvingGraph, target: Target | None = None,
                   method: str = "vectorised", atol: float = 1e-12) -> Attribution:
    """Attribute the change of ``model``'s ``target`` logits from ``graph.A0`` to ``graph.A1``
    to message flows, layer edges and input edges (the paper's method). Introduced in
    ``16-evolving-gnn-explanations/01-message-flow-attribution``.

    ``method``: ``"vectorised"`` (default) or ``"loop"`` (the official code's per-path structure).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    target = target or Target(model.head)
    if target.kind != model.head:
        raise ValueError(f"a {target.kind!r} target for a model with a {model.head!r} head")
    if graph.X.shape[1] != model.weights[0].shape[0]:
        raise ValueError(f"graph has {graph.X.shape[1]} features, the model expects {model.weights[0].shape[0]}")
    ei = edge_index(graph.A0, graph.A1, atol)
    L = model.n_layers
    tg = {"node": [target.index] if target.kind == "node" else None, "graph": None,
          "link": list(target.index) if target.kind == "link" else None}[target.kind]
    paths = message_flows(ei, L, tg, method=method)
    Ws, Y0, Y1, mult = _setup(model, graph, paths, ei)
    if target.kind == "graph":   # the mean readout, without a round trip through torch
        y_old, y_new = Y0.mean(0), Y1.mean(0)
    else:
        with np.errstate(all="ignore"):
            import torch
            with torch.no_grad():
                y_old = model.readout(torch.from_numpy(Y0), target).numpy()
                y_new = model.readout(torch.from_numpy(Y1), target).numpy()
    read = _readout(model, target, graph.n_nodes)
    if method == "vectorised":
        V = coalition_values(Ws, graph.X, ei, paths, mult) if len(paths) else np.zeros((0, 2 ** L, Ws[-1].shape[1]))
        phi = shapley_from_values(V)                       # (P, L, C)
        end = paths.nodes[:, -1]
        contrib = read(end, V[:, -1])
        phi = np.stack([read(end, phi[:, l]) for l in range(L)], 1)
        C = phi.shape[2]
        E = ei.n_edges
        flat = (np.arange(L)[None, :] * E + paths.edges).ravel()
        full = np.stack([np.bincount(flat, weights=phi[:, :, c].ravel(), minlength=L * E)
                         for c in range(C)], 1).reshape(L, E, C)
    else:
        contrib, full = _loop_attribution(Ws, graph.X, ei, paths, mult, read, L)
        phi = None
    # candidates: changed layer edges that lie on at least one of the target's flows
    used = np.zeros((L, ei.n_edges), bool)
    for l in range(L):
        used[l, paths.edges[:, l]] = True
    used &= ei.changed[None, :]
    ll, ee = np.nonzero(used)
    layer_edges = np.stack([ll, ei.src[ee], ei.dst[ee]], 1).astype(np.int64).reshape(-1, 3)
    layer_eids = ee.astype(np.int64)
    phi_layer = full[ll, ee].reshape(len(ll), full.shape[2])
    ch = np.unique(ee)
    a, b = np.minimum(ei.src[ch], ei.dst[ch]), np.maximum(ei.src[ch], ei.dst[ch])
    pkey = a.astype(np.int64) * ei.n + b
    order = np.argsort(pkey, kind="stable")
    sk = pkey[order]
    first = np.r_[True, sk[1:] != sk[:-1]] if len(sk) else np.zeros(0, bool)
    inv = np.empty(len(pkey), np.int64)
    inv[order] = np.cumsum(first) - 1
    uk = sk[first]
    pairs = np.stack([uk // ei.n, uk % ei.n], 1) if len(uk) else np.zeros((0, 2), np.int64)
    tot = full.sum(0)[ch]
    phi_input = np.zeros((len(pairs), full.shape[2]))
    np.add.at(phi_input, inv, tot)
    pair_of_edge = np.full(ei.n_edges, -1)
    pair_of_edge[ch] = inv
    row_pair = pair_of_edge[layer_eids]
    members = [np.flatnonzero(row_pair == q) for q in range(len(pairs))]
    return Attribution(target, y_old, y_new, paths, contrib, layer_edges, layer_eids, phi_layer,
                       pairs.astype(np.int64), phi_input, members, ei, phi)


def _loop_attribution(Ws, X, ei, paths, mult, read, L):
    """Reference: one path at a time, values of each coalition written out term by term,
    accumulated into a dict keyed by ``(layer, edge)`` -- the official code's structure."""
    XW = X @ Ws[0]
    C_out = None
    acc, contribs = {}, []
    for p in range(len(paths)):
        nodes = [int(v) for v in paths.nodes[p]]
        eids = [int(e) for e in paths.edges[p]]
        w0 = [ei.w0[e] for e in eids]
        w1 = [ei.w1[e] for e in eids]
        players = [l for l in range(L) if ei.changed[eids[l]]]

        def value(S):
            total = 0.0
            for t in S:
                dA_t = w1[t] - w0[t]
                lower_changed = [l for l in players if l < t]
                below_old = bool(lower_changed) and not any(l in S for l in lower_changed)
                new = dA_t >= 0 and not below_old
                g = XW[nodes[0]].copy()
                for l in range(L):
                    if l > t:
                        a = (w0[l] if w1[l] - w0[l] >= 0 else w1[l]) if l in S else w0[l]
                    elif l == t:
                        a = dA_t
                    else:
                        a = w1[l] if (l in S and new) else w0[l]
                    g = g * a
                    if l < L - 1:
                        mD, mN, mO = mult[l]
                        j = nodes[l + 1]
                        m = mD[j] if l + 1 > t else (mN[j] if new else mO[j])
                        g = (g * m) @ Ws[l + 1]
                total = total + g
            return total

        n = len(players)
        vals = {}
        for r in range(n + 1):
            for S in itertools.combinations(players, r):
                vals[frozenset(S)] = value(S) if S else 0.0
        end = np.array([nodes[-1]])
        c = read(end, np.atleast_2d(vals[frozenset(players)]))[0]
        contribs.append(c)
        for i in players:
            others = [q for q in players if q != i]
            phi = 0.0
            for r in range(n):
                w = math.factorial(r) * math.factorial(n - r - 1) / math.factorial(n)
                for S in itertools.combinations(others, r):
                    S = frozenset(S)
                    phi = phi + w * (np.asarray(vals[S | {i}]) - np.asarray(vals[S]))
            key = (i, eids[i])
            val = read(end, np.atleast_2d(phi))[0]
            acc[key] = acc.get(key, 0.0) + val
        C_out = len(c)
    if C_out is None:
        C_out = Ws[-1].shape[1]
    full = np.zeros((L, ei.n_edges, C_out))
    for (l, e), v in acc.items():
        full[l, e] += v
    contrib = np.array(contribs).reshape(-1, C_out)
    return contrib, full
