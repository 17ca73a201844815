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
- configs per profile: :func:`fig3`, :func:`recursion`, :func:`regimes`.
"""

from .baselines import (DampedIF, damping_grid, grad_dot, influence_function,
                        influence_function_sweep, influence_function_validated, mean_spearman,
                        tracin)
from .configs import Fig3Config, RecursionConfig, RegimesConfig, fig3, recursion, regimes
from .embed import (METHODS, DVEmb, compute_dvemb, explicit_product_dvemb, influence,
                    influence_checkpointing)
from .lm import (ARCHS, OPTIMIZERS, CausalLM, iteration_influence, lr_schedule, make_lm,
                 pythia_like, regime_summary, regimes_run, train_lm, train_tinygpt_sgd)
from .mlp import (MLP, REMOVALS, Schedule, gauss_newton_hessian, hessian, load_digits_split, load_mnist_idx, make_schedule,
                  per_sample_grads, train_mlp, tsloo_exact)
from .recorder import GradRecorder, Probe, Records

__all__ = [
    "GradRecorder", "Records", "Probe",
    "DVEmb", "compute_dvemb", "influence", "influence_checkpointing", "explicit_product_dvemb",
    "METHODS",
    "load_digits_split", "load_mnist_idx", "MLP", "Schedule", "make_schedule", "train_mlp", "tsloo_exact",
    "per_sample_grads", "hessian", "gauss_newton_hessian", "REMOVALS",
    "influence_function", "influence_function_sweep", "influence_function_validated",
    "damping_grid", "DampedIF", "mean_spearman", "tracin", "grad_dot",
    "train_tinygpt_sgd", "lr_schedule", "train_lm", "CausalLM", "pythia_like", "make_lm", "ARCHS",
    "OPTIMIZERS", "iteration_influence", "regime_summary", "regimes_run",
    "Fig3Config", "RecursionConfig", "RegimesConfig", "fig3", "recursion", "regimes",
]
