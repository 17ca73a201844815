"""Chapter 12 benchmark: Nei similarity and neighbour joining, through the core harness.

``12-nei-similarity``: Nei's similarity matrix of M = 150 models on G = 128 genes with N = 32
alleles each (the paper's genome), from a synthetic allele table (families of models that share
allele distributions).

- ours: :func:`iclr25.phylolm.nei_similarity`, one sparse product ``F F^T`` over the
  (M, sum_g A_g) frequency matrix;
- official-style loops (baseline): nested dictionaries ``P[g][model][allele]`` and a Python
  loop over pairs, genes and alleles, as the official notebooks compute it
  (:func:`iclr25.phylolm.nei.nei_similarity_loops`; timed once, it takes seconds).

Outputs agree to 1e-12. Target: >= 100x.

``12-neighbor-joining``: a tree from the same kind of distance matrix (M models, default 100)
by our NumPy neighbour joining, ``Bio.Phylo``'s ``DistanceTreeConstructor().nj`` (what the
official code uses) and ``scikit-bio``'s ``skbio.tree.nj``. Outputs agree when the trees have
the same topology (Robinson-Foulds distance 0). Peers that are not installed are recorded as
skipped. ``--quick`` runs small sizes.
"""

from __future__ import annotations

import argparse
import io

import numpy as np

from iclr25 import bench
from iclr25 import phylolm as pl


def synthetic_alleles(M: int, G: int, N: int, *, n_families: int = 10, seed: int = 0) -> dict:
    """M models in families: each family has per-gene allele weights; members perturb them."""
    rng = np.random.default_rng(seed)
    vocab = [f"{a:04d}" for a in range(40)]
    fam_w = rng.dirichlet(np.full(len(vocab), 0.3), size=(n_families, G))
    out = {}
    for m in range(M):
        f = m % n_families
        w = fam_w[f] * rng.gamma(2.0, 0.5, size=fam_w[f].shape)
        w /= w.sum(1, keepdims=True)
        out[f"model{m:03d}"] = [[vocab[k] for k in rng.choice(len(vocab), N, p=w[g])]
                                for g in range(G)]
    return out


def to_tree(newick: str) -> pl.Tree:
    return pl.parse_newick(newick)


def rf_distance(a: pl.Tree, b: pl.Tree) -> float:
    return pl.robinson_foulds(a, b)


def bench_nei(M: int, G: int, N: int, repeat: int) -> dict:
    table = pl.AlleleTable.from_alleles(synthetic_alleles(M, G, N))
    P = table.to_dicts()
    cmp = bench.Comparison("12-nei-similarity", "Nei similarity matrix (M models, G genes, N draws)",
                           chapter="12-phylolm", target=100.0, tol=1e-12, repeat=repeat,
                           settings={"M": M, "G": G, "N": N, "alleles": table.F.shape[1]})
    cmp.add("ours (sparse F F^T)", lambda: pl.nei_similarity(table),
            what="scipy.sparse product over the (M, sum_g A_g) frequency matrix")
    cmp.add("official-style dict loops", lambda: pl.nei.nei_similarity_loops(P, table.models),
            role="baseline", repeat=1, warmup=0,
            what="Python loops over pairs, genes and alleles of nested dicts")
    return cmp.run(distance=bench.max_abs_diff)


def bench_nj(M: int, repeat: int) -> dict:
    table = pl.AlleleTable.from_alleles(synthetic_alleles(M, 64, 16, seed=1))
    D = pl.nei_distance(pl.nei_similarity(table))
    names = table.models
    cmp = bench.Comparison("12-neighbor-joining", "Neighbour joining on a Nei distance matrix",
                           chapter="12-phylolm", tol=0.0, repeat=repeat,
                           settings={"M": M, "distance": "Nei, G=64, N=16 synthetic"})
    cmp.add("ours (NumPy NJ)", lambda: pl.neighbor_joining(D, names),
            what="vectorised Q-matrix neighbour joining")
    try:
        from Bio import Phylo
        from Bio.Phylo.TreeConstruction import DistanceMatrix, DistanceTreeConstructor

        lower = [[float(D[i, j]) for j in range(i + 1)] for i in range(M)]

        def bio_nj():
            tree = DistanceTreeConstructor().nj(DistanceMatrix(list(names), lower))
            buf = io.StringIO()
            Phylo.write(tree, buf, "newick")
            return to_tree(buf.getvalue())

        cmp.add("Bio.Phylo nj", bio_nj, role="baseline", peer="biopython", repeat=1, warmup=0,
                what="DistanceTreeConstructor().nj (the official code's route)")
    except ImportError as exc:
        cmp.skip("Bio.Phylo nj", f"biopython is not installed ({exc})", peer="biopython")
    try:
        from skbio import DistanceMatrix as SkDM
        from skbio.tree import nj as sk_nj

        dm = SkDM(D, ids=list(names))
        cmp.add("scikit-bio nj", lambda: to_tree(str(sk_nj(dm))), role="baseline",
                peer="scikit-bio", what="skbio.tree.nj")
    except ImportError as exc:
        cmp.skip("scikit-bio nj", f"scikit-bio is not installed ({exc})", peer="scikit-bio")
    if not any(c.role == "baseline" for c in cmp.contenders):
        print("12-neighbor-joining: no peer installed (pip install biopython scikit-bio); skipped")
        return {}
    return cmp.run(distance=rf_distance)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    ap.add_argument("--only", choices=("nei", "nj"), help="run one comparison")
    args = ap.parse_args(argv)
    M, G, N, M_nj, rep = (150, 128, 32, 100, 5) if not args.quick else (20, 16, 8, 12, 2)
    if args.only in (None, "nei"):
        bench_nei(M, G, N, rep)
    if args.only in (None, "nj"):
        bench_nj(M_nj, rep)


if __name__ == "__main__":
    main()
