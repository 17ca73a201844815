"""Chapter 16: message-flow attributions against brute force and closed forms on small graphs."""

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import iclr25.evolving_gnn_explanations as eg
from iclr25.profiles import ProfileError


def small_graph(seed=0, n=12):
    return eg.sbm_evolving(n, n_blocks=2, p_in=0.5, p_out=0.1, n_features=4, drift=0.4,
                           n_add=2, n_remove=2, seed=seed)


@pytest.mark.parametrize("L", [1, 2, 3, 4])
def test_flows_vectorised_equal_dfs(L):
    g = small_graph()
    ei = eg.edge_index(g.A0, g.A1)
    for tg in ([3], None):
        a = eg.message_flows(ei, L, tg).sorted()
        b = eg.message_flows(ei, L, tg, method="loop").sorted()
        assert np.array_equal(a.nodes, b.nodes) and np.array_equal(a.edges, b.edges)
        assert len(a) > 0
        assert ei.changed[a.edges].any(1).all()
        # edges match nodes
        assert np.array_equal(ei.src[a.edges], a.nodes[:, :-1]) and np.array_equal(ei.dst[a.edges], a.nodes[:, 1:])


def all_walks_bruteforce(A, L, k):
    n = A.shape[0]
    D = A.toarray()
    return [p for p in itertools.product(range(n), repeat=L + 1) if p[-1] == k
            and all(D[p[i + 1], p[i]] != 0 for i in range(L))]


def test_flows_count_bruteforce():
    g = small_graph(1, n=8)
    U = (abs(g.A0) + abs(g.A1)).tocsr()
    ei = eg.edge_index(g.A0, g.A1)
    for k in range(8):
        walks = all_walks_bruteforce(U, 2, k)
        chg = [p for p in walks if any(ei.changed[ei.lookup([p[i]], [p[i + 1]])[0]] for i in range(2))]
        assert len(eg.message_flows(ei, 2, [k])) == len(chg)


@pytest.mark.parametrize("head,L", [("node", 2), ("graph", 2), ("link", 2), ("node", 3), ("graph", 3), ("node", 4)])
def test_completeness_exact(head, L):
    g = small_graph(2)
    m = eg.WeightedGCN(4, 6, 3, L, head, seed=1)
    t = {"node": eg.Target("node", 4), "graph": eg.Target("graph"), "link": eg.Target("link", (1, 6))}[head]
    a = eg.explain_change(m, g, t)
    with torch.no_grad():
        y0 = m(g.X, g.A0, t).numpy()
        y1 = m(g.X, g.A1, t).numpy()
    assert np.allclose(a.y_old, y0) and np.allclose(a.y_new, y1)
    err = a.completeness_error()
    assert max(err.values()) < 1e-10, err
    assert np.abs(a.delta).max() > 1e-6


@pytest.mark.parametrize("L", [2, 3, 4])
def test_loop_equals_vectorised(L):
    g = small_graph(3, n=12 if L < 4 else 8)
    m = eg.WeightedGCN(4, 5, 3, L, "graph", seed=2)
    a = eg.explain_change(m, g)
    b = eg.explain_change(m, g, method="loop")
    assert np.allclose(a.phi_layer, b.phi_layer, atol=1e-12)
    assert np.allclose(a.phi_input, b.phi_input, atol=1e-12)
    oa, ob = np.lexsort(a.paths.nodes.T[::-1]), np.lexsort(b.paths.nodes.T[::-1])
    assert np.array_equal(a.paths.nodes[oa], b.paths.nodes[ob])
    assert np.allclose(a.contrib[oa], b.contrib[ob], atol=1e-12)
    # per-flow efficiency and null player on the stored per-flow values
    assert np.allclose(a.phi_paths.sum(1), a.contrib, atol=1e-12)
    assert np.abs(a.phi_paths[~a.ei.changed[a.paths.edges]]).max(initial=0.0) == 0.0


