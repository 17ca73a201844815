"""Chapter 16 -- explaining evolving GNN predictions with axiomatic layer edges.

Yazheng Liu and Sihong Xie, *Explanations of GNN on Evolving Graphs via Axiomatic Layer Edges*,
ICLR 2025 (openreview.net/forum?id=pXN8T5RwNN; official code: yazhengliu/Axiomatic-Layer-Edges, MIT).

Public API
----------
- evolving graphs: :class:`EvolvingGraph`, :func:`sbm_evolving`, :func:`evolve`,
  :func:`window_evolution`, :func:`molecule_like`, :func:`networkx_graph`, :func:`real_evolving_graph`, :func:`ba_motif_pair`,
  :func:`load_edge_list`, :func:`normalize_adjacency`;
- the model: :class:`WeightedGCN` (node, graph and link heads), :class:`Target`, :func:`train_gcn`;
- attribution: :func:`explain_change` (vectorised or per-path loop), :func:`message_flows`,
  :func:`coalition_values`, :func:`shapley_from_values`, :class:`Attribution`;
- selection and fidelity: :func:`select` (relax+top-K+swap, SCIP, enumeration),
  :func:`surrogate_kl`, :func:`fidelity_kl`, :func:`input_to_layer_edges`;
- baselines that see the change: :func:`change_attribution` (DeepLIFT, GNN-LRP, Grad, IG along
  A0 -> A1), :func:`integrated_gradients`, :func:`layer_edge_gradients`; static ones: :func:`top_abs`, :func:`random_choice`,
  :func:`pyg_edge_scores` (GNNExplainer, GraphMaskExplainer);
- the registry's measurements per seed (:mod:`.measures`): :func:`completeness_seed`,
  :func:`completeness_medians`, :func:`selection_seed`, :func:`selection_statistics`,
  :func:`fidelity_statistic`, :func:`motif_table`, :func:`pyg_motif_hits`, :func:`flip_share`;
- configs per profile: :func:`attribution_run`, :func:`selection_run`, :func:`motif_run`.
"""

from .baselines import (CHANGE_BASELINES, CHANGE_LABELS, PYG_EXPLAINERS, change_attribution, fidelity_curves,
                        layer_edge_gradients, integrated_gradients, pyg_edge_scores, random_choice,
                        rank_input_edges, top_abs)
from .configs import (AttributionConfig, MotifConfig, SelectionConfig, attribution_run, motif_run, selection_run)
from .flows import (METHODS, Attribution, EdgeIndex, Paths, coalition_values, edge_index, explain_change,
                    message_flows, relu_multipliers, shapley_bruteforce, shapley_from_values)
from .graphs import (EVOLVE_SCHEMES, MOTIFS, NETWORKX_GRAPHS, REAL_EVOLUTIONS, EvolvingGraph, real_evolving_graph, ba_motif_pair,
                     drift_evolution, evolve, from_weights,
                     load_edge_list, molecule_like, networkx_graph, normalize_adjacency, raw_weights,
                     sbm_evolving, window_evolution)
from .measures import (FIDELITY_CONTROLS, MOTIF_CONTROLS, TASKS, completeness_by_node, completeness_medians,
                       completeness_seed, exact_tables, fidelity_statistic, flip_share, gap_shares, molecule_cases,
                       motif_hits, motif_table, pyg_motif_hits, real_link_cases, real_node_cases,
                       relative_completeness, selection_seed, selection_statistics)
from .model import HEADS, Target, WeightedGCN, forward_numpy, forward_numpy_update, train_gcn
from .selection import (CARDINALITY, SOLVERS, Selection, fidelity_kl, input_to_layer_edges, kl_divergence,
                        layer_adjacencies, select, softmax, surrogate_kl)

__all__ = [
    "EvolvingGraph", "sbm_evolving", "evolve", "window_evolution", "molecule_like", "networkx_graph",
    "drift_evolution", "from_weights", "real_evolving_graph", "REAL_EVOLUTIONS",
    "ba_motif_pair", "load_edge_list", "normalize_adjacency", "raw_weights", "EVOLVE_SCHEMES", "MOTIFS",
    "NETWORKX_GRAPHS", "WeightedGCN", "Target", "train_gcn", "forward_numpy", "forward_numpy_update", "HEADS",
    "explain_change", "message_flows", "coalition_values", "shapley_from_values", "shapley_bruteforce",
    "relu_multipliers", "edge_index", "EdgeIndex", "Paths", "Attribution", "METHODS",
    "select", "Selection", "surrogate_kl", "fidelity_kl", "kl_divergence", "softmax", "layer_adjacencies",
    "input_to_layer_edges", "SOLVERS", "CARDINALITY",
    "integrated_gradients", "change_attribution", "layer_edge_gradients", "CHANGE_BASELINES", "CHANGE_LABELS",
    "top_abs", "random_choice", "pyg_edge_scores", "rank_input_edges",
    "PYG_EXPLAINERS", "fidelity_curves", "AttributionConfig", "SelectionConfig", "MotifConfig", "attribution_run", "selection_run", "motif_run",
    "relative_completeness", "completeness_by_node", "completeness_seed", "completeness_medians",
    "molecule_cases", "real_node_cases", "real_link_cases", "gap_shares", "exact_tables", "selection_seed",
    "fidelity_statistic", "selection_statistics", "FIDELITY_CONTROLS", "TASKS", "motif_hits", "motif_table",
    "pyg_motif_hits", "flip_share", "MOTIF_CONTROLS",
]
