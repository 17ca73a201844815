"""Knowledge localization vs query localization, and consistency-aware knowledge-neuron editing
(chapter 05).

Chen, Cao, Chen, Liu, Zhao, "Knowledge Localization: Mission Not Accomplished? Enter Query
Localization!", ICLR 2025 (arXiv:2405.14117). The knowledge-neuron (KN) thesis assumes a fact
lives in a few MLP neurons whatever the wording of the query (Knowledge Localization, KL). The
paper finds that the paraphrases of many facts use different neurons (inconsistent knowledge),
that a query's own KNs matter to it more than its neighbours' do, that attention to the subject
selects which neurons fire (Query Localization, QL), and that an edit that scores neurons by
their consistency across queries works better.

Modules
-------
- :mod:`.facts`: facts with paraphrased queries, built offline, filtered to what the model knows;
- :mod:`.attribution`: integrated gradients over the MLP hidden units (Dai et al.'s per-layer
  path, the book's default; the joint path; gradient x activation) and the plain reference loop;
- :mod:`.localize`: KN sets, consistency scores, Otsu's threshold, the K_II ratio, CAS;
- :mod:`.effects`: suppress / enhance KNs (Delta Prob), scale attention to the subject;
- :mod:`.editing`: erase / update KNs' ``down_proj`` columns, reliability / generalisation /
  locality;
- :mod:`.measures`: the replicates and controls the registry judges (per paraphrase pair, per
  prompt, per fact; cross-fact, random and baseline controls);
- :mod:`.configs`: the notebooks' runs per profile; :mod:`.plots`: the figures.

No official code was available; everything here is reconstructed from the paper.
"""

from . import configs, measures, plots
from .attribution import PATHS, RULES, Attributions, attribute, last_position_acts, reference_ig, step_alphas
from .editing import MODES, EditScores, clean_probs, edited, erase_scores
from .effects import delta_prob, last_position_units, scale_attention, scaled_prob, subject_positions
from .facts import RELATIONS, TEMPLATES, Fact, KnownFacts, analogy_pairs, answer_token, filter_known, make_facts
from .localize import (CONSISTENCY, cas_scores, cas_set, classify, consistency, jaccard, kn_sets,
                       layer_histogram, otsu_threshold, shared_units)

__all__ = [
    "configs", "measures", "plots", "PATHS", "RULES", "Attributions", "attribute", "last_position_acts",
    "reference_ig", "step_alphas", "MODES", "EditScores", "edited", "erase_scores", "clean_probs", "delta_prob",
    "last_position_units", "scale_attention", "scaled_prob", "subject_positions", "RELATIONS",
    "TEMPLATES", "Fact", "KnownFacts", "analogy_pairs", "answer_token", "filter_known",
    "make_facts", "CONSISTENCY", "cas_scores", "cas_set", "classify", "consistency", "jaccard",
    "kn_sets", "layer_histogram", "otsu_threshold", "shared_units",
]
