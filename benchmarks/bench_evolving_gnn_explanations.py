"""Chapter 16 benchmark: vectorised message-flow Shapley vs the official code's per-flow loop.

The baseline does what the official code does (``explain/explain_utils.py``): a Python DFS that
enumerates the message flows *anchored at each changed edge* (``findnewpath``/``dfs``) and one
Python-level contribution/Shapley computation per flow, accumulated in dictionaries
(``explain_change(method="loop")``). Ours is ``explain_change(method="vectorised")``: the same flows
as integer arrays by CSR expansion from the changed edges, contributions as batched products.
Both explain the change of a 2-layer GCN's graph-level output on Barabasi-Albert graphs of up to
20k nodes for every change size (2 to 200 changed edges); the layer-edge attributions must agree
to 1e-9 (the harness fails the run otherwise). Every comparison goes through ``iclr25.bench``:
one record per case under ``results/bench/``.

Also timed, on the 1000-node case, as a variant row (a different question: a static explanation of
the new prediction, not an attribution of the change): PyG's GNNExplainer (200 epochs).

Run alone (timings beside another job are noise): ``python benchmarks/bench_evolving_gnn_explanations.py``.
"""

from __future__ import annotations

import argparse

import networkx as nx
import numpy as np

import iclr25.evolving_gnn_explanations as eg
from iclr25 import bench

CASES = [(1000, 10), (5000, 10), (20000, 2), (20000, 10), (20000, 50), (20000, 200)]


def instance(n_nodes, n_changed, seed=0):
    rng = np.random.default_rng(seed)
    G = nx.barabasi_albert_graph(n_nodes, 2, seed=seed)
    e = np.array(G.edges())
    W0 = eg.raw_weights(e, n_nodes, rng.uniform(0.5, 1.5, len(e)))
    W1 = eg.evolve(W0, "edit", n_add=n_changed // 2, n_remove=n_changed - n_changed // 2, seed=seed + 1)
    X = rng.standard_normal((n_nodes, 8))
    return eg.EvolvingGraph(X, eg.normalize_adjacency(W0), eg.normalize_adjacency(W1))


def layer_phi(att):
    """The layer-edge attributions keyed in a fixed order (layer, edge id)."""
    order = np.lexsort((att.layer_eids, att.layer_edges[:, 0]))
    return att.phi_layer[order]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the two smallest cases only")
    args = ap.parse_args(argv)
    model = eg.WeightedGCN(8, 16, 2, 2, "graph", seed=0)
    summary = []
    for n, c in CASES[:2] if args.quick else CASES:
        g = instance(n, c)
        n_flows = len(eg.explain_change(model, g).paths)
        cmp = bench.Comparison(
            f"16-layer-edge-shapley-n{n}-c{c}", f"layer-edge Shapley of a graph-level change, "
            f"{n} nodes, {c} changed edges ({n_flows} flows)", chapter="16-evolving-gnn-explanations",
            target=50.0, tol=1e-9, repeat=5, warmup=1,
            settings={"nodes": n, "changed_edges": c, "flows": n_flows, "model": "2-layer GCN, 8-16-2",
                      "graph": "Barabasi-Albert m=2", "target": "graph (mean readout)"})
        cmp.add("ours (vectorised)", lambda: layer_phi(eg.explain_change(model, g)))
        cmp.add("per-flow loop (official structure)",
                lambda: layer_phi(eg.explain_change(model, g, method="loop")), role="baseline",
                what="DFS anchored at each changed edge; one Shapley split per flow in Python",
                repeat=2 if n_flows > 5000 else 5)
        if n == 1000 and not args.quick:
            try:
                att = eg.explain_change(model, g)
                eg.pyg_edge_scores(model, g, att, "gnnexplainer", epochs=2)
                cmp.add("PyG GNNExplainer (200 epochs)",
                        lambda: eg.pyg_edge_scores(model, g, att, "gnnexplainer", epochs=200),
                        role="variant", agree=False, peer="torch-geometric", repeat=2,
                        what="a static mask of the new prediction: another question, for scale")
            except ImportError as e:  # torch_geometric ships with the dev extra
                cmp.skip("PyG GNNExplainer", str(e), role="variant", peer="torch-geometric")
        rec = cmp.run()
        summary.append(rec["headline"])
    print(f"\nspeed-up over the per-flow loop: median {np.median(summary):.0f}x, "
          f"min {min(summary):.0f}x over {len(summary)} change sizes (target >= 50x)")


if __name__ == "__main__":
    main()