def test_two_layer_closed_form_official():
    """L = 2: the brief's f3/f4/f5 formulas, written out independently, per path."""
    g = small_graph(4)
    m = eg.WeightedGCN(4, 5, 2, 2, "node", seed=3)
    k = 2
    a = eg.explain_change(m, g, eg.Target("node", k))
    W1, W2 = m.numpy_weights()
    A0, A1 = g.A0.toarray(), g.A1.toarray()
    dA = A1 - A0
    H0, H1 = A0 @ g.X @ W1, A1 @ g.X @ W1
    r = lambda h: np.maximum(h, 0)
    div = lambda x, y: np.divide(x, y, out=np.zeros_like(x), where=y != 0)
    mD, mN, mO = div(r(H1) - r(H0), H1 - H0), div(r(H1), H1), div(r(H0), H0)
    U = g.X @ W1
    phi = {}
    total = np.zeros(2)
    ch = np.abs(dA) > 1e-12
    for (i, j, kk) in a.paths.nodes.tolist():
        if dA[kk, j] >= 0:
            f3 = (A0[kk, j] * dA[j, i] * mD[j] + dA[kk, j] * A1[j, i] * mN[j]) * U[i] @ W2
        else:
            f3 = (A1[kk, j] * dA[j, i] * mD[j] + dA[kk, j] * A0[j, i] * mO[j]) * U[i] @ W2
        total += f3
        if ch[j, i] and ch[kk, j]:
            f4 = A0[kk, j] * dA[j, i] * mD[j] * U[i] @ W2
            f5 = dA[kk, j] * A0[j, i] * mO[j] * U[i] @ W2
            p1, p2 = 0.5 * (f3 - f5 + f4), 0.5 * (f3 - f4 + f5)
        else:
            p1, p2 = (f3, 0 * f3) if ch[j, i] else (0 * f3, f3)
        phi[(0, i, j)] = phi.get((0, i, j), 0) + p1
        phi[(1, j, kk)] = phi.get((1, j, kk), 0) + p2
    assert np.allclose(total, a.delta)
    for row, (l, s, d) in enumerate(a.layer_edges.tolist()):
        assert np.allclose(a.phi_layer[row], phi[(l, s, d)], atol=1e-12)


def test_shapley_exact_vs_permutations_and_axioms():
    rng = np.random.default_rng(0)
    for L in (2, 3, 4):
        vals = rng.standard_normal(2 ** L)
        vals[0] = 0.0
        phi = eg.shapley_from_values(vals[None, :, None])[0, :, 0]
        v = lambda S: vals[sum(1 << p for p in S)]
        assert np.allclose(phi, eg.shapley_bruteforce(v, L))
        assert np.isclose(phi.sum(), vals[-1])                   # efficiency
        # null player: make player 0 add nothing
        vn = vals.copy()
        for S in range(2 ** L):
            if S & 1:
                vn[S] = vn[S & ~1]
        assert abs(eg.shapley_from_values(vn[None, :, None])[0, 0, 0]) < 1e-12
        # symmetry: players 0 and 1 interchangeable
        vs = vals.copy()
        for S in range(2 ** L):
            swapped = (S & ~3) | ((S & 1) << 1) | ((S >> 1) & 1)
            vs[S] = vs[swapped] = 0.5 * (vals[S] + vals[swapped])
        ps = eg.shapley_from_values(vs[None, :, None])[0, :, 0]
        assert np.isclose(ps[0], ps[1])


