"""Trees from distances: neighbour joining, UPGMA, Newick, bipartitions and Robinson-Foulds.

Introduced in chapter 12 (PhyloLM). The paper draws its dendrograms with neighbour joining
(Saitou & Nei, 1987) on Nei's distance; UPGMA (average linkage) is the rooted alternative.

A :class:`Tree` is a plain nested structure of nodes (name, branch length, children). Neighbour
joining returns an unrooted tree, stored rooted at its last internal node (three children).
Trees are compared through their *splits* (bipartitions of the leaf set made by cutting one
internal edge): the Robinson-Foulds distance counts the splits found in one tree and not in the
other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

__all__ = ["Tree", "neighbor_joining", "upgma", "parse_newick", "splits", "robinson_foulds",
           "patristic_distances", "RF_MODES"]

#: how :func:`robinson_foulds` treats splits of one tree that resolve a polytomy of the other
RF_MODES = ("strict", "compatible")


@dataclass
class Tree:
    """A node of a phylogenetic tree: ``name`` (leaves), ``length`` of the branch above it and
    ``children``. Introduced in chapter 12."""

    name: str | None = None
    length: float = 0.0
    children: list["Tree"] = field(default_factory=list)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def leaves(self) -> list[str]:
        """Leaf names, left to right."""
        if self.is_leaf:
            return [self.name]
        return [n for c in self.children for n in c.leaves()]

    def nodes(self) -> Iterable["Tree"]:
        yield self
        for c in self.children:
            yield from c.nodes()

    def newick(self, lengths: bool = True) -> str:
        """The Newick string (with ``;``)."""
        return self._nw(lengths) + ";"

    def _nw(self, lengths: bool) -> str:
        if self.is_leaf:
            s = self.name or ""
        else:
            s = "(" + ",".join(c._nw(lengths) for c in self.children) + ")" + (self.name or "")
        return s + (f":{self.length:.6g}" if lengths else "")

    def __repr__(self) -> str:
        return f"Tree({self.newick(lengths=False)})"


def _check_matrix(D, names) -> tuple[np.ndarray, list[str]]:
    D = np.asarray(D, dtype=float)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"D must be a square distance matrix, got shape {D.shape}")
    n = D.shape[0]
    names = [str(x) for x in (names if names is not None else range(n))]
    if len(names) != n:
        raise ValueError(f"{len(names)} names for a {n} x {n} matrix")
    if len(set(names)) != n:
        raise ValueError("names must be distinct")
    if n < 3:
        raise ValueError(f"a tree needs at least 3 leaves, got {n}")
    if not np.all(np.isfinite(D)):
        raise ValueError("D has non-finite entries")
    if not np.allclose(D, D.T, atol=1e-9):
        raise ValueError("D must be symmetric")
    return 0.5 * (D + D.T), names


def neighbor_joining(D, names: Sequence[str] | None = None, *, clip_negative: bool = False) -> Tree:
    """Neighbour joining (Saitou & Nei, 1987) on a distance matrix, vectorised with NumPy.

    Introduced in chapter 12. At each step, with ``n`` active nodes and row sums ``r``, join the
    pair minimising ``Q_ij = (n - 2) D_ij - r_i - r_j``; the branch to ``i`` gets
    ``D_ij / 2 + (r_i - r_j) / (2 (n - 2))``, the new node's distance to ``k`` is
    ``(D_ik + D_jk - D_ij) / 2``. On an additive (tree) metric it returns that tree with its
    branch lengths (tested). Ties in ``Q`` go to the first pair in row-major order.

    Returns an unrooted :class:`Tree`, stored rooted at its last node (three children).
    ``clip_negative`` sets negative branch lengths to 0.
    """
    D, names = _check_matrix(D, names)
    nodes = [Tree(name=n) for n in names]
    D = D.copy()
    while len(nodes) > 3:
        n = len(nodes)
        r = D.sum(axis=1)
        Q = (n - 2) * D - r[:, None] - r[None, :]
        np.fill_diagonal(Q, np.inf)
        i, j = divmod(int(np.argmin(Q)), n)
        i, j = min(i, j), max(i, j)
        li = 0.5 * D[i, j] + (r[i] - r[j]) / (2 * (n - 2))
        lj = D[i, j] - li
        nodes[i].length, nodes[j].length = li, lj
        new = Tree(children=[nodes[i], nodes[j]])
        dk = 0.5 * (D[i] + D[j] - D[i, j])
        keep = [k for k in range(n) if k not in (i, j)]
        D = np.block([[D[np.ix_(keep, keep)], dk[keep, None]],
                      [dk[None, keep], np.zeros((1, 1))]])
        nodes = [nodes[k] for k in keep] + [new]
    a, b, c = nodes
    a.length = 0.5 * (D[0, 1] + D[0, 2] - D[1, 2])
    b.length = 0.5 * (D[0, 1] + D[1, 2] - D[0, 2])
    c.length = 0.5 * (D[0, 2] + D[1, 2] - D[0, 1])
    root = Tree(children=[a, b, c])
    if clip_negative:
        for node in root.nodes():
            node.length = max(node.length, 0.0)
    return root


def upgma(D, names: Sequence[str] | None = None) -> Tree:
    """UPGMA (average linkage): a rooted, ultrametric tree. Introduced in chapter 12.

    Joins the closest pair of clusters, puts the new node at height ``D_ij / 2`` and gives it
    the size-weighted mean distance to every other cluster. Heights equal those of
    ``scipy.cluster.hierarchy.linkage(method="average")`` (tested).
    """
    D, names = _check_matrix(D, names)
    nodes = [Tree(name=n) for n in names]
    size = [1] * len(nodes)
    height = [0.0] * len(nodes)
    D = D.copy()
    while len(nodes) > 1:
        n = len(nodes)
        M = D + np.diag(np.full(n, np.inf))
        i, j = divmod(int(np.argmin(M)), n)
        i, j = min(i, j), max(i, j)
        h = 0.5 * D[i, j]
        nodes[i].length, nodes[j].length = h - height[i], h - height[j]
        new = Tree(children=[nodes[i], nodes[j]])
        dk = (size[i] * D[i] + size[j] * D[j]) / (size[i] + size[j])
        keep = [k for k in range(n) if k not in (i, j)]
        D = np.block([[D[np.ix_(keep, keep)], dk[keep, None]],
                      [dk[None, keep], np.zeros((1, 1))]])
        nodes = [nodes[k] for k in keep] + [new]
        size = [size[k] for k in keep] + [size[i] + size[j]]
        height = [height[k] for k in keep] + [h]
    return nodes[0]


_TOKEN = re.compile(r"\s*([(),;:])\s*|\s*([^(),;:]+)\s*")


def parse_newick(text: str) -> Tree:
    """Read a Newick string (names, optional branch lengths, polytomies allowed).

    Introduced in chapter 12; the zoo's true genealogy is written this way.
    """
    toks = [m.group(1) or m.group(2).strip() for m in _TOKEN.finditer(text.strip())]
    toks = [t for t in toks if t]
    if not toks or toks[-1] != ";":
        raise ValueError(f"a Newick string ends with ';', got {text!r}")
    pos = 0

    def node() -> Tree:
        nonlocal pos
        t = Tree()
        if toks[pos] == "(":
            pos += 1
            t.children.append(node())
            while toks[pos] == ",":
                pos += 1
                t.children.append(node())
            if toks[pos] != ")":
                raise ValueError(f"unbalanced parentheses in {text!r}")
            pos += 1
        if toks[pos] not in "(),;:":
            t.name = toks[pos]
            pos += 1
        if toks[pos] == ":":
            t.length = float(toks[pos + 1])
            pos += 2
        return t

    try:
        tree = node()
    except IndexError:
        raise ValueError(f"malformed Newick string {text!r}") from None
    if toks[pos] != ";":
        raise ValueError(f"malformed Newick string {text!r}")
    return tree


def splits(tree: Tree) -> set[frozenset[str]]:
    """The non-trivial splits of ``tree`` (as unrooted): each as the side without the first
    leaf in sorted order; sides of size 1 or n-1 are left out. Introduced in chapter 12."""
    leaves = tree.leaves()
    if len(set(leaves)) != len(leaves):
        raise ValueError("leaf names must be distinct")
    full = frozenset(leaves)
    ref = min(leaves)
    out: set[frozenset[str]] = set()

    def visit(node: Tree) -> frozenset[str]:
        if node.is_leaf:
            return frozenset([node.name])
        below = frozenset().union(*(visit(c) for c in node.children))
        side = below if ref not in below else full - below
        if 1 < len(side) < len(full) - 1:
            out.add(side)
        return below

    visit(tree)
    return out


def _compatible(a: frozenset, b: frozenset, full: frozenset) -> bool:
    """Two splits can sit in one tree iff one of the four side intersections is empty."""
    ac, bc = full - a, full - b
    return not (a & b) or not (a & bc) or not (ac & b) or not (ac & bc)


def robinson_foulds(tree: Tree, reference: Tree, *, normalized: bool = False,
                    mode: str = "strict") -> float:
    """Robinson-Foulds distance between two trees on the same leaves.

    Introduced in chapter 12. ``mode="strict"``: ``|A - B| + |B - A|`` over the split sets A
    (``tree``) and B (``reference``); normalised by ``|A| + |B|`` (ete3's convention; equal to
    ``RF / 2(n - 3)`` for two binary trees). ``mode="compatible"``: a split of ``tree`` that
    only resolves a polytomy of ``reference`` (is compatible with all its splits) is not
    counted as wrong, so a binary estimate of a genealogy with polytomies (a parent with several
    children) can reach 0; normalised by ``|B| + (number of splits of tree that conflict or
    match)``. Both modes coincide when ``reference`` is binary.
    """
    if mode not in RF_MODES:
        raise ValueError(f"unknown mode {mode!r}; valid: {', '.join(RF_MODES)}")
    la, lb = set(tree.leaves()), set(reference.leaves())
    if la != lb:
        raise ValueError(f"the trees have different leaves: only in tree {sorted(la - lb)}, "
                         f"only in reference {sorted(lb - la)}")
    A, B = splits(tree), splits(reference)
    missing = len(B - A)
    if mode == "strict":
        extra, total = len(A - B), len(A) + len(B)
    else:
        full = frozenset(la)
        wrong = [s for s in A - B if not all(_compatible(s, b, full) for b in B)]
        extra, total = len(wrong), len(B) + len(wrong) + len(A & B)
    rf = missing + extra
    if not normalized:
        return float(rf)
    return float(rf / total) if total else 0.0


def patristic_distances(tree: Tree, names: Sequence[str] | None = None) -> np.ndarray:
    """Path lengths between every pair of leaves (the additive metric the tree defines).

    Introduced in chapter 12 (the neighbour-joining test builds an additive matrix with it).
    """
    order = list(names) if names is not None else tree.leaves()
    index = {n: k for k, n in enumerate(order)}
    if set(index) != set(tree.leaves()):
        raise ValueError("names must be exactly the tree's leaves")
    n = len(order)
    D = np.zeros((n, n))

    def visit(node: Tree) -> dict[int, float]:
        if node.is_leaf:
            return {index[node.name]: 0.0}
        parts = [{k: v + c.length for k, v in visit(c).items()} for c in node.children]
        for x in range(len(parts)):
            for y in range(x + 1, len(parts)):
                for a, da in parts[x].items():
                    for b, db in parts[y].items():
                        D[a, b] = D[b, a] = da + db
        return {k: v for p in parts for k, v in p.items()}

    visit(tree)
    return D
