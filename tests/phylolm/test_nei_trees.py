"""Chapter 12: Nei similarity (sparse vs brute force), NJ / UPGMA on known trees, Robinson-Foulds."""

import itertools

import numpy as np
import pytest

from iclr25.phylolm import nei, trees


def random_alleles(rng, M=5, G=7, N=9, k=4):
    return {f"m{i}": [[f"a{rng.integers(k)}" for _ in range(N)] for _ in range(G)] for i in range(M)}


def brute_nei(alleles):
    """Straight from the formula: frequencies by counting, sums over genes then alleles."""
    names = list(alleles)
    G = len(alleles[names[0]])
    S = np.zeros((len(names), len(names)))
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            num = da = db = 0.0
            for g in range(G):
                xa, xb = alleles[a][g], alleles[b][g]
                for v in set(xa) | set(xb):
                    pa, pb = xa.count(v) / len(xa), xb.count(v) / len(xb)
                    num += pa * pb
                    da += pa * pa
                    db += pb * pb
            S[i, j] = num / np.sqrt(da * db)
    return S


def test_nei_sparse_equals_loops_and_formula():
    rng = np.random.default_rng(0)
    al = random_alleles(rng)
    table = nei.AlleleTable.from_alleles(al)
    S_fast = nei.nei_similarity(table)
    S_loop = nei.nei_similarity(table, method="loops")
    S_brute = brute_nei(al)
    np.testing.assert_allclose(S_fast, S_brute, atol=1e-12)
    np.testing.assert_allclose(S_loop, S_brute, atol=1e-12)


def test_nei_properties():
    rng = np.random.default_rng(1)
    al = random_alleles(rng, M=6, G=10)
    al["clone"] = [list(x) for x in al["m0"]]
    table = nei.AlleleTable.from_alleles(al)
    S = nei.nei_similarity(table)
    np.testing.assert_allclose(S, S.T, atol=0)
    np.testing.assert_allclose(np.diag(S), 1.0)
    assert S[0, -1] == pytest.approx(1.0)
    assert (S >= 0).all() and (S <= 1).all()
    perm = rng.permutation(10)
    S_perm = nei.nei_similarity(table.genes(perm))
    np.testing.assert_allclose(S_perm, S, atol=1e-12)
    # disjoint alleles: S = 0, D = -log(eps)
    t2 = nei.AlleleTable.from_alleles({"a": [["x"] * 3], "b": [["y"] * 3], "c": [["x", "y", "z"]]})
    S2 = nei.nei_similarity(t2)
    assert S2[0, 1] == 0.0
    D = nei.nei_distance(S2, eps=1e-3)
    assert D[0, 1] == pytest.approx(-np.log(1e-3)) and D[0, 0] == 0.0


def test_table_subsets_and_errors():
    rng = np.random.default_rng(2)
    table = nei.AlleleTable.from_alleles(random_alleles(rng))
    sub = table.select(["m3", "m1"])
    S = nei.nei_similarity(table)
    np.testing.assert_allclose(nei.nei_similarity(sub), S[np.ix_([3, 1], [3, 1])], atol=1e-12)
    with pytest.raises(ValueError, match="same number of genes"):
        nei.AlleleTable.from_alleles({"a": [["x"]], "b": [["x"], ["y"]]})
    with pytest.raises(ValueError, match="non-empty"):
        nei.AlleleTable.from_alleles({"a": [[]]})
    with pytest.raises(ValueError, match="valid: sparse, loops"):
        nei.nei_similarity(table, method="dense")
    with pytest.raises(KeyError, match="unknown model"):
        table.select(["zz"])


# ------------------------------------------------------------------ trees

KNOWN = "((a:1,b:2):1.5,(c:0.5,d:1):0.7,(e:2,(f:1,g:0.3):0.4):0.9);"


def test_nj_recovers_additive_tree():
    true = trees.parse_newick(KNOWN)
    names = sorted(true.leaves())
    D = trees.patristic_distances(true, names)
    assert D[0, 1] == pytest.approx(3.0)           # a-b
    assert D[0, 2] == pytest.approx(1 + 1.5 + 0.7 + 0.5)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(names))
    est = trees.neighbor_joining(D[np.ix_(perm, perm)], [names[k] for k in perm])
    assert trees.robinson_foulds(est, true) == 0
    np.testing.assert_allclose(trees.patristic_distances(est, names), D, atol=1e-10)


