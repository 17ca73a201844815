"""Chapter 11 -- the retrieval problem: log-depth transformers, the implicit curriculum, and
retrieval heads that emerge in order.

Tiberiu Musat, *Mechanism and Emergence of Stacked Attention Heads in Multi-Layer Transformers*,
ICLR 2025 (arXiv:2411.12118). The paper has no public code: the task format and the curriculum
here are reconstructions **in the spirit of** the paper, checked against its Theorem 1
(t >= log_3(2D)), not against its plots.

Public API
----------
- the task: :class:`RetrievalTask` (plain and conditional; vectorised and loop samplers),
  :func:`follow_chain` (brute-force answers), :func:`min_layers`, :func:`max_depth`,
  :func:`depth_table`;
- natural-language multiple choice: :func:`mc_questions`, :func:`score_mc`;
- models: :func:`make_model` (the core's TinyGPT with multi-slot positions), :func:`train_retrieval`
  (with or without the implicit curriculum, with or without the pair-binding targets
  :func:`binding_targets`), :func:`accuracy`, :func:`accuracy_by_depth`;
- mechanism: :func:`attention_maps`, :func:`hop_scores`, :func:`emergence_times`,
  :func:`ablate_heads`, :func:`patch_heads`, :func:`composed_patching` (the composed hop at
  D = 4);
- registry replicates and controls: :mod:`iclr25.retrieval_problem.replicates`;
- configs per profile: :func:`lm_config`, :func:`depth_config`, :func:`emergence_config`,
  :func:`composed_config`;
- figures: :mod:`iclr25.retrieval_problem.plots`.
"""

from .configs import (ComposedConfig, DepthConfig, EmergenceConfig, LMConfig, composed_config,
                      depth_config, emergence_config, lm_config)
from .language import (FAMILIES, LETTERS, NAMES, MCQuestion, mc_questions, render_mc, score_mc,
                       wilson_interval)
from .model import (ComposedPatching, TrainResult, ablate_heads, add_binding_readout,
                    binding_accuracy, binding_predictions, composed_patching, accuracy,
                    accuracy_by_depth, attention_maps, patch_heads, stage_depth, swap_answer,
                    swap_query,
                    emergence_times, heads_for_hop, hop_score_history, hop_scores, make_model,
                    predict, train_retrieval)
from .task import (IC_MODES, ORDERS, SAMPLERS, Batch, RetrievalTask, binding_targets,
                   binding_targets_loop, composition_ranks,
                   depth_table, follow_chain, reach, reach_loop,
                   max_depth, min_layers)
from .replicates import (binding_correct_per_context, composed_stats, control_heads, correct,
                         correct_by_depth, emergence_gap, hop_patch_stats, mc_counts,
                         seed_accuracies)
from . import plots  # noqa: E402

__all__ = [
    "RetrievalTask", "Batch", "follow_chain", "min_layers", "max_depth", "depth_table",
    "IC_MODES", "SAMPLERS", "ORDERS", "composition_ranks", "reach", "reach_loop", "patch_heads",
    "swap_query", "swap_answer", "stage_depth", "binding_targets", "binding_targets_loop",
    "add_binding_readout", "binding_predictions", "binding_accuracy", "ComposedPatching",
    "composed_patching",
    "NAMES", "LETTERS", "MCQuestion", "render_mc", "mc_questions", "score_mc", "FAMILIES",
    "wilson_interval",
    "make_model", "TrainResult", "train_retrieval", "predict", "accuracy", "accuracy_by_depth",
    "attention_maps", "hop_scores", "emergence_times", "ablate_heads", "hop_score_history",
    "heads_for_hop",
    "correct", "correct_by_depth", "binding_correct_per_context", "emergence_gap",
    "control_heads", "mc_counts", "composed_stats", "hop_patch_stats", "seed_accuracies",
    "ComposedConfig", "composed_config",
    "LMConfig", "DepthConfig", "EmergenceConfig", "lm_config", "depth_config", "emergence_config",
]
