"""The allele table and Nei's genetic similarity between language models (chapter 12).

Notation of the paper (Yax et al., 2025, Sec. 3): a *genome* is a list of G *genes* (text
prompts); the *alleles* of gene g in model i are the distinct short completions the model
produces, and ``P_ig(a)`` is the frequency of allele ``a`` among the N completions of model ``i``
on gene ``g``. Nei's similarity sums over genes before taking the ratio::

    S_ij = sum_g sum_a P_ig(a) P_jg(a) / sqrt( sum_g sum_a P_ig(a)^2  *  sum_g sum_a P_jg(a)^2 )

and the distance is ``D_ij = -log S_ij``.

Fast path: stack every model's frequencies into one sparse matrix ``F`` of shape
``(M, sum_g A_g)`` (one column per (gene, allele) pair). Then the numerator for all pairs is
``F F^T`` (one sparse product) and the denominators are its diagonal.
Reference path: the per-pair, per-gene dictionary loops the official notebooks use.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

__all__ = ["AlleleTable", "nei_similarity", "nei_distance", "nei_similarity_loops", "METHODS"]

#: the two paths of :func:`nei_similarity`
METHODS = ("sparse", "loops")


@dataclass
class AlleleTable:
    """Allele frequencies of M models on G genes, as a sparse ``(M, n_alleles)`` matrix.

    Introduced in chapter 12 (PhyloLM). Build it with :meth:`from_alleles`.

    Attributes
    ----------
    models
        Model names, one per row of :attr:`F`.
    F
        ``scipy.sparse.csr_matrix`` of frequencies ``P_ig(a)``: row = model, column = one
        (gene, allele) pair; each model's entries of one gene sum to 1.
    gene_of
        ``(n_alleles,)`` int array: the gene index of each column.
    alleles
        The allele string of each column.
    n_genes
        G.
    """

    models: list[str]
    F: sp.csr_matrix
    gene_of: np.ndarray
    alleles: list[str]
    n_genes: int

    @classmethod
    def from_alleles(cls, alleles: Mapping[str, Sequence[Sequence[str]]]) -> "AlleleTable":
        """Count alleles: ``alleles[model][g]`` is the list of the N completions of gene g.

        Every model must have the same number of genes; N may differ between models and genes
        (frequencies divide by each list's own length). An empty list is an error.
        """
        if not alleles:
            raise ValueError("alleles is empty: expected {model_name: [[allele, ...] per gene]}")
        models = list(alleles)
        G = {len(alleles[m]) for m in models}
        if len(G) != 1:
            raise ValueError(f"every model needs the same number of genes; got {sorted(G)}")
        n_genes = G.pop()
        if n_genes == 0:
            raise ValueError("no genes: each model needs at least one list of alleles")
        col_of: dict[tuple[int, str], int] = {}
        gene_of: list[int] = []
        names: list[str] = []
        rows, cols, vals = [], [], []
        for g in range(n_genes):
            for i, m in enumerate(models):
                draws = alleles[m][g]
                if isinstance(draws, str) or len(draws) == 0:
                    raise ValueError(f"alleles[{m!r}][{g}] must be a non-empty list of strings")
                n = len(draws)
                for a, c in Counter(draws).items():
                    key = (g, a)
                    if key not in col_of:
                        col_of[key] = len(names)
                        names.append(a)
                        gene_of.append(g)
                    rows.append(i)
                    cols.append(col_of[key])
                    vals.append(c / n)
        F = sp.csr_matrix((np.asarray(vals, float), (rows, cols)), shape=(len(models), len(names)))
        return cls(models, F, np.asarray(gene_of, dtype=np.int64), names, n_genes)

    @property
    def M(self) -> int:
        return len(self.models)

    def genes(self, idx: Sequence[int]) -> "AlleleTable":
        """The table restricted to genes ``idx`` (in that order; columns of other genes dropped)."""
        idx = [int(g) for g in idx]
        if any(not 0 <= g < self.n_genes for g in idx):
            raise IndexError(f"gene index out of range [0, {self.n_genes})")
        blocks = [np.flatnonzero(self.gene_of == g) for g in idx]
        cols = np.concatenate(blocks) if blocks else np.zeros(0, np.int64)
        new_gene = np.concatenate([np.full(len(b), k) for k, b in enumerate(blocks)]) \
            if blocks else np.zeros(0, np.int64)
        return AlleleTable(list(self.models), self.F[:, cols].tocsr(), new_gene.astype(np.int64),
                           [self.alleles[c] for c in cols], len(idx))

    def select(self, models: Sequence[str]) -> "AlleleTable":
        """The table restricted to ``models`` (rows, in that order)."""
        missing = [m for m in models if m not in self.models]
        if missing:
            raise KeyError(f"unknown model(s) {missing}; the table has {self.models}")
        rows = [self.models.index(m) for m in models]
        return AlleleTable(list(models), self.F[rows].tocsr(), self.gene_of.copy(),
                           list(self.alleles), self.n_genes)

    def to_dicts(self) -> list[dict[str, dict[str, float]]]:
        """``P[g][model] = {allele: frequency}``: the nested dictionaries of the official code."""
        out: list[dict[str, dict[str, float]]] = [dict() for _ in range(self.n_genes)]
        F = self.F.tocoo()
        for i, c, v in zip(F.row, F.col, F.data):
            out[self.gene_of[c]].setdefault(self.models[i], {})[self.alleles[c]] = float(v)
        return out

    def __repr__(self) -> str:
        return (f"AlleleTable(M={self.M} models, G={self.n_genes} genes, "
                f"{self.F.shape[1]} distinct alleles, {self.F.nnz} non-zeros)")


def nei_similarity_loops(P: Sequence[Mapping[str, Mapping[str, float]]],
                         models: Sequence[str]) -> np.ndarray:
    """Reference path: Nei's similarity from nested dicts ``P[g][model][allele]``, pair by pair.

    Introduced in chapter 12. O(M^2 G A) Python loops, what the official notebooks compute.
    """
    M = len(models)
    S = np.zeros((M, M))
    for i, a in enumerate(models):
        for j, b in enumerate(models):
            if j < i:
                S[i, j] = S[j, i]
                continue
            num = den_a = den_b = 0.0
            for gene in P:
                pa, pb = gene.get(a, {}), gene.get(b, {})
                for allele, f in pa.items():            # sum_a P_ig(a) P_jg(a)
                    num += f * pb.get(allele, 0.0)
                den_a += sum(f * f for f in pa.values())  # sum_a P_ig(a)^2
                den_b += sum(f * f for f in pb.values())
            S[i, j] = num / np.sqrt(den_a * den_b)
    return S


def nei_similarity(table: AlleleTable, method: str = "sparse") -> np.ndarray:
    """Nei's similarity matrix ``S`` (M x M) of an :class:`AlleleTable`.

    Introduced in chapter 12 (PhyloLM, Sec. 3). ``method="sparse"`` (default): ``K = F F^T``
    in one sparse product, ``S = K / sqrt(diag(K) diag(K)^T)``. ``"loops"``: the reference
    dictionary loops (:func:`nei_similarity_loops`); both agree to rounding (tested).
    S is symmetric, its diagonal is exactly 1, its entries lie in [0, 1].
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    if not isinstance(table, AlleleTable):
        raise TypeError(f"expected an AlleleTable, got {type(table).__name__}")
    if method == "loops":
        return nei_similarity_loops(table.to_dicts(), table.models)
    K = (table.F @ table.F.T).toarray()
    d = np.sqrt(np.diag(K))
    S = K / np.outer(d, d)
    S = 0.5 * (S + S.T)
    np.fill_diagonal(S, 1.0)
    return np.clip(S, 0.0, 1.0)


def nei_distance(S: np.ndarray, eps: float = 1e-10) -> np.ndarray:
    """Nei's distance ``D = -log(max(S, eps))``, zero on the diagonal.

    Introduced in chapter 12. ``eps`` bounds the distance of models that share no allele
    (the paper's notebooks use 1e-10).
    """
    S = np.asarray(S, dtype=float)
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"S must be a square matrix, got shape {S.shape}")
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps!r}")
    D = -np.log(np.maximum(S, eps))
    np.fill_diagonal(D, 0.0)
    return np.maximum(D, 0.0)