def test_upgma_ultrametric_and_scipy():
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import squareform

    ultra = trees.parse_newick("(((a:1,b:1):2,c:3):1,(d:2.5,e:2.5):1.5);")
    names = sorted(ultra.leaves())
    D = trees.patristic_distances(ultra, names)
    est = trees.upgma(D, names)
    assert trees.robinson_foulds(est, ultra) == 0
    np.testing.assert_allclose(trees.patristic_distances(est, names), D, atol=1e-12)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(9, 3))
    R = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    t = trees.upgma(R)
    Z = linkage(squareform(R, checks=False), method="average")
    np.testing.assert_allclose(sorted(node_heights(t)), sorted(Z[:, 2] / 2), atol=1e-12)


def node_heights(tree):
    """Height of every internal node above its leaves (down the leftmost path)."""
    out = []
    for node in tree.nodes():
        if not node.is_leaf:
            h, x = 0.0, node
            while not x.is_leaf:
                x = x.children[0]
                h += x.length
            out.append(h)
    return out


def brute_splits(tree):
    """Cut every edge of the tree (as an adjacency list) and read the leaf set on one side."""
    adj, leaf_name, counter = {}, {}, itertools.count()

    def build(node, parent):
        me = next(counter)
        adj.setdefault(me, [])
        if parent is not None:
            adj[me].append(parent)
            adj[parent].append(me)
        if node.is_leaf:
            leaf_name[me] = node.name
        for c in node.children:
            build(c, me)

    build(tree, None)
    leaves = frozenset(leaf_name.values())
    out = set()
    for u in adj:
        for v in adj[u]:
            seen, stack = {u}, [u]          # component of u without the edge u-v
            while stack:
                x = stack.pop()
                for y in adj[x]:
                    if (x, y) in ((u, v),) or y in seen:
                        continue
                    seen.add(y)
                    stack.append(y)
            side = frozenset(leaf_name[x] for x in seen if x in leaf_name)
            if 1 < len(side) < len(leaves) - 1:
                out.add(side if min(leaves) not in side else leaves - side)
    return out


def random_tree(rng, names):
    nodes = [trees.Tree(name=n) for n in names]
    while len(nodes) > 3:
        i, j = sorted(rng.choice(len(nodes), 2, replace=False))
        new = trees.Tree(children=[nodes[i], nodes[j]])
        nodes = [x for k, x in enumerate(nodes) if k not in (i, j)] + [new]
    return trees.Tree(children=nodes)


def test_rf_against_brute_force():
    rng = np.random.default_rng(4)
    names = [f"t{k}" for k in range(8)]
    for _ in range(20):
        t1, t2 = random_tree(rng, names), random_tree(rng, names)
        s1, s2 = brute_splits(t1), brute_splits(t2)
        assert trees.splits(t1) == s1
        assert trees.robinson_foulds(t1, t2) == len(s1 ^ s2)
        assert trees.robinson_foulds(t1, t2, normalized=True) == pytest.approx(
            len(s1 ^ s2) / (2 * (len(names) - 3)))
        # Newick round trip keeps the topology
        assert trees.robinson_foulds(trees.parse_newick(t1.newick()), t1) == 0


def test_rf_compatible_mode_on_polytomy():
    ref = trees.parse_newick("((a,b,c),(d,e),f);")          # a polytomy {a, b, c}
    resolved = trees.parse_newick("(((a,b),c),(d,e),f);")   # resolves it: no conflict
    wrong = trees.parse_newick("(((a,d),c),(b,e),f);")
    assert trees.robinson_foulds(resolved, ref, mode="strict") == 1
    assert trees.robinson_foulds(resolved, ref, mode="compatible") == 0
    assert trees.robinson_foulds(wrong, ref, mode="compatible") > 0
    with pytest.raises(ValueError, match="valid: strict, compatible"):
        trees.robinson_foulds(ref, ref, mode="loose")
    with pytest.raises(ValueError, match="different leaves"):
        trees.robinson_foulds(ref, trees.parse_newick("(a,b,(c,x));"))


def test_tree_errors():
    with pytest.raises(ValueError, match="square"):
        trees.neighbor_joining(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="at least 3"):
        trees.neighbor_joining(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="symmetric"):
        trees.upgma(np.array([[0, 1, 2], [1, 0, 1], [3, 1, 0.]]))
    with pytest.raises(ValueError, match="ends with"):
        trees.parse_newick("(a,b,c)")
