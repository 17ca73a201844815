"""Evolving graphs G0 -> G1: weighted adjacencies, generators and a loader for the paper's formats.

A graph is held as a row-*target* matrix: ``A[k, j]`` is the weight of the message ``j -> k``
(the GCN computes ``H = A X W``). Both snapshots are normalised with self-loops,
``A = D^{-1/2} (W + I) D^{-1/2}``, as in the official code; an edge is *changed* when its
normalised weight differs between the snapshots. Introduced in notebook
``16-evolving-gnn-explanations/01-message-flow-attribution``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import numpy as np
import scipy.sparse as sp

__all__ = ["EvolvingGraph", "normalize_adjacency", "raw_weights", "sbm_evolving", "evolve",
           "window_evolution", "molecule_like", "networkx_graph", "NETWORKX_GRAPHS",
           "ba_motif_pair", "MOTIFS", "load_edge_list", "EVOLVE_SCHEMES", "drift_evolution",
           "from_weights", "real_evolving_graph", "REAL_EVOLUTIONS"]

EVOLVE_SCHEMES = ("drift", "edit", "window")
NETWORKX_GRAPHS = ("karate", "les_miserables", "florentine")
MOTIFS = ("house", "cycle")


@dataclass
class EvolvingGraph:
    """Two snapshots of one graph on the same nodes.

    ``X`` (N, F) node features; ``A0``/``A1`` (N, N) normalised weighted adjacencies
    (``A[k, j]``: message ``j -> k``); ``W0``/``W1`` the raw symmetric weights before
    normalisation; ``y`` node labels (or a graph label, shape ()); ``motif`` a boolean node mask
    for motif case studies.
    """

    X: np.ndarray
    A0: sp.csr_matrix
    A1: sp.csr_matrix
    W0: sp.csr_matrix | None = None
    W1: sp.csr_matrix | None = None
    y: np.ndarray | None = None
    motif: np.ndarray | None = None
    name: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.X = np.asarray(self.X, dtype=np.float64)
        if self.X.ndim != 2:
            raise ValueError(f"X must be (n_nodes, n_features), got shape {self.X.shape}")
        n = self.X.shape[0]
        for name in ("A0", "A1"):
            A = sp.csr_matrix(getattr(self, name), dtype=np.float64)
            if A.shape != (n, n):
                raise ValueError(f"{name} must be ({n}, {n}) to match X, got {A.shape}")
            A.sort_indices()
            setattr(self, name, A)

    @property
    def n_nodes(self) -> int:
        return self.X.shape[0]

    def changed_edges(self, atol: float = 1e-12) -> np.ndarray:
        """The directed changed entries ``(src j, dst k)`` with ``|A1[k,j] - A0[k,j]| > atol``."""
        D = (self.A1 - self.A0).tocoo()
        m = np.abs(D.data) > atol
        return np.stack([D.col[m], D.row[m]], axis=1)


def raw_weights(edges: np.ndarray, n: int, weights: np.ndarray | None = None) -> sp.csr_matrix:
    """A symmetric raw weight matrix from an (E, 2) undirected edge list (duplicates summed)."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    w = np.ones(len(edges)) if weights is None else np.asarray(weights, dtype=np.float64)
    if len(w) != len(edges):
        raise ValueError(f"{len(w)} weights for {len(edges)} edges")
    if len(edges) and (edges.min() < 0 or edges.max() >= n):
        raise ValueError(f"edge endpoints must lie in [0, {n}), got {edges.min()}..{edges.max()}")
    keep = edges[:, 0] != edges[:, 1]
    e, w = edges[keep], w[keep]
    W = sp.coo_matrix((np.r_[w, w], (np.r_[e[:, 0], e[:, 1]], np.r_[e[:, 1], e[:, 0]])), shape=(n, n))
    return W.tocsr()


def normalize_adjacency(W: sp.spmatrix, self_loops: bool = True) -> sp.csr_matrix:
    """``D^{-1/2} (W + I) D^{-1/2}``: the GCN propagation matrix (Kipf & Welling; official code)."""
    W = sp.csr_matrix(W, dtype=np.float64)
    if W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be square, got {W.shape}")
    if self_loops:
        W = W + sp.eye(W.shape[0], format="csr")
    d = np.asarray(W.sum(axis=1)).ravel()
    inv = np.zeros_like(d)
    inv[d > 0] = d[d > 0] ** -0.5
    D = sp.diags(inv)
    A = (D @ W @ D).tocsr()
    A.eliminate_zeros()
    A.sort_indices()
    return A


