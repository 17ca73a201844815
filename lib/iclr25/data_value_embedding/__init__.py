"""Chapter 02 -- data value embedding: trajectory-specific leave-one-out influence.

Wang, Song, Zou, Mittal & Jia, *Capturing the Temporal Dependence of Training Data Influence*,
ICLR 2025 (arXiv:2412.09538).

Public API
----------
- recording: :class:`GradRecorder` (context manager around your SGD step), :class:`Records`;
- embeddings: :func:`compute_dvemb` (blocked fast path / Algorithm 1 reference, per-layer
  variant, ``until=`` for checkpoints), :class:`DVEmb`, :func:`influence`,
  :func:`influence_checkpointing`, :func:`explicit_product_dvemb` (brute force);
- ground truth and testbed: :func:`load_digits_split`, :func:`load_mnist_idx` (the paper's data), :class:`MLP`, :func:`make_schedule`,
  :func:`train_mlp`, :func:`tsloo_exact`, :func:`per_sample_grads`, :func:`hessian`,
  :func:`gauss_newton_hessian`;
- baselines: :func:`influence_function`, :func:`influence_function_sweep`,
  :func:`influence_function_validated` (damping chosen on held-out validation data above
  ``|lambda_min|``, :func:`damping_grid`, :class:`DampedIF`), :func:`tracin`, :func:`grad_dot`,
  and the score :func:`mean_spearman`;
- the language-model runs (in :mod:`.lm`): :func:`pythia_like` (Pythia's GPT-NeoX class at book
  scale), :func:`make_lm`, :func:`train_lm` (AdamW with the SGD proxy, or SGD),
  :func:`train_tinygpt_sgd`, :func:`iteration_influence` (Fig. 1a's curve),
  :func:`regime_summary`, :func:`regimes_run` (one panel of the sweep);
- the notebooks' measurements (in :mod:`.experiments`), per replicate, for the claims registry:
  :func:`tsloo_vs_influence` (:class:`Fig3Run`), :func:`spearman_table`,
  :func:`point_differences`, :func:`spearman_per_item`, :func:`cross_item_spearman`,
  :func:`projection_robustness`, :func:`time_solvers`, :func:`regime_margin`, :func:`saturation`;
- when to select data (in :mod:`.online_selection`, Fig. 1b): :func:`selection_steps`,
  :func:`gradient_alignment`, :func:`train_with_selection`, :func:`selection_run`,
  :func:`gain_fraction`;
- configs per profile: :func:`fig3`, :func:`recursion`, :func:`regimes`, :func:`selection`.
"""

from .baselines import (DampedIF, damping_grid, grad_dot, influence_function,
                        influence_function_sweep, influence_function_validated, mean_spearman,
                        tracin)
from .configs import (Fig3Config, RecursionConfig, RegimesConfig, SelectionConfig, fig3, recursion,
                      regimes, selection)
from .experiments import (METHODS_FIG3, Fig3Run, cross_item_partner, cross_item_spearman,
                          point_differences, projection_robustness, regime_margin, saturation,
                          spearman_per_item, spearman_table, time_solvers, tsloo_vs_influence)
from .embed import (METHODS, DVEmb, compute_dvemb, explicit_product_dvemb, influence,
                    influence_checkpointing)
from .lm import (ARCHS, OPTIMIZERS, CausalLM, iteration_influence, lr_schedule, make_lm,
                 pythia_like, regime_summary, regimes_run, train_lm, train_tinygpt_sgd)
from .mlp import (HESSIAN_METHODS, MLP, REMOVALS, Schedule, gauss_newton_hessian, hessian,
                  load_digits_split, load_mnist_idx, make_schedule, per_sample_grads, train_mlp,
                  tsloo_exact)
from .recorder import GradRecorder, Probe, Records
from .online_selection import (ARMS, gain_fraction, gradient_alignment, selection_run, selection_steps,
                        train_with_selection, validation_loss)

__all__ = [
    "GradRecorder", "Records", "Probe",
    "DVEmb", "compute_dvemb", "influence", "influence_checkpointing", "explicit_product_dvemb",
    "METHODS",
    "load_digits_split", "load_mnist_idx", "MLP", "Schedule", "make_schedule", "train_mlp", "tsloo_exact",
    "per_sample_grads", "hessian", "gauss_newton_hessian", "REMOVALS", "HESSIAN_METHODS",
    "influence_function", "influence_function_sweep", "influence_function_validated",
    "damping_grid", "DampedIF", "mean_spearman", "tracin", "grad_dot",
    "train_tinygpt_sgd", "lr_schedule", "train_lm", "CausalLM", "pythia_like", "make_lm", "ARCHS",
    "OPTIMIZERS", "iteration_influence", "regime_summary", "regimes_run",
    "METHODS_FIG3", "Fig3Run", "tsloo_vs_influence", "spearman_table", "point_differences",
    "spearman_per_item", "cross_item_partner", "cross_item_spearman", "projection_robustness",
    "time_solvers", "regime_margin", "saturation",
    "ARMS", "selection_steps", "gradient_alignment", "train_with_selection", "validation_loss",
    "selection_run", "gain_fraction",
    "Fig3Config", "RecursionConfig", "RegimesConfig", "SelectionConfig", "fig3", "recursion",
    "regimes", "selection",
]