def test_three_node_symmetric_path_splits_equally():
    """Hand-built 3-node path graph 0-1-2 in the ReLU's linear region: layer edges 0->1 and 1->2
    change so that A0[2,1] dA[1,0] = dA[2,1] A0[1,0]; their Shapley values must be equal."""
    X = np.array([[1.0], [0.0], [0.0]])
    A0 = sp.csr_matrix(np.array([[0, 0, 0], [0.5, 0, 0], [0, 0.5, 0]]))
    A1 = sp.csr_matrix(np.array([[0, 0, 0], [0.7, 0, 0], [0, 0.7, 0]]))
    g = eg.EvolvingGraph(X, A0, A1)
    m = eg.WeightedGCN(1, 1, 1, 2, "node")
    with torch.no_grad():
        m.weights[0].fill_(1.0)
        m.weights[1].fill_(1.0)
    a = eg.explain_change(m, g, eg.Target("node", 2))
    assert len(a.paths) == 1 and a.phi_layer.shape == (2, 1)
    assert np.isclose(a.phi_layer[0, 0], a.phi_layer[1, 0])
    assert np.isclose(a.phi_layer.sum(), 0.49 - 0.25)


def test_unchanged_layer_edges_get_nothing():
    g = small_graph(5)
    m = eg.WeightedGCN(4, 5, 2, 2, "graph", seed=0)
    a = eg.explain_change(m, g)
    assert a.ei.changed[a.layer_eids].all()


def test_selection_solvers_agree_with_enumeration():
    rng = np.random.default_rng(1)
    for trial in range(4):
        Phi = rng.standard_normal((9, 3))
        y0 = rng.standard_normal(3)
        p = eg.softmax(y0 + Phi.sum(0))
        for K in (1, 2, 3):
            ex = eg.select(Phi, y0, p, K, "enumerate")
            sc = eg.select(Phi, y0, p, K, "scip")
            rl = eg.select(Phi, y0, p, K, "relax")
            brute = min(eg.surrogate_kl(Phi, y0, p, np.isin(np.arange(9), c))
                        for c in itertools.combinations(range(9), K))
            assert np.isclose(ex.kl, brute) and np.isclose(sc.kl, brute, atol=1e-6)
            assert rl.kl >= brute - 1e-12 and len(rl.index) == K
            am = eg.select(Phi, y0, p, K, "enumerate", cardinality="at_most")
            assert am.kl <= ex.kl + 1e-12


def test_scip_budget_is_deterministic_and_reported():
    # nodes, not seconds, bound SCIP: the same call gives the same selection under any load, and
    # the result says whether a limit stopped it
    rng = np.random.default_rng(3)
    Phi = rng.standard_normal((40, 3))
    y0 = rng.standard_normal(3)
    p = eg.softmax(y0 + Phi[:6].sum(0))
    full = eg.select(Phi, y0, p, 4, "scip", cardinality="at_most")
    assert full.status == "optimal" and not full.hit_limit
    assert 1 <= full.nodes < eg.selection.SCIP_NODE_LIMIT
    for seed in (0, 1):
        runs = [eg.select(Phi, y0, p, 4, "scip", cardinality="at_most", node_limit=3, seed=seed)
                for _ in range(2)]
        assert runs[0].hit_limit and runs[0].status in ("nodelimit", "totalnodelimit")
        assert runs[0].nodes <= 3 and runs[0].index.tolist() == runs[1].index.tolist()
        assert runs[0].kl == runs[1].kl >= full.kl - 1e-6
    assert eg.select(Phi, y0, p, 4, "relax").status is None
    with pytest.raises(ValueError, match="node_limit"):
        eg.select(Phi, y0, p, 4, "scip", node_limit=0)
    with pytest.raises(ValueError, match="time_limit"):
        eg.select(Phi, y0, p, 4, "scip", time_limit=0)


def test_selecting_everything_recovers_new_prediction():
    g = small_graph(6)
    m = eg.WeightedGCN(4, 5, 3, 2, "node", seed=0)
    a = eg.explain_change(m, g, eg.Target("node", 1))
    p = eg.softmax(a.y_new)
    assert eg.surrogate_kl(a.phi_layer, a.y_old, p, np.ones(len(a.phi_layer))) < 1e-12
    assert eg.fidelity_kl(m, g, a, np.arange(len(a.layer_edges))) < 1e-12
    rows = eg.input_to_layer_edges(a, np.arange(len(a.input_edges)))
    assert len(rows) == len(a.layer_edges)