def _pair(X, W0, W1, **kw) -> EvolvingGraph:
    return EvolvingGraph(X=X, A0=normalize_adjacency(W0), A1=normalize_adjacency(W1),
                         W0=sp.csr_matrix(W0), W1=sp.csr_matrix(W1), **kw)


def evolve(W0: sp.spmatrix, scheme: str = "drift", *, drift: float = 0.3, n_add: int = 0,
           n_remove: int = 0, frac: float = 0.75, seed: int = 0,
           protect: np.ndarray | None = None) -> sp.csr_matrix:
    """The raw weights of G1 from those of G0.

    ``scheme``: ``"drift"`` multiplies every edge weight by ``exp(drift * N(0,1))`` and then
    applies ``n_add``/``n_remove`` edits; ``"edit"`` only adds/removes edges; ``"window"`` is the
    paper's sliding window (use :func:`window_evolution`, which needs the edge order).
    ``protect`` (node mask) keeps edges between protected nodes untouched.
    """
    if scheme not in EVOLVE_SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; valid: {', '.join(EVOLVE_SCHEMES)}")
    if scheme == "window":
        raise ValueError("scheme 'window' needs the edge order: call window_evolution(edges, n, frac)")
    rng = np.random.default_rng(seed)
    W = sp.triu(sp.csr_matrix(W0, dtype=np.float64), k=1).tocoo()
    n = W.shape[0]
    r, c, w = W.row.copy(), W.col.copy(), W.data.copy()
    prot = np.zeros(len(r), bool) if protect is None else (protect[r] & protect[c])
    if scheme == "drift" and drift > 0:
        f = np.exp(drift * rng.standard_normal(len(w)))
        w = np.where(prot, w, w * f)
    if n_remove:
        cand = np.flatnonzero(~prot)
        if n_remove > len(cand):
            raise ValueError(f"cannot remove {n_remove} edges: only {len(cand)} removable")
        drop = rng.choice(cand, n_remove, replace=False)
        keep = np.ones(len(r), bool)
        keep[drop] = False
        r, c, w = r[keep], c[keep], w[keep]
    if n_add:
        have = set(zip(r.tolist(), c.tolist()))
        if n_add > n * (n - 1) // 2 - len(have):
            raise ValueError(f"cannot add {n_add} edges to a graph with {n} nodes and {len(have)} edges")
        added = []
        while len(added) < n_add:
            i, j = sorted(rng.choice(n, 2, replace=False).tolist())
            if (i, j) not in have:
                have.add((i, j))
                added.append((i, j))
        a = np.array(added)
        r, c = np.r_[r, a[:, 0]], np.r_[c, a[:, 1]]
        w = np.r_[w, rng.uniform(0.5, 1.5, len(a))]
    return raw_weights(np.stack([r, c], 1), n, w)


def drift_evolution(drift: float = 0.3, n_add: int = 0, n_remove: int = 0):
    """The chapter's evolution as a function ``(W0, seed) -> W1``: edge weights drift by
    ``exp(drift * N(0, 1))``, then ``n_add`` edges are added and ``n_remove`` removed
    (:func:`evolve` with ``scheme="drift"``). Chapter 16, ``01-message-flow-attribution``."""
    def evolution(W0: sp.spmatrix, seed: int = 0) -> sp.csr_matrix:
        return evolve(W0, "drift", drift=drift, n_add=n_add, n_remove=n_remove, seed=seed)
    return evolution


def _evolved(W0: sp.csr_matrix, evolution, seed: int) -> sp.csr_matrix:
    """Apply a user's ``evolution(W0, seed) -> W1`` and check what it returns."""
    if not callable(evolution):
        raise TypeError(f"evolution must be a function (W0, seed) -> W1, got {type(evolution).__name__}")
    W1 = evolution(W0, seed)
    if not sp.issparse(W1) and not isinstance(W1, np.ndarray):
        raise TypeError("evolution must return the new raw weights as a scipy sparse matrix or an "
                        f"array, got {type(W1).__name__}")
    W1 = sp.csr_matrix(W1, dtype=np.float64)
    if W1.shape != W0.shape:
        raise ValueError(f"evolution returned a {W1.shape} matrix for a graph of {W0.shape[0]} nodes; "
                         "the nodes must stay the same (weights may change, edges come and go)")
    if (W1 != W1.T).nnz:
        raise ValueError("evolution returned non-symmetric weights; an undirected graph's W1 must "
                         "equal W1.T (build it with raw_weights(edges, n, w))")
    if W1.nnz and W1.data.min() < 0:
        raise ValueError("evolution returned negative edge weights; weights must be >= 0")
    return W1


