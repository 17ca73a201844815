"""A small LearnSPN: sum-product networks with histogram and categorical leaves (chapter 14,
notebook 01).

Our own learner (the official code uses the old SPFlow ``learn_mspn``, which no longer exists):
rows are split with k-means into a sum node, columns with the randomised dependence coefficient
(RDC) into a product node, and a slice with fewer than ``min_instances_slice`` rows is factorised
into leaves. Continuous variables (normalised to [0, 1]) get histogram leaves that cover all of
[0, 1] (Laplace-smoothed, so no region has zero density); integer variables get one bin per group
of levels with a probability *mass* per level; categorical variables get smoothed categorical
leaves.

``log_likelihood`` is exact (log-sum-exp at sum nodes). ``max_approx`` replaces
``log sum_c w_c exp(l_c)`` by ``max_c (log w_c + l_c)`` -- the quantity the MIO optimises:

* ``variant="lower"``: ``max_c (log w_c + l_c)  <=  exact``  (max <= log-sum-exp);
* ``variant="upper"``: ``max_c (log(n w_c) + l_c)  >=  exact`` (a sum of n terms <= n x max).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.special import logsumexp

__all__ = ["Leaf", "Product", "Sum", "SPN", "LearnSPN", "rdc"]

VARIANTS = ("lower", "upper")


@dataclass
class Leaf:
    """A univariate leaf. ``kind="hist"``: bins [breaks[k], breaks[k+1]) of ``var`` with log
    value ``logv[k]``; ``kind="cat"``: ``logv[i]`` is log P(var = i)."""

    id: int
    var: int
    kind: str
    logv: np.ndarray
    breaks: np.ndarray | None = None

    def bin_index(self, x: np.ndarray) -> np.ndarray:
        """The histogram bin of each value (the last bin is closed on the right)."""
        k = np.searchsorted(self.breaks, x, side="right") - 1
        return np.clip(k, 0, len(self.logv) - 1)

    def eval(self, X: np.ndarray) -> np.ndarray:
        x = X[:, self.var]
        if self.kind == "hist":
            return self.logv[self.bin_index(x)]
        idx = np.asarray(np.round(x), dtype=int)
        if idx.min(initial=0) < 0 or idx.max(initial=0) >= len(self.logv):
            raise ValueError(f"variable {self.var}: category index out of range 0..{len(self.logv) - 1}")
        return self.logv[idx]


@dataclass
class Product:
    """A product node over children with disjoint scopes."""

    id: int
    children: list[int]


@dataclass
class Sum:
    """A sum (mixture) node with ``log_w`` (log weights summing to one)."""

    id: int
    children: list[int]
    log_w: np.ndarray


@dataclass
class SPN:
    """A learned SPN; ``nodes`` are in topological order (children first, root last)."""

    nodes: list = field(default_factory=list)
    n_vars: int = 0

    @property
    def root(self):
        return self.nodes[-1]

    def counts(self) -> dict[str, int]:
        """Number of sum, product and leaf nodes."""
        out = {"sum": 0, "product": 0, "leaf": 0}
        for n in self.nodes:
            out["sum" if isinstance(n, Sum) else "product" if isinstance(n, Product) else "leaf"] += 1
        return out

    def _check(self, X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=float))
        if X.shape[1] != self.n_vars:
            raise ValueError(f"expected {self.n_vars} SPN variables per row, got {X.shape[1]}")
        return X

    def _eval(self, X: np.ndarray, mode: str) -> list[np.ndarray]:
        vals: list[np.ndarray] = []
        log_n = 0.0
        for node in self.nodes:
            if isinstance(node, Leaf):
                vals.append(node.eval(X))
            elif isinstance(node, Product):
                vals.append(np.sum([vals[c] for c in node.children], axis=0))
            else:
                a = np.stack([vals[c] + lw for c, lw in zip(node.children, node.log_w)])
                if mode == "exact":
                    vals.append(logsumexp(a, axis=0))
                else:
                    log_n = np.log(len(node.children)) if mode == "upper" else 0.0
                    vals.append(a.max(axis=0) + log_n)
        return vals

    def log_likelihood(self, X: np.ndarray) -> np.ndarray:
        """Exact log-likelihood of each row (notebook 14/01)."""
        return self._eval(self._check(X), "exact")[-1]

    def max_approx(self, X: np.ndarray, variant: str = "lower") -> np.ndarray:
        """Sum nodes evaluated as max (``"lower"``) or max + log(#children) (``"upper"``)."""
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; valid: {VARIANTS}")
        return self._eval(self._check(X), variant)[-1]

    def node_values(self, X: np.ndarray, variant: str = "lower") -> np.ndarray:
        """Max-approximation value of every node (rows x nodes)."""
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; valid: {VARIANTS}")
        return np.stack(self._eval(self._check(X), variant), axis=1)

    def bounds(self, variant: str = "lower") -> tuple[np.ndarray, np.ndarray]:
        """Per node (lo, hi) of the max-approximation over the whole domain (interval arithmetic)."""
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; valid: {VARIANTS}")
        lo, hi = np.zeros(len(self.nodes)), np.zeros(len(self.nodes))
        for node in self.nodes:
            i = node.id
            if isinstance(node, Leaf):
                lo[i], hi[i] = node.logv.min(), node.logv.max()
            elif isinstance(node, Product):
                lo[i], hi[i] = lo[node.children].sum(), hi[node.children].sum()
            else:
                shift = np.log(len(node.children)) if variant == "upper" else 0.0
                lw = np.asarray(node.log_w) + shift
                lo[i] = np.max(lw + lo[node.children])
                hi[i] = np.max(lw + hi[node.children])
        return lo, hi


# -------------------------------------------------------------------- learning
def _ecdf(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata
    return rankdata(x, method="max") / len(x)


def rdc(X: np.ndarray, k: int = 10, s: float = 1 / 6, rng: np.random.Generator | None = None) -> np.ndarray:
    """Randomised dependence coefficient between all pairs of columns (Lopez-Paz et al. 2013):
    copula transform, ``k`` random sine features, largest canonical correlation."""
    rng = np.random.default_rng(0) if rng is None else rng
    n, m = X.shape
    Q = []
    for j in range(m):
        u = _ecdf(X[:, j])
        F = np.sin(np.c_[u, np.ones(n)] @ (rng.normal(0, s, (2, k)) * np.sqrt(2 * np.pi) * 10))
        F = F - F.mean(axis=0)
        if np.allclose(F, 0) or np.ptp(X[:, j]) == 0:
            Q.append(None)
            continue
        q, r = np.linalg.qr(F)
        keep = np.abs(np.diag(r)) > 1e-8 * np.abs(r).max()
        Q.append(q[:, keep])
    R = np.eye(m)
    for a in range(m):
        for b in range(a + 1, m):
            if Q[a] is None or Q[b] is None:
                v = 0.0
            else:
                v = float(np.linalg.svd(Q[a].T @ Q[b], compute_uv=False)[0])
            R[a, b] = R[b, a] = min(v, 1.0)
    return R


def _components(adj: np.ndarray) -> list[list[int]]:
    from scipy.sparse.csgraph import connected_components
    n, lab = connected_components(adj, directed=False)
    return [list(np.flatnonzero(lab == c)) for c in range(n)]


class LearnSPN:
    """LearnSPN with k-means row splits and RDC column splits (notebook 14/01).

    Parameters
    ----------
    types : per variable ``("cont", n_levels or None)`` or ``("cat", n_values)``
        (:meth:`iclr25.lice.DataHandler.spn_types` gives them).
    min_instances_slice : slices with fewer rows are factorised (official default 200).
    rdc_threshold : dependence above which two variables stay together (0.3).
    n_clusters : k-means clusters per row split (2).
    max_bins : at most this many histogram bins per leaf (bounds the MIO's size).
    alpha : Laplace smoothing (pseudo-count per bin / category).
    """

    def __init__(self, types: Sequence[tuple[str, int | None]], *, min_instances_slice: int = 200,
                 rdc_threshold: float = 0.3, n_clusters: int = 2, max_bins: int = 10,
                 alpha: float = 1.0, max_depth: int = 20, seed: int = 0) -> None:
        for t in types:
            if t[0] not in ("cont", "cat"):
                raise ValueError(f"unknown variable type {t[0]!r}; valid: 'cont', 'cat'")
        if min_instances_slice < 2 or n_clusters < 2 or max_bins < 1:
            raise ValueError("need min_instances_slice >= 2, n_clusters >= 2, max_bins >= 1")
        self.types = list(types)
        self.min_instances_slice = min_instances_slice
        self.rdc_threshold = rdc_threshold
        self.n_clusters = n_clusters
        self.max_bins = max_bins
        self.alpha = alpha
        self.max_depth = max_depth
        self.seed = seed

    def fit(self, X: np.ndarray) -> SPN:
        """Learn an SPN on the SPN matrix ``X`` (rows x variables)."""
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[1] != len(self.types):
            raise ValueError(f"X must be (rows, {len(self.types)}), got {X.shape}")
        if len(X) < 2:
            raise ValueError("need at least two rows")
        for j, (kind, n) in enumerate(self.types):
            if kind == "cont" and (X[:, j].min() < -1e-9 or X[:, j].max() > 1 + 1e-9):
                raise ValueError(f"variable {j} is continuous and must lie in [0, 1]")
            if kind == "cat" and (X[:, j].min() < 0 or X[:, j].max() > n - 1):
                raise ValueError(f"variable {j} is categorical with {n} values: indices 0..{n - 1}")
        self._rng = np.random.default_rng(self.seed)
        self._spn = SPN(nodes=[], n_vars=X.shape[1])
        self._learn(X, list(range(X.shape[1])), 0)
        return self._spn

    # each builder appends nodes and returns the new node's id
    def _add(self, node) -> int:
        self._spn.nodes.append(node)
        return node.id

    def _leaf(self, x: np.ndarray, var: int) -> int:
        kind, n = self.types[var]
        nid = len(self._spn.nodes)
        if kind == "cat":
            cnt = np.bincount(np.round(x).astype(int), minlength=n) + self.alpha
            return self._add(Leaf(nid, var, "cat", np.log(cnt / cnt.sum())))
        breaks, logv = self._histogram(x, n)
        return self._add(Leaf(nid, var, "hist", logv, breaks))

    def _histogram(self, x: np.ndarray, n_levels: int | None) -> tuple[np.ndarray, np.ndarray]:
        if n_levels is not None and n_levels >= 2:
            # integer levels k/(L-1); bins are groups of consecutive levels, breaks at half-levels
            L = n_levels
            lev = np.clip(np.round(x * (L - 1)).astype(int), 0, L - 1)
            lo_l, hi_l = lev.min(), lev.max()
            n_in = min(self.max_bins, hi_l - lo_l + 1)
            cuts = np.unique(np.round(np.linspace(lo_l, hi_l + 1, n_in + 1)).astype(int))
            cuts = list(cuts)
            if lo_l > 0:
                cuts = [0] + cuts
            if hi_l < L - 1:
                cuts = cuts + [L]
            cuts = np.array(cuts)
            counts = np.array([np.sum((lev >= a) & (lev < b)) for a, b in zip(cuts[:-1], cuts[1:])],
                              dtype=float) + self.alpha
            p = counts / counts.sum()
            per_level = p / np.diff(cuts)
            breaks = (cuts - 0.5) / (L - 1)
            breaks[0], breaks[-1] = 0.0, 1.0
            return breaks, np.log(per_level)
        lo, hi = float(x.min()), float(x.max())
        if hi - lo < 1e-9:
            lo, hi = max(0.0, lo - 0.01), min(1.0, hi + 0.01)
        inner = np.histogram_bin_edges(x, bins="auto", range=(lo, hi))
        if len(inner) - 1 > self.max_bins:
            inner = np.linspace(lo, hi, self.max_bins + 1)
        edges = list(inner)
        if lo > 1e-9:
            edges = [0.0] + edges
        if hi < 1 - 1e-9:
            edges = edges + [1.0]
        edges = np.array(edges)
        edges[0], edges[-1] = 0.0, 1.0
        k = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
        counts = np.bincount(k, minlength=len(edges) - 1).astype(float) + self.alpha
        p = counts / counts.sum()
        return edges, np.log(p / np.diff(edges))

    def _factorise(self, X: np.ndarray, scope: list[int]) -> int:
        kids = [self._leaf(X[:, v], v) for v in scope]
        return self._add(Product(len(self._spn.nodes), kids))

    def _learn(self, X: np.ndarray, scope: list[int], depth: int) -> int:
        if len(scope) == 1:
            return self._leaf(X[:, scope[0]], scope[0])
        if len(X) < self.min_instances_slice or depth >= self.max_depth:
            return self._factorise(X, scope)
        D = X[:, scope]
        sub = D if len(D) <= 2000 else D[self._rng.choice(len(D), 2000, replace=False)]
        R = rdc(sub, rng=self._rng)
        comps = _components(R > self.rdc_threshold)
        if len(comps) > 1:
            kids = [self._learn(X, [scope[i] for i in c], depth + 1) for c in comps]
            return self._add(Product(len(self._spn.nodes), kids))
        from sklearn.cluster import KMeans
        Z = D.copy()
        for i, v in enumerate(scope):
            kind, n = self.types[v]
            if kind == "cat" and n > 1:
                Z[:, i] = Z[:, i] / (n - 1)
        lab = KMeans(self.n_clusters, n_init=3, random_state=int(self._rng.integers(2**31))).fit_predict(Z)
        sizes = np.bincount(lab, minlength=self.n_clusters)
        if (sizes == 0).any() or sizes.max() == len(X):
            return self._factorise(X, scope)
        kids = [self._learn(X[lab == c], scope, depth + 1) for c in range(self.n_clusters)]
        w = sizes / sizes.sum()
        return self._add(Sum(len(self._spn.nodes), kids, np.log(w)))
