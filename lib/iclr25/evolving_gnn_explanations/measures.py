"""The measurements the chapter's registry (``book/claims/16-evolving-gnn-explanations.yaml``)
judges: one run per seed, reduced to the registered statistics. The notebooks hand these numbers to
``claims.finding`` / ``claims.check``; no threshold or verdict is decided here.

- ``01-message-flow-attribution``: :func:`relative_completeness`, :func:`completeness_by_node`,
  :func:`completeness_seed`, :func:`completeness_medians`;
- ``02-layer-edges-vs-baselines``: :func:`molecule_cases`, :func:`real_node_cases`,
  :func:`real_link_cases`, :func:`gap_shares`, :func:`exact_tables`, :func:`selection_seed`,
  :func:`fidelity_statistic`, :func:`selection_statistics`;
- ``03-motif-case-study``: :func:`motif_hits`, :func:`motif_table`, :func:`pyg_motif_hits`,
  :func:`flip_share`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ..progress import progress
from .baselines import (CHANGE_BASELINES, CHANGE_LABELS, change_attribution, fidelity_curves, pyg_edge_scores,
                        rank_input_edges, top_abs)
from .flows import explain_change
from .graphs import molecule_like, real_evolving_graph, sbm_evolving
from .model import Target, one_thread, train_gcn
from .selection import kl_divergence, select, softmax

__all__ = ["relative_completeness", "completeness_by_node", "completeness_seed", "completeness_medians",
           "molecule_cases", "real_node_cases", "real_link_cases", "gap_shares", "exact_tables", "selection_seed",
           "fidelity_statistic", "selection_statistics", "FIDELITY_CONTROLS", "TASKS", "motif_hits", "motif_table",
           "pyg_motif_hits", "flip_share", "MOTIF_CONTROLS"]

#: registry id suffix -> the method's name in :func:`fidelity_curves` (``fidelity-<task>-vs-<suffix>``)
FIDELITY_CONTROLS = {
    "deeplift-kl": "DeepLIFT (KL)", "grad-kl": "Grad (KL)", "ig-kl": "IG (KL)", "gnn-lrp-kl": "GNN-LRP (KL)",
    "deeplift-top": "DeepLIFT (top)", "gnn-lrp-top": "GNN-LRP (top)", "grad-top": "Grad (top)",
    "ig-top": "IG (top)", "gnnexplainer": "GNNExplainer", "graphmask": "GraphMaskExplainer",
    "random": "random layer edges", "top-abs-phi": "top-|Φ| layer edges", "input-edges": "input edges (KL)",
}
OURS = "layer edges (KL)"
NO_EDGE = "no edge (old prediction)"
#: the three tasks of the paper, as the kind of the explained target
TASKS = ("graph", "node", "link")


# ---------------------------------------------------------------------------------------------
# 01: completeness


def relative_completeness(Phi: np.ndarray, delta: np.ndarray) -> float:
    """``max_c |sum_e Phi[e, c] - delta[c]| / max_c |delta[c]|``: the share of the change an
    attribution ``Phi`` (M, C) of the change ``delta`` (C,) misses or adds on its M edges (0 for a
    complete one). Chapter 16, ``01-message-flow-attribution``."""
    Phi, delta = np.asarray(Phi, dtype=np.float64), np.asarray(delta, dtype=np.float64).ravel()
    if Phi.ndim != 2 or Phi.shape[1] != delta.size:
        raise ValueError(f"Phi must be (M, {delta.size}) for a change of {delta.size} logits, got {Phi.shape}")
    scale = max(float(np.abs(delta).max(initial=0.0)), 1e-12)
    return float(np.abs(Phi.sum(0) - delta).max(initial=0.0)) / scale


def completeness_by_node(model, graph, targets, ig_steps: int = 64, label: str = "") -> pd.DataFrame:
    """One row per explained node: the relative completeness error (:func:`relative_completeness`)
    on the changed layer edges of ours (``"ours"``) and of each change-aware baseline (DeepLIFT,
    GNN-LRP, Grad, IG with ``ig_steps``), with the graph's ``label``."""
    rows = []
    for k in targets:
        a = explain_change(model, graph, Target("node", int(k)))
        rows.append({"graph": label, "target": int(k), "ours": relative_completeness(a.phi_layer, a.delta),
                     **{CHANGE_LABELS[b]: relative_completeness(change_attribution(model, graph, a, b, ig_steps=ig_steps),
                                                                a.delta) for b in CHANGE_BASELINES}})
    return pd.DataFrame(rows)