def from_weights(X: np.ndarray, W0: sp.spmatrix, evolution=None, *, y: np.ndarray | None = None,
                 seed: int = 0, name: str = "") -> EvolvingGraph:
    """An :class:`EvolvingGraph` from node features ``X``, the first snapshot's raw symmetric
    weights ``W0`` and ``evolution(W0, seed) -> W1`` (default: :func:`drift_evolution` with the
    chapter's drift 0.3 and no edits). Chapter 16, ``01-message-flow-attribution``."""
    W0 = sp.csr_matrix(W0, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != W0.shape[0]:
        raise ValueError(f"X must be (n_nodes, n_features) with n_nodes = {W0.shape[0]}, got {X.shape}")
    W1 = _evolved(W0, drift_evolution() if evolution is None else evolution, seed)
    return _pair(X, W0, W1, y=y, name=name)


def window_evolution(edges: np.ndarray, n: int, frac: float = 0.75) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """The paper's protocol for static data sets: edges in stored order, G0 = the first ``frac``
    of the list, G1 = the last ``frac`` (MUTAG: 3/4; ClinTox 2/5; IMDB/REDDIT 2/3)."""
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    edges = np.asarray(edges).reshape(-1, 2)
    m = int(round(frac * len(edges)))
    return raw_weights(edges[:m], n), raw_weights(edges[len(edges) - m:], n)


def sbm_evolving(n_nodes: int = 60, n_blocks: int = 3, p_in: float = 0.2, p_out: float = 0.02,
                 n_features: int = 8, drift: float = 0.3, n_add: int = 5, n_remove: int = 5,
                 seed: int = 0, evolution=None) -> EvolvingGraph:
    """A stochastic-block-model graph whose edge weights drift and whose edges are added/removed
    (``evolution(W0, seed) -> W1`` replaces that: default :func:`drift_evolution` with
    ``drift``, ``n_add``, ``n_remove``).

    Features are a noisy one-hot of the block (first ``n_blocks`` columns) plus Gaussian noise;
    ``y`` is the block. Used in ``01-message-flow-attribution``.
    """
    if n_blocks < 1 or n_nodes < n_blocks:
        raise ValueError(f"need 1 <= n_blocks <= n_nodes, got n_blocks={n_blocks}, n_nodes={n_nodes}")
    rng = np.random.default_rng(seed)
    sizes = [n_nodes // n_blocks + (i < n_nodes % n_blocks) for i in range(n_blocks)]
    P = np.full((n_blocks, n_blocks), p_out) + np.eye(n_blocks) * (p_in - p_out)
    G = nx.stochastic_block_model(sizes, P.tolist(), seed=int(rng.integers(2**31)))
    y = np.repeat(np.arange(n_blocks), sizes)
    edges = np.array(G.edges(), dtype=np.int64).reshape(-1, 2)
    W0 = raw_weights(edges, n_nodes, rng.uniform(0.5, 1.5, len(edges)))
    W1 = _evolved(W0, evolution or drift_evolution(drift, n_add, n_remove), seed + 1)
    X = 0.5 * rng.standard_normal((n_nodes, n_features))
    X[np.arange(n_nodes), y % n_features] += 1.0
    return _pair(X, W0, W1, y=y, name=f"sbm{n_nodes}")


_ATOMS = ("C", "N", "O", "H")


def molecule_like(n_graphs: int = 40, seed: int = 0, frac: float = 0.75,
                  min_rings: int = 1, max_rings: int = 3) -> list[EvolvingGraph]:
    """MUTAG-like synthetic molecules: carbon rings and chains, half of them carrying an NO2
    group (N bonded to two O) on a ring carbon; graph label 1 = has NO2 ("mutagenic").

    Edges are stored in the order the molecule was built (rings, chains, then groups) and evolved
    with the paper's sliding window (``frac`` = 3/4 as for MUTAG). Node features: one-hot atom type
    (C, N, O, H). ``motif`` marks the NO2 atoms and their ring carbon.
    """
    rng = np.random.default_rng(seed)
    out = []
    for g in range(n_graphs):
        label = g % 2
        atoms, edges = [], []
        def add(a):
            atoms.append(a)
            return len(atoms) - 1
        ring_nodes = []
        for r in range(int(rng.integers(min_rings, max_rings + 1))):
            ring = [add("C") for _ in range(6)]
            edges += [(ring[i], ring[(i + 1) % 6]) for i in range(6)]
            if ring_nodes:  # fuse/attach to a previous ring by one bond
                edges.append((int(rng.choice(ring_nodes)), ring[0]))
            ring_nodes += ring
        for _ in range(int(rng.integers(0, 3))):  # a short carbon chain with an OH or H end
            prev = int(rng.choice(ring_nodes))
            for _ in range(int(rng.integers(1, 3))):
                c = add("C")
                edges.append((prev, c))
                prev = c
            edges.append((prev, add(str(rng.choice(["O", "H"])))))
        motif = np.zeros(0, bool)
        motif_nodes = []
        if label == 1:
            base = int(rng.choice(ring_nodes))
            n_ = add("N")
            o1, o2 = add("O"), add("O")
            edges += [(base, n_), (n_, o1), (n_, o2)]
            motif_nodes = [base, n_, o1, o2]
        for _ in range(int(rng.integers(1, 4))):  # hydrogens on free ring carbons
            edges.append((int(rng.choice(ring_nodes)), add("H")))
        n = len(atoms)
        X = np.zeros((n, len(_ATOMS)))
        X[np.arange(n), [_ATOMS.index(a) for a in atoms]] = 1.0
        motif = np.zeros(n, bool)
        motif[motif_nodes] = True
        e = np.array(edges, dtype=np.int64)
        # the stored edge order is shuffled in blocks so the window cuts through different parts
        e = e[rng.permutation(len(e))]
        W0, W1 = window_evolution(e, n, frac)
        out.append(_pair(X, W0, W1, y=np.array(label), motif=motif, name=f"mol{g}",
                         meta={"edges": e}))
    return out


def _networkx_base(name: str, seed: int = 0, weighted: bool | None = None):
    """``(G, y, edges, w, X)`` of one of networkx's bundled graphs (edges in networkx's stored
    order; ``weighted=None``: Les Miserables' co-appearance counts only)."""
    if name not in NETWORKX_GRAPHS:
        raise ValueError(f"unknown graph {name!r}; valid: {', '.join(NETWORKX_GRAPHS)}")
    if name == "karate":
        G = nx.karate_club_graph()
        y = np.array([0 if G.nodes[v]["club"] == "Mr. Hi" else 1 for v in G.nodes])
    else:
        G = nx.les_miserables_graph() if name == "les_miserables" else nx.florentine_families_graph()
        G = nx.convert_node_labels_to_integers(G, ordering="sorted")
        comms = nx.community.louvain_communities(G, weight="weight", seed=seed)
        y = np.zeros(G.number_of_nodes(), dtype=np.int64)
        for c, members in enumerate(sorted(comms, key=lambda s: min(s))):
            y[list(members)] = c
    weighted = (name == "les_miserables") if weighted is None else weighted
    n = G.number_of_nodes()
    edges = np.array(G.edges(), dtype=np.int64)
    w = np.array([float(G.edges[e].get("weight", 1.0)) if weighted else 1.0 for e in G.edges()])
    deg = np.array([d for _, d in G.degree()], dtype=np.float64)
    ld = np.log1p(deg)
    clus = np.array([nx.clustering(G, v) for v in range(n)])
    rank = np.argsort(np.argsort(deg, kind="stable"), kind="stable")
    dec = np.minimum(rank * 10 // n, 9)
    X = np.zeros((n, 12))
    X[:, 0] = (ld - ld.mean()) / (ld.std() + 1e-12)
    X[:, 1] = clus
    X[np.arange(n), 2 + dec] = 1.0
    return G, y, edges, w, X


def networkx_graph(name: str, drift: float = 0.3, n_add: int = 3, n_remove: int = 3,
                   seed: int = 0, evolution=None) -> EvolvingGraph:
    """One of networkx's built-in real graphs with evolving weights: ``"karate"`` (Zachary's karate
    club, labels = club), ``"les_miserables"`` (co-appearance weights, labels = Louvain
    communities), ``"florentine"`` (marriages, labels = Louvain communities).

    Features: standardised log-degree, clustering coefficient and a one-hot of the label-free
    degree rank decile (10 columns): the model must use the graph to classify. ``evolution(W0,
    seed) -> W1`` replaces the default drift (:func:`drift_evolution`, synthetic); for evolutions
    that are recorded or the paper's own protocol, see :func:`real_evolving_graph`.
    """
    G, y, edges, w, X = _networkx_base(name, seed)
    W0 = raw_weights(edges, len(y), w)
    W1 = _evolved(W0, evolution or drift_evolution(drift, n_add, n_remove), seed + 1)
    return _pair(X, W0, W1, y=y, name=name)


REAL_EVOLUTIONS = ("karate_split", "karate_window", "les_miserables_window", "florentine_window")


def real_evolving_graph(name: str, seed: int = 0, frac: float = 0.75) -> EvolvingGraph:
    """A real graph bundled with networkx under an evolution that is recorded or is the paper's own
    protocol (no synthetic noise). Chapter 16, ``02-layer-edges-vs-baselines``.

    - ``"karate_split"``: Zachary's karate club (weights = his counts of the contexts in which two
      members interacted) before and after the club split in two. ``G1`` cuts every tie between
      members who joined different clubs (the recorded outcome, networkx's ``club`` attribute) and
      keeps the others at their recorded weights; ``y`` = the club. The ties *after* the split were
      not recorded, so ``G1`` is the recorded outcome applied to the recorded ties.
    - ``"<graph>_window"`` (karate, les_miserables, florentine): the paper's protocol for static
      data sets: the edges in their stored order, ``G0`` = the first ``frac`` of the list, ``G1`` =
      the last ``frac`` (MUTAG: 3/4). Labels as in :func:`networkx_graph`.

    ``meta["removed"]`` lists the ties cut (split) or dropped/added (window) as ``(u, v)`` pairs.
    """
    if name not in REAL_EVOLUTIONS:
        raise ValueError(f"unknown real evolution {name!r}; valid: {', '.join(REAL_EVOLUTIONS)}")
    if name == "karate_split":
        G, y, edges, w, X = _networkx_base("karate", seed, weighted=True)
        cross = y[edges[:, 0]] != y[edges[:, 1]]
        W0 = raw_weights(edges, len(y), w)
        W1 = raw_weights(edges[~cross], len(y), w[~cross])
        return _pair(X, W0, W1, y=y, name=name, meta={"removed": [tuple(map(int, e)) for e in edges[cross]]})
    base = name[: -len("_window")]
    G, y, edges, w, X = _networkx_base(base, seed)
    if not 0 < frac < 1:
        raise ValueError(f"frac must be in (0, 1), got {frac}")
    m = int(round(frac * len(edges)))
    W0 = raw_weights(edges[:m], len(y), w[:m])
    W1 = raw_weights(edges[len(edges) - m:], len(y), w[len(edges) - m:])
    return _pair(X, W0, W1, y=y, name=name,
                 meta={"removed": [tuple(map(int, e)) for e in edges[: len(edges) - m]],
                       "added": [tuple(map(int, e)) for e in edges[m:]]})


def _ring(offset, k=5):
    return [(offset + i, offset + (i + 1) % k) for i in range(k)]


#: the chord that turns the 5-ring into a house (a square 0-2-3-4 with the roof 0-1-2)
_CHORD = (0, 2)


def ba_motif_pair(motif: str = "house", n_base: int = 20, m: int = 1, changed_ratio: float = 0.9,
                  seed: int = 0) -> EvolvingGraph:
    """The Table 8 case study (``16-evolving-gnn-explanations/03-motif-case-study``), built so that
    the motif drives the prediction: a Barabasi-Albert tree (``n_base`` nodes, ``m`` = 1) with a
    ``"house"`` or a ``"cycle"`` (a 5-ring) attached by one edge, as in BA-2Motifs. A house is a
    5-ring plus one chord, and the evolution toggles that chord: ``G1`` of a house deletes it (the
    motif becomes a cycle), ``G1`` of a cycle inserts it (it becomes a house); a fraction
    ``changed_ratio`` of the non-motif edges is re-weighted (factor uniform in [0.5, 1.5]). The
    class lies in the edges only: the node features (12) are the one-hot degree in the *union* of
    the snapshots (capped at 9, the same for both motifs), a constant, and a flag on the five motif
    nodes. ``y`` = 1 for a house on ``G0``, 0 for a cycle; ``motif`` marks its nodes;
    ``meta["toggled"]`` is the chord.
    """
    if motif not in MOTIFS:
        raise ValueError(f"unknown motif {motif!r}; valid: {', '.join(MOTIFS)}")
    if not 0 <= changed_ratio <= 1:
        raise ValueError(f"changed_ratio must be in [0, 1], got {changed_ratio}")
    if n_base < 2:
        raise ValueError(f"n_base must be >= 2, got {n_base}")
    rng = np.random.default_rng(seed)
    B = nx.barabasi_albert_graph(n_base, m, seed=int(rng.integers(2**31)))
    n = n_base + 5
    attach = (int(rng.integers(n_base)), n_base + int(rng.integers(5)))
    nonmotif = np.array(list(B.edges()) + [attach], dtype=np.int64).reshape(-1, 2)
    ring = np.array(_ring(n_base), dtype=np.int64)
    chord = np.array([[n_base + _CHORD[0], n_base + _CHORD[1]]], dtype=np.int64)
    w1 = np.ones(len(nonmotif))
    ch = rng.choice(len(nonmotif), int(round(changed_ratio * len(nonmotif))), replace=False)
    w1[ch] = rng.uniform(0.5, 1.5, len(ch))
    with_chord = np.vstack([nonmotif, ring, chord])
    without = np.vstack([nonmotif, ring])
    one = np.ones(len(ring))
    if motif == "house":
        W0 = raw_weights(with_chord, n)
        W1 = raw_weights(without, n, np.r_[w1, one])
    else:
        W0 = raw_weights(without, n)
        W1 = raw_weights(with_chord, n, np.r_[w1, one, 1.0])
    deg = np.asarray((raw_weights(with_chord, n) > 0).sum(axis=1)).ravel()
    X = np.zeros((n, 12))
    X[np.arange(n), np.minimum(deg, 9)] = 1.0
    X[:, 10] = 1.0
    mask = np.zeros(n, bool)
    mask[n_base:] = True
    X[mask, 11] = 1.0
    return _pair(X, W0, W1, y=np.array(int(motif == "house")), motif=mask,
                 name=f"ba-{motif}{seed}", meta={"toggled": tuple(int(v) for v in chord[0])})


def load_edge_list(path: str | Path, n_nodes: int | None = None, *, time_split: float | None = None,
                   window: float = 0.75) -> tuple[sp.csr_matrix, sp.csr_matrix, int]:
    """Load an evolving graph from an edge-list CSV in the paper's link-prediction formats
    (BC-OTC / BC-Alpha: ``source,target,rating,time``; UCI: ``source,target,time`` or with a
    weight). Node ids are re-indexed densely in order of appearance.

    With ``time_split`` in (0, 1): G0 = edges with time below that quantile, G1 = all edges
    (weights = |rating| or 1). Without it, the sliding ``window`` over the stored order.
    Returns ``(W0, W1, n_nodes)`` raw symmetric weights; normalise with
    :func:`normalize_adjacency`.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such edge-list file (expected CSV rows "
                                "'source,target[,weight],time' as in the paper's BC-OTC/BC-Alpha/UCI files)")
    rows = []
    with p.open() as fh:
        for line in csv.reader(fh):
            if not line or line[0].startswith("#"):
                continue
            try:
                rows.append([float(v) for v in line])
            except ValueError:
                if not rows:  # a header row
                    continue
                raise ValueError(f"{p}: non-numeric row {line!r}")
    if not rows:
        raise ValueError(f"{p}: no edges found")
    width = {len(r) for r in rows}
    if len(width) != 1 or width.pop() < 2:
        raise ValueError(f"{p}: rows must all have 2-4 numeric columns (source,target[,weight][,time])")
    R = np.array(rows)
    ids = {}
    src = np.array([ids.setdefault(int(v), len(ids)) for v in R[:, 0]])
    dst = np.array([ids.setdefault(int(v), len(ids)) for v in R[:, 1]])
    n = len(ids) if n_nodes is None else n_nodes
    if n < len(ids):
        raise ValueError(f"{p}: {len(ids)} distinct nodes but n_nodes={n_nodes}")
    e = np.stack([src, dst], 1)
    w = np.abs(R[:, 2]) if R.shape[1] >= 4 else np.ones(len(R))
    if time_split is not None:
        if not 0 < time_split < 1:
            raise ValueError(f"time_split must be in (0, 1), got {time_split}")
        t = R[:, -1]
        old = t <= np.quantile(t, time_split)
        return raw_weights(e[old], n, w[old]), raw_weights(e, n, w), n
    m = int(round(window * len(e)))
    return raw_weights(e[:m], n, w[:m]), raw_weights(e[len(e) - m:], n, w[len(e) - m:]), n
