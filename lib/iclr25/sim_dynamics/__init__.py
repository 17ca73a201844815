"""Chapter 09 -- Structured Identity Mapping: the dynamics of concept learning and compositional
generalization.

Yang, Park, Lubana, Okawa, Hu & Tanaka, *Dynamics of Concept Learning and Compositional
Generalization* (v3: *Swing-by Dynamics in Concept Learning and Compositional Generalization*),
ICLR 2025 (arXiv:2410.08309).

Public API
----------
- data: :func:`two_concept`, :func:`multi_concept` (:class:`SIMData`), :func:`second_moments`;
- models and training: :class:`MLPSpec`, :func:`train_sim` (an ensemble of runs, batched), :class:`Trajectory`;
- theory: :func:`one_layer_weights`, :func:`one_layer_closed_form`, :func:`sym2_linear_ode`,
  :func:`sym2_init`, :func:`sym2_rhs`, :func:`concept_sigma`;
- the paper's own MLP runs (``run.sh``): :data:`OFFICIAL_RUNS`, :func:`official_run`,
  :func:`bump_summary`, :func:`our_lr`, :func:`mirror_init` (the init-sign ablation);
- analysis: :func:`detect_swing_by`, :func:`is_monotone`, :func:`max_rise`, :func:`learning_time`;
- the registry's replicates: :func:`swing_by_height` (no threshold), :func:`bump_heights`,
  :func:`by_sign`, :func:`stagewise`, :func:`log_time_ratio`, :func:`order_margin`,
  :func:`variance_effect`, :func:`diffusion_measures`; the one-layer control of an official run, :func:`official_control`;
- the diffusion check: :mod:`iclr25.sim_dynamics.diffusion`;
- configs per profile: :func:`linear_theory`, :func:`swing_by`, :func:`diffusion_check`;
- figures: :mod:`iclr25.sim_dynamics.plots`.
"""

from .analysis import SwingBy, detect_swing_by, is_monotone, learning_time, max_rise
from .configs import DiffusionConfig, LinearTheoryConfig, SwingByConfig, diffusion_check, linear_theory, swing_by
from .data import LAYOUTS, SIMData, multi_concept, second_moments, two_concept
from .theory import (concept_sigma, one_layer_closed_form, one_layer_weights, sym2_init,
                     sym2_linear_ode, sym2_rhs)
from .train import BACKENDS, MLPSpec, Trajectory, forward, init_params, mirror_init, train_sim
from .official import OFFICIAL_RUNS, OfficialRun, bump_summary, official_control, official_run, our_lr
from .measures import (bump_heights, by_sign, diffusion_measures, log_time_ratio, order_margin, stagewise,
                       swing_by_height, variance_effect)
from . import diffusion, plots  # noqa: E402

__all__ = [
    "SIMData", "two_concept", "multi_concept", "second_moments", "LAYOUTS",
    "MLPSpec", "Trajectory", "train_sim", "init_params", "mirror_init", "forward", "BACKENDS",
    "one_layer_weights", "one_layer_closed_form", "sym2_linear_ode", "sym2_init", "sym2_rhs",
    "concept_sigma",
    "SwingBy", "detect_swing_by", "is_monotone", "max_rise", "learning_time",
    "LinearTheoryConfig", "SwingByConfig", "DiffusionConfig", "linear_theory", "swing_by",
    "diffusion_check", "diffusion", "plots",
    "OFFICIAL_RUNS", "OfficialRun", "official_run", "official_control", "our_lr", "bump_summary",
    "swing_by_height", "log_time_ratio", "order_margin", "variance_effect", "stagewise", "bump_heights",
    "by_sign", "diffusion_measures",
]