SBM_LABEL, KARATE_LABEL = "SBM, all weights drift", "karate club split"


def completeness_seed(cfg, seed: int) -> pd.DataFrame:
    """Notebook 01's completeness comparison at one ``seed`` (graph, training and explained nodes
    drawn anew): the drifting SBM graph of ``cfg`` (``cfg.n_targets`` random nodes) and the
    karate club's split (every member), :func:`completeness_by_node` on both, with a ``seed``
    column."""
    g = sbm_evolving(cfg.n_nodes, cfg.n_blocks, drift=cfg.drift, n_add=cfg.n_add, n_remove=cfg.n_remove, seed=seed)
    m = train_gcn(g, "node", hidden=cfg.hidden, n_steps=cfg.n_steps, lr=cfg.lr, seed=seed, desc=f"SBM GCN, seed {seed}")
    targets = np.random.default_rng(seed).choice(g.n_nodes, cfg.n_targets, replace=False)
    kg = real_evolving_graph("karate_split", seed=seed)
    km = train_gcn(kg, "node", hidden=cfg.hidden, n_steps=cfg.n_steps, lr=cfg.lr, snapshot="old", seed=seed,
                   desc=f"karate GCN, seed {seed}")
    steps = max(cfg.ig_steps)
    out = pd.concat([completeness_by_node(m, g, targets, steps, SBM_LABEL),
                     completeness_by_node(km, kg, range(kg.n_nodes), steps, KARATE_LABEL)], ignore_index=True)
    return out.assign(seed=seed)


def completeness_medians(table: pd.DataFrame) -> pd.DataFrame:
    """Per seed (rows) the median relative completeness error of each method over the explained
    nodes: columns ``(<method>, "all")`` (SBM targets and karate members pooled), ``(<method>,
    "karate")`` and ``(<method>, "sbm")``."""
    methods = ["ours"] + [CHANGE_LABELS[b] for b in CHANGE_BASELINES]
    parts = {"all": table, "karate": table[table.graph == KARATE_LABEL], "sbm": table[table.graph == SBM_LABEL]}
    cols = {(m, k): d.groupby("seed")[m].median() for m in methods for k, d in parts.items()}
    return pd.DataFrame(cols)


# ---------------------------------------------------------------------------------------------
# 02: fidelity and selection


def molecule_cases(cfg, seed: int):
    """The graph-classification instances at ``seed``: ``cfg.n_graphs`` synthetic molecules, a GCN
    trained on both snapshots, and the first ``cfg.n_instances`` molecules with more than 5 changed
    input edges (the paper's filter) and 20 changed layer edges. Returns ``(cases, accuracy on
    G1)``, ``cases`` a list of ``(model, graph, attribution)``."""
    mols = molecule_like(cfg.n_graphs, seed=seed)
    gcn = train_gcn(mols, "graph", hidden=cfg.hidden, n_steps=cfg.n_steps, lr=cfg.lr, seed=seed,
                    desc=f"molecule GCN, seed {seed}")
    with torch.no_grad():
        acc = float(np.mean([int(gcn(m.X, m.A1).argmax()) == int(m.y) for m in mols]))
    cases = []
    for m in mols:
        att = explain_change(gcn, m)
        if len(att.input_edges) > 5 and len(att.layer_edges) > 20:
            cases.append((gcn, m, att))
        if len(cases) == cfg.n_instances:
            break
    return cases, acc