def test_layer_adjacencies_are_layer_specific():
    g = small_graph(7)
    m = eg.WeightedGCN(4, 5, 3, 2, "node", seed=0)
    a = eg.explain_change(m, g, eg.Target("node", 3))
    row = int(np.flatnonzero(a.layer_edges[:, 0] == 1)[0])
    A = eg.layer_adjacencies(a, [row], 2)
    l, s, d = a.layer_edges[row]
    assert np.isclose(A[1][d, s], g.A1[d, s]) and np.isclose(A[0][d, s], g.A0[d, s])


def test_integrated_gradients_converge():
    g = small_graph(8)
    m = eg.WeightedGCN(4, 5, 3, 2, "node", seed=0)
    a = eg.explain_change(m, g, eg.Target("node", 2))
    errs = [np.abs(eg.integrated_gradients(m, g, a, n, rule="left").sum(0) - a.delta).max() for n in (1, 4, 64)]
    assert errs[-1] < errs[0] and errs[-1] < 1e-3


def test_generators_and_loader(tmp_path):
    mols = eg.molecule_like(4, seed=0)
    assert [int(g.y) for g in mols] == [0, 1, 0, 1] and mols[1].motif.sum() == 4
    for name in eg.NETWORKX_GRAPHS:
        g = eg.networkx_graph(name)
        assert g.A0.shape[0] == g.X.shape[0] and len(g.changed_edges()) > 0
    b = eg.ba_motif_pair("house", seed=1)
    u, v = b.meta["toggled"]
    assert b.W0[u, v] != 0 and b.W1[u, v] == 0 and b.motif[u] and b.motif[v]
    A = eg.normalize_adjacency(eg.raw_weights(np.array([[0, 1]]), 2))
    assert np.allclose(A.toarray(), 0.5 * np.ones((2, 2)))
    f = tmp_path / "bc.csv"
    f.write_text("source,target,rating,time\n10,11,5,1\n11,12,-3,2\n12,10,2,3\n10,13,1,4\n")
    W0, W1, n = eg.load_edge_list(f, time_split=0.5)
    assert n == 4 and W0.nnz == 4 and W1.nnz == 8 and W1[1, 2] == 3
    W0, W1, n = eg.load_edge_list(f)
    assert W0.nnz == 6 and W1.nnz == 6


def test_clear_errors(tmp_path):
    g = small_graph()
    with pytest.raises(ValueError, match="valid: drift, edit, window"):
        eg.evolve(g.W0, "shuffle")
    with pytest.raises(ValueError, match="valid: karate"):
        eg.networkx_graph("cora")
    with pytest.raises(FileNotFoundError, match="source,target"):
        eg.load_edge_list(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match="valid: enumerate, scip, relax"):
        eg.select(np.zeros((3, 2)), np.zeros(2), np.ones(2) / 2, 1, "mosek")
    with pytest.raises(ValueError, match="infeasible"):
        eg.select(np.zeros((3, 2)), np.zeros(2), np.ones(2) / 2, 4)
    with pytest.raises(ValueError, match="Phi must be"):
        eg.select(np.zeros(3), np.zeros(2), np.ones(2) / 2, 1)
    with pytest.raises(ValueError, match="max_subsets"):
        eg.select(np.zeros((60, 2)), np.zeros(2), np.ones(2) / 2, 10, "enumerate")
    with pytest.raises(ValueError, match="valid: node, graph, link"):
        eg.WeightedGCN(4, head="edge")
    m = eg.WeightedGCN(4, 5, 2, 2, "node")
    with pytest.raises(ValueError, match="'graph' target"):
        eg.explain_change(m, g, eg.Target("graph"))
    with pytest.raises(ValueError, match="features"):
        eg.explain_change(eg.WeightedGCN(7, 5, 2, 2, "graph"), g)
    with pytest.raises(ValueError, match="valid: vectorised, loop"):
        eg.explain_change(m, g, eg.Target("node", 0), method="fast")
    with pytest.raises(ValueError, match=r"must be \(12, 12\)"):
        eg.EvolvingGraph(g.X, g.A0[:5, :5], g.A1)
    with pytest.raises(ProfileError, match="valid"):
        eg.selection_run("smoke", n_graph=3)
    with pytest.raises(ProfileError):
        eg.motif_run("huge")


def test_pyg_baseline_runs():
    pytest.importorskip("torch_geometric")
    g = small_graph(9)
    m = eg.WeightedGCN(4, 5, 2, 2, "node", seed=0)
    a = eg.explain_change(m, g, eg.Target("node", 3))
    for name in eg.PYG_EXPLAINERS:
        s = eg.pyg_edge_scores(m, g, a, name, epochs=5)
        assert s.shape == (len(a.layer_edges),) and np.isfinite(s).all()


def test_fidelity_curves_rows_match_direct_fidelity():
    g = small_graph(6)
    m = eg.WeightedGCN(4, 5, 3, 2, "node", seed=0)
    a = eg.explain_change(m, g, eg.Target("node", 1))
    res = eg.fidelity_curves([(m, g, a)], k_max=2, seed=0, explainers=())
    curves = res[~res.method.str.endswith("time")].set_index(["method", "K"])["KL"]
    none = eg.fidelity_kl(m, g, a, [])
    assert np.allclose(curves.xs("no edge (old prediction)"), none)
    for K in (1, 2):
        sel = eg.select(a.phi_layer, a.y_old, eg.softmax(a.y_new), K, "relax").index
        assert np.isclose(curves[("layer edges (KL)", K)], eg.fidelity_kl(m, g, a, sel))
        assert np.isclose(curves[("top-|Φ| layer edges", K)], eg.fidelity_kl(m, g, a, eg.top_abs(a.phi_layer, K)))