def _moved(p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    return np.array([kl_divergence(b, a) for a, b in zip(p0, p1)])


def real_node_cases(cfg, seed: int):
    """Node-classification instances at ``seed``: for each real graph of ``cfg.nx_graphs`` a GCN
    trained on ``G0`` and its ``cfg.nx_targets`` nodes whose prediction moved most
    (``KL(p_new || p_old)``). Returns ``(cases, info)``: ``info`` one row per graph (accuracy on
    both snapshots, flips)."""
    cases, info = [], []
    for name in cfg.nx_graphs:
        g = real_evolving_graph(name, seed=seed)
        m = train_gcn(g, "node", hidden=cfg.hidden, n_steps=cfg.n_steps, lr=cfg.lr, snapshot="old", seed=seed,
                      desc=f"{name}, seed {seed}")
        with torch.no_grad():
            p0, p1 = (torch.softmax(m(g.X, A), 1).numpy() for A in (g.A0, g.A1))
        info.append({"graph": name, "nodes": g.n_nodes, "changed entries": len(g.changed_edges()),
                     "accuracy G0": float((p0.argmax(1) == g.y).mean()),
                     "accuracy G1": float((p1.argmax(1) == g.y).mean()),
                     "flips": int((p0.argmax(1) != p1.argmax(1)).sum())})
        for k in np.argsort(-_moved(p0, p1), kind="stable")[:cfg.nx_targets]:
            cases.append((m, g, explain_change(m, g, Target("node", int(k)))))
    return cases, pd.DataFrame(info)


def real_link_cases(cfg, seed: int):
    """Link-prediction instances at ``seed``: for each real graph of ``cfg.nx_graphs`` a link GCN
    trained on ``G0`` (positives: its edges; negatives: as many node pairs without an edge, drawn
    with ``seed``) and the ``cfg.nx_targets`` node pairs whose predicted link distribution moved most
    between the snapshots (``KL(p_new || p_old)`` over all pairs). Returns ``(cases, info)``."""
    cases, info = [], []
    for name in cfg.nx_graphs:
        g = real_evolving_graph(name, seed=seed)
        n = g.n_nodes
        iu, ju = np.triu_indices(n, 1)
        W0 = g.W0.toarray()
        pos = np.flatnonzero(W0[iu, ju] != 0)
        neg = np.flatnonzero(W0[iu, ju] == 0)
        rng = np.random.default_rng(seed)
        neg = rng.choice(neg, min(len(neg), len(pos)), replace=False)
        idx = np.r_[pos, neg]
        pairs = np.stack([iu[idx], ju[idx]], 1)
        labels = np.r_[np.ones(len(pos), np.int64), np.zeros(len(neg), np.int64)]
        m = train_gcn(g, "link", hidden=cfg.hidden, n_steps=cfg.n_steps, lr=cfg.lr, snapshot="old",
                      link_pairs=pairs, link_labels=labels, seed=seed, desc=f"{name} links, seed {seed}")
        allp = np.stack([iu, ju], 1)
        with torch.no_grad():
            p0, p1 = (torch.softmax(m(g.X, A, pairs=allp), 1).numpy() for A in (g.A0, g.A1))
            acc = float((torch.softmax(m(g.X, g.A0, pairs=pairs), 1).numpy().argmax(1) == labels).mean())
        info.append({"graph": name, "pairs": len(allp), "training accuracy G0": acc,
                     "flips": int((p0.argmax(1) != p1.argmax(1)).sum())})
        for q in np.argsort(-_moved(p0, p1), kind="stable")[:cfg.nx_targets]:
            cases.append((m, g, explain_change(m, g, Target("link", (int(allp[q, 0]), int(allp[q, 1]))))))
    return cases, pd.DataFrame(info)


def _data_name(graph) -> str:
    return graph.name.rstrip("0123456789")


def gap_shares(res: pd.DataFrame, cases) -> pd.DataFrame:
    """The rows of :func:`fidelity_curves` (times dropped) with ``task`` (graph / node / link),
    ``data`` (the data set) and ``rel``: each instance's fidelity KL divided by that of its old
    prediction (``KL(p_new || p_old)``, no edge changed), the share of the gap an explanation leaves."""
    curves = res[~res.method.str.endswith("time")].copy()
    curves["task"] = [cases[i][2].target.kind for i in curves.instance]
    curves["data"] = [_data_name(cases[i][1]) for i in curves.instance]
    base = curves[curves.method == NO_EDGE].set_index(["instance", "K"])["KL"]
    key = pd.MultiIndex.from_frame(curves[["instance", "K"]])
    curves["rel"] = curves.KL.to_numpy() / base.reindex(key).to_numpy()
    return curves


def exact_tables(cases, k_exact: int, k_mono: int, n_exact: int):
    """Exact selection on the first ``n_exact`` graph-classification cases (surrogate KL):
    ``exact`` (per instance and K <= ``k_exact``: the best K input edges by enumeration, the best 2K
    and 4K layer edges by SCIP, "at most") and ``mono`` (per instance and K <= ``k_mono``: the exact
    optimum with at most K and exactly K layer edges by enumeration, and our relaxation + swaps);
    both with ``KL old`` = ``KL(p_new || p_old)``."""
    small = [c for c in cases if c[2].target.kind == "graph"][:n_exact]
    ex_rows, mono_rows = [], []
    for i, (m, g, att) in enumerate(small):
        p_new = softmax(att.y_new)
        kl_old = kl_divergence(p_new, softmax(att.y_old))
        for K in range(1, min(k_exact, len(att.input_edges)) + 1):
            inp = select(att.phi_input, att.y_old, p_new, K, "enumerate", cardinality="at_most").kl
            lay2 = select(att.phi_layer, att.y_old, p_new, min(2 * K, len(att.layer_edges)), "scip",
                          cardinality="at_most").kl
            lay4 = select(att.phi_layer, att.y_old, p_new, min(4 * K, len(att.layer_edges)), "scip",
                          cardinality="at_most").kl
            ex_rows.append({"instance": i, "K": K, "best K input": inp, "best 2K layer": lay2,
                            "best 4K layer": lay4, "KL old": kl_old})
        for K in range(1, min(k_mono, len(att.layer_edges)) + 1):
            a = select(att.phi_layer, att.y_old, p_new, K, "enumerate", cardinality="at_most").kl
            e = select(att.phi_layer, att.y_old, p_new, K, "enumerate", cardinality="exact").kl
            r = select(att.phi_layer, att.y_old, p_new, K, "relax").kl
            mono_rows.append({"instance": i, "K": K, "exact, at most K": a, "exact, = K": e, "relax+swap, = K": r,
                              "KL old": kl_old})
    return pd.DataFrame(ex_rows), pd.DataFrame(mono_rows)


def selection_seed(cfg, seed: int, cases=None) -> dict:
    """Notebook 02 at one ``seed`` (molecules, real-graph training and link pairs drawn anew):
    ``cases`` (graph, node and link instances; built here when None), ``curves``
    (:func:`gap_shares` of :func:`fidelity_curves`), ``times`` (seconds per call and method), and
    the exact tables ``exact`` and ``mono`` (:func:`exact_tables`)."""
    if cases is None:
        cases = molecule_cases(cfg, seed)[0] + real_node_cases(cfg, seed)[0] + real_link_cases(cfg, seed)[0]
    res = fidelity_curves(cases, cfg.k_max, seed, pyg_epochs=cfg.pyg_epochs, ig_steps=cfg.ig_steps)
    times = res[res.method.str.endswith("time")].groupby("method")["KL"].mean()
    with one_thread():
        exact, mono = exact_tables(cases, cfg.k_exact, min(cfg.k_max, 3), cfg.n_exact)
    return {"seed": seed, "cases": cases, "curves": gap_shares(res, cases), "times": times,
            "exact": exact, "mono": mono}


def fidelity_statistic(curves: pd.DataFrame, method: str, task: str | None = None, data: str | None = None) -> float:
    """The registered fidelity statistic: ``log`` of the mean over K of the median over instances
    (of ``task`` / ``data``, all when None) of the share of the gap that ``method`` leaves (``rel``
    of :func:`gap_shares`). Lower is better; a difference of -0.105 is 10% less of the gap."""
    d = curves[curves.method == method]
    if task is not None:
        d = d[d.task == task]
    if data is not None:
        d = d[d.data == data]
    if d.empty:
        raise ValueError(f"no rows for method {method!r}, task {task!r}, data {data!r}")
    return float(np.log(d.groupby("K")["rel"].median().mean()))


def selection_statistics(run: dict, nx_graphs=("karate_split", "les_miserables_window")) -> dict:
    """The registered statistics of one seed's :func:`selection_seed` run, by name:

    - ``fidelity-<task>-<suffix>``: :func:`fidelity_statistic` of the method (``ours`` or a key of
      :data:`FIDELITY_CONTROLS`) on the task's instances (NaN where the task has no such rows, e.g.
      the PyG explainers on links);
    - ``half-gap-<data>``: median over the data set's instances (every task on it) of the gap
      share at K = 1 of our selected layer edge;
    - ``2k-layer`` / ``k-input``: mean over the exact cases of the exact KL of the best 2K layer
      edges / best K input edges, each divided by ``KL(p_new || p_old)``;
    - ``exact-k-rise``: the largest rise of the exact (= K) KL from K to K + 1 over the instances,
      divided by ``KL(p_new || p_old)``; 0 when it never rises;
    - ``relax-gap``: the largest gap in nats between relaxation + swaps and the exact (= K) optimum;
    - ``4k-ok`` / ``at-most-ok`` / ``exact-cases``: the provable relations (checks), case by case.
    """
    curves, exact, mono = run["curves"], run["exact"], run["mono"]
    out = {}
    for task in TASKS:
        for key, method in {"ours": OURS, **FIDELITY_CONTROLS}.items():
            d = curves[(curves.task == task) & (curves.method == method)]
            out[f"fidelity-{task}-{key}"] = fidelity_statistic(d, method) if len(d) else float("nan")
    k1 = curves[(curves.K == 1) & (curves.method == OURS)]
    for name in ("mol",) + tuple(nx_graphs):
        d = k1[k1.data == name]
        out[f"half-gap-{name}"] = float(d.rel.median()) if len(d) else float("nan")
    tol = 1e-8  # SCIP's feasibility tolerance is 1e-7 on the log-sum-exp constraint
    out["2k-layer"] = float((exact["best 2K layer"] / exact["KL old"]).mean())
    out["k-input"] = float((exact["best K input"] / exact["KL old"]).mean())
    out["4k-ok"] = bool((exact["best 4K layer"] <= exact["best K input"] + tol).all())
    out["exact-cases"] = len(exact)
    rises = [float(np.diff(d["exact, = K"].to_numpy()).max(initial=0.0) / d["KL old"].iloc[0])
             for _, d in mono.groupby("instance")]
    out["exact-k-rise"] = max(0.0, max(rises, default=0.0))
    out["at-most-ok"] = bool(all((np.diff(d["exact, at most K"].to_numpy()) <= tol).all()
                                 for _, d in mono.groupby("instance")))
    out["relax-gap"] = float((mono["relax+swap, = K"] - mono["exact, = K"]).max())
    return out


# ---------------------------------------------------------------------------------------------
# 03: the motif case study

#: registry id suffix -> the column of :func:`motif_table` (``motif-vs-<suffix>``)
MOTIF_CONTROLS = {"random": "random layer edge", "input-edge": "input edge (KL)",
                  **{f"{b.replace('_', '-')}-{u}": f"{CHANGE_LABELS[b]} ({u.upper() if u == 'kl' else u})"
                     for u in ("kl", "top") for b in CHANGE_BASELINES}}


def _in_motif(graph, pairs: np.ndarray) -> np.ndarray:
    return graph.motif[pairs[:, 0]] & graph.motif[pairs[:, 1]]


def motif_hits(model, graph, ig_steps: int = 16) -> dict:
    """One graph of the case study: whether the single (K = 1) edge each method selects lies inside
    the motif (both endpoints motif nodes). Ours (``"layer edge (KL)"``, exact enumeration), one
    input edge by the same selection, our largest |Phi|, each change-aware baseline fed to the same
    selection (``"<label> (KL)"``) and by its largest score (``"<label> (top)"``); ``"random layer
    edge"`` is the share of the changed layer edges inside the motif (a random edge's chance);
    ``"prediction flipped"`` whether the argmax moved."""
    att = explain_change(model, graph)
    p_new = softmax(att.y_new)

    def pick(Phi):
        return select(Phi, att.y_old, p_new, 1, "enumerate").index[0]

    inm = _in_motif(graph, att.layer_edges[:, 1:])
    inm_inp = _in_motif(graph, att.input_edges)
    row = {"prediction flipped": bool(np.argmax(att.y_new) != np.argmax(att.y_old)),
           "layer edge (KL)": bool(inm[pick(att.phi_layer)]), "input edge (KL)": bool(inm_inp[pick(att.phi_input)]),
           "top-|Φ| layer edge": bool(inm[top_abs(att.phi_layer, 1)[0]])}
    for b in CHANGE_BASELINES:
        Phi = change_attribution(model, graph, att, b, ig_steps=ig_steps)
        row[f"{CHANGE_LABELS[b]} (KL)"] = bool(inm[pick(Phi)])
        row[f"{CHANGE_LABELS[b]} (top)"] = bool(inm[top_abs(Phi, 1)[0]])
    row["random layer edge"] = float(inm.mean())
    return row


def motif_table(model, graphs, ig_steps: int = 16) -> pd.DataFrame:
    """:func:`motif_hits` for every graph (one row each, with its ``motif`` on ``G0`` and whether the
    model classifies ``G0`` correctly)."""
    rows = []
    with one_thread():
        for g in progress(graphs, desc="explain"):
            with torch.no_grad():
                p0 = int(model(g.X, g.A0).argmax())
            rows.append({"motif": "house" if int(g.y) == 1 else "cycle", "correct on G0": p0 == int(g.y),
                         **motif_hits(model, g, ig_steps)})
    return pd.DataFrame(rows)


def pyg_motif_hits(model, graphs, explainer: str = "gnnexplainer", epochs: int = 100, seed: int = 0) -> np.ndarray:
    """Per graph (1/0): whether a static PyG explainer's highest-scored changed input edge on ``G1``
    (its edge mask, :func:`pyg_edge_scores`) lies inside the motif."""
    out = []
    with one_thread():
        for g in progress(graphs, desc=explainer):
            att = explain_change(model, g)
            s = pyg_edge_scores(model, g, att, explainer, epochs=epochs, seed=seed)
            q = rank_input_edges(att, s, 1)[0]
            out.append(float(_in_motif(g, att.input_edges[[q]])[0]))
    return np.array(out)


def flip_share(pred_old, pred_new, y) -> float:
    """Among the graphs classified correctly on ``G0``, the share whose prediction on ``G1`` differs
    (NaN when none is correct)."""
    pred_old, pred_new, y = (np.asarray(v).ravel() for v in (pred_old, pred_new, y))
    ok = pred_old == y
    return float(np.mean(pred_new[ok] != pred_old[ok])) if ok.any() else float("nan")