@pytest.mark.parametrize("L", [1, 2, 3])
def test_incremental_forward_equals_full_pass(L):
    rng = np.random.default_rng(L)
    n = 60
    e = np.array([(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.06])
    W0 = eg.raw_weights(e, n, rng.uniform(0.5, 1.5, len(e)))
    W1 = eg.evolve(W0, "edit", n_add=2, n_remove=1, seed=L)
    A0, A1 = eg.normalize_adjacency(W0), eg.normalize_adjacency(W1)
    X = rng.standard_normal((n, 5))
    Ws = [rng.standard_normal((5 if l == 0 else 7, 7)) for l in range(L)]
    Hs0, Y0 = eg.forward_numpy(Ws, X, A0)
    Hs1, Y1 = eg.forward_numpy(Ws, X, A1)
    changed = np.flatnonzero(np.abs(A1 - A0).sum(1).A1 > 0)
    assert 0 < len(changed) < n                    # a local change, not the whole graph
    Hu, Yu = eg.forward_numpy_update(Ws, X, A0, A1, Hs0, Y0, changed)
    np.testing.assert_array_equal(Yu, Y1)          # bit for bit, not just close
    for a, b in zip(Hu, Hs1):
        np.testing.assert_array_equal(a, b)
    Hn, Yn = eg.forward_numpy_update(Ws, X, A0, A0, Hs0, Y0, np.zeros(0, int))
    np.testing.assert_array_equal(Yn, Y0)          # nothing changed: nothing recomputed


def test_edge_index_matches_brute_force():
    rng = np.random.default_rng(5)
    n = 30
    A0 = sp.random(n, n, density=0.1, random_state=1, format="coo")
    A1 = sp.random(n, n, density=0.1, random_state=2, format="coo")
    A1 = sp.coo_matrix((np.r_[A1.data, 0.25], (np.r_[A1.row, A1.row[:1]], np.r_[A1.col, A1.col[:1]])),
                       shape=(n, n))                      # a duplicate entry, summed
    ei = eg.edge_index(A0, A1)
    d0, d1 = A0.todok(), sp.csr_matrix(A1).todok()
    edges = sorted(set(d0.keys()) | set(d1.keys()))       # (dst, src), dst-major
    assert list(zip(ei.dst.tolist(), ei.src.tolist())) == edges
    np.testing.assert_allclose(ei.w0, [d0.get(e, 0.0) for e in edges])
    np.testing.assert_allclose(ei.w1, [d1.get(e, 0.0) for e in edges])
    for v in range(n):                                    # in- and out-neighbour slots
        assert sorted(ei.src[ei.indptr_in[v]:ei.indptr_in[v + 1]].tolist()) == \
            sorted(s for d, s in edges if d == v)
        out = ei.out_order[ei.indptr_out[v]:ei.indptr_out[v + 1]]
        assert (ei.src[out] == v).all() and ei.dst[out].tolist() == sorted(d for d, s in edges if s == v)
    big = rng.integers(0, 70_000, 5000)                   # beyond uint16: the int64 path
    from iclr25.evolving_gnn_explanations.flows import _stable_order
    np.testing.assert_array_equal(_stable_order(big, 70_000), np.argsort(big, kind="stable"))
    small = rng.integers(0, 300, 5000)
    np.testing.assert_array_equal(_stable_order(small, 300), np.argsort(small, kind="stable"))


def test_evolution_is_a_parameter_with_the_chapters_drift_as_default():
    """The builders take evolution(W0, seed) -> W1; the default reproduces the chapter's drift
    exactly, a user's function is used as given, and a bad one gets a clear error."""
    import scipy.sparse as sp

    a = eg.sbm_evolving(30, seed=3)
    b = eg.sbm_evolving(30, seed=3, evolution=eg.drift_evolution(0.3, 5, 5))
    assert (a.A1 != b.A1).nnz == 0 and (a.A0 != b.A0).nnz == 0
    double = lambda W0, seed: W0 * 2.0                      # every weight doubles
    c = eg.sbm_evolving(30, seed=3, evolution=double)
    assert abs(c.W1 - 2 * c.W0).max() == 0
    k = eg.networkx_graph("karate", evolution=double)
    assert abs(k.W1 - 2 * k.W0).max() == 0
    X = np.eye(4)
    W0 = eg.raw_weights(np.array([[0, 1], [1, 2], [2, 3]]), 4)
    g = eg.from_weights(X, W0, lambda W, s: eg.raw_weights(np.array([[0, 1], [2, 3]]), 4))
    assert g.W1.nnz == 4 and g.W0.nnz == 6
    d = eg.from_weights(X, W0, seed=1)                      # default: the chapter's drift
    assert d.W1.nnz == W0.nnz and abs(d.W1 - W0).max() > 0
    with pytest.raises(ValueError, match="nodes must stay the same"):
        eg.from_weights(X, W0, lambda W, s: sp.eye(5, format="csr"))
    with pytest.raises(ValueError, match="non-symmetric"):
        eg.from_weights(X, W0, lambda W, s: sp.csr_matrix(np.triu(np.ones((4, 4)), 1)))
    with pytest.raises(TypeError, match=r"a function \(W0, seed\) -> W1"):
        eg.from_weights(X, W0, "drift")


# --- baselines that see the change (issue 38) ---------------------------------------------------

def _trained_small(seed=8, L=2):
    g = small_graph(seed)
    m = eg.train_gcn(g, "node", hidden=5, n_layers=L, n_steps=30, lr=0.05, seed=0, desc="t")
    return g, m


def test_ig_riemann_error_shrinks_with_steps_while_ours_is_exact():
    g, m = _trained_small()
    a = eg.explain_change(m, g, eg.Target("node", 2))
    steps = (1, 2, 4, 8, 16, 32, 64)
    errs = [np.abs(eg.integrated_gradients(m, g, a, n, rule="left").sum(0) - a.delta).max() for n in steps]
    assert all(e1 < e0 for e0, e1 in zip(errs, errs[1:])), errs          # shrinks at every doubling
    assert errs[-1] < errs[0] / 16                                        # about O(1/n) for the left rule
    assert errs[-1] > 1e-8                                                # ...but never exact
    assert max(a.completeness_error().values()) < 1e-12                  # ours: exact at any size
    assert np.allclose(eg.change_attribution(m, g, a, "ig", ig_steps=8), eg.integrated_gradients(m, g, a, 8))


def test_deeplift_closed_form_and_exact_for_one_layer():
    g, m = _trained_small()
    k = 2
    a = eg.explain_change(m, g, eg.Target("node", k))
    Ws = m.numpy_weights()
    (H0,), _ = eg.forward_numpy(Ws, g.X, g.A0)
    (H1,), _ = eg.forward_numpy(Ws, g.X, g.A1)
    dZ = np.maximum(H1, 0) - np.maximum(H0, 0)
    dA = (g.A1 - g.A0).toarray()
    # rescale rule through the ReLU, products differentiated at the input (A1, Z1):
    # sum = dA Z1 W + A1 dZ W = true change + dA dZ W (the cross term it double-counts)
    expect = (dA @ np.maximum(H1, 0) @ Ws[1] + g.A1.toarray() @ dZ @ Ws[1])[k]
    dl = eg.change_attribution(m, g, a, "deeplift")
    assert np.allclose(dl.sum(0), expect, atol=1e-12)
    assert np.allclose(dl.sum(0) - a.delta, (dA @ dZ @ Ws[1])[k], atol=1e-12)
    m1 = eg.WeightedGCN(4, 5, 3, 1, "node", seed=1)    # linear in A: every baseline equals ours
    a1 = eg.explain_change(m1, g, eg.Target("node", k))
    for name in eg.CHANGE_BASELINES:
        assert np.allclose(eg.change_attribution(m1, g, a1, name, ig_steps=3), a1.phi_layer, atol=1e-12), name


def test_gnn_lrp_equals_brute_force_walk_relevances():
    g, m = _trained_small(5)
    k, L = 3, 2
    a = eg.explain_change(m, g, eg.Target("node", k))
    W0, W1 = m.numpy_weights()
    n = g.n_nodes

    def walk_scores(A):
        A = A.toarray()
        H = A @ g.X @ W0
        gate = (H > 0).astype(float)
        U = g.X @ W0
        S = np.zeros((L, n, n, W1.shape[1]))   # S[l, src, dst]
        for i, j in itertools.product(range(n), range(n)):
            if A[j, i] == 0 or A[k, j] == 0:
                continue
            R = A[k, j] * A[j, i] * ((U[i] * gate[j]) @ W1)    # LRP-0 relevance of walk i -> j -> k
            S[0, i, j] += R / L
            S[1, j, k] += R / L
        return S

    D = walk_scores(g.A1) - walk_scores(g.A0)
    full = eg.change_attribution(m, g, a, "gnn_lrp", full=True)
    ei = a.ei
    for l in range(L):
        assert np.allclose(full[l], D[l, ei.src, ei.dst], atol=1e-12)
    assert np.allclose(full.sum((0, 1)), a.delta, atol=1e-12)       # complete over all layer edges


def test_grad_matches_finite_differences():
    g, m = _trained_small(4)
    a = eg.explain_change(m, g, eg.Target("node", 1))
    ei = a.ei
    G = eg.layer_edge_gradients(m, g, a, ei.w1)
    rng = np.random.default_rng(0)
    for e in rng.choice(ei.n_edges, 4, replace=False):
        for l in range(2):
            ws = []
            for sgn in (1, -1):
                w = [ei.w1.copy(), ei.w1.copy()]
                w[l][e] += sgn * 1e-6
                adjs = [ei.adjacency(x) for x in w]
                with torch.no_grad():
                    ws.append(m(g.X, adjs, a.target).numpy())
            assert np.allclose((ws[0] - ws[1]) / 2e-6, G[l, e], atol=1e-6)
    grad = eg.change_attribution(m, g, a, "grad")
    assert np.allclose(grad, (G * (ei.w1 - ei.w0)[None, :, None])[a.layer_edges[:, 0], a.layer_eids])
    with pytest.raises(ValueError, match="valid: deeplift, gnn_lrp, grad, ig"):
        eg.change_attribution(m, g, a, "lime")
    with pytest.raises(ValueError, match="edge weights"):
        eg.layer_edge_gradients(m, g, a, [ei.w1[:3], ei.w1[:3]])


def test_real_evolving_graphs():
    g = eg.real_evolving_graph("karate_split")
    assert len(g.meta["removed"]) == 11 and g.n_nodes == 34
    W1 = g.W1.tocoo()
    assert not np.any(g.y[W1.row] != g.y[W1.col])                    # no tie across the two clubs
    assert np.isclose(g.W0.sum() - g.W1.sum(), 2 * sum(
        nx_w for nx_w in [eg.graphs.nx.karate_club_graph().edges[u, v]["weight"] for u, v in g.meta["removed"]]))
    w = eg.real_evolving_graph("les_miserables_window")
    n_e = eg.graphs.nx.les_miserables_graph().number_of_edges()
    assert len(w.meta["removed"]) == len(w.meta["added"]) == n_e - round(0.75 * n_e)
    with pytest.raises(ValueError, match="valid: karate_split"):
        eg.real_evolving_graph("cora_time")


def test_batched_graph_training_equals_per_graph_loop():
    graphs = [eg.ba_motif_pair(mt, 8, seed=i) for i, mt in enumerate(["house", "cycle", "house"])]
    fast = eg.train_gcn(graphs, "graph", hidden=6, n_steps=3, lr=0.05, snapshot="both", seed=1)
    ref = eg.WeightedGCN(12, 6, 2, 2, "graph", seed=1)
    torch.manual_seed(1)
    opt = torch.optim.Adam(ref.parameters(), lr=0.05, weight_decay=5e-4)
    data = [(g.X, A, int(g.y)) for g in graphs for A in (g.A0, g.A1)]
    for _ in range(3):
        opt.zero_grad()
        out = torch.stack([ref(X, eg.model.to_torch_sparse(A)) for X, A, _ in data])
        torch.nn.functional.cross_entropy(out, torch.tensor([y for *_, y in data])).backward()
        opt.step()
    for a, b in zip(fast.numpy_weights(), ref.numpy_weights()):
        assert np.allclose(a, b, atol=1e-10)


@pytest.mark.parametrize("head", ["graph", "link"])
def test_gradients_of_graph_and_link_heads_match_finite_differences(head):
    g = small_graph(3)
    m = eg.WeightedGCN(4, 5, 3, 2, head, seed=2)
    t = eg.Target("graph") if head == "graph" else eg.Target("link", (1, 7))
    a = eg.explain_change(m, g, t)
    ei = a.ei
    G = eg.layer_edge_gradients(m, g, a, ei.w0)
    e = int(np.flatnonzero(ei.changed)[0])
    for l in range(2):
        outs = []
        for sgn in (1, -1):
            w = [ei.w0.copy(), ei.w0.copy()]
            w[l][e] += sgn * 1e-6
            with torch.no_grad():
                outs.append(m(g.X, [ei.adjacency(x) for x in w], t).numpy())
        assert np.allclose((outs[0] - outs[1]) / 2e-6, G[l, e], atol=1e-6)
