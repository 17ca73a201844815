"""Chapter 04 -- model-based RL by maximum likelihood: horizon-free and second-order bounds.

Wang, Zhou, Lui & Sun, *Model-based RL as a Minimalist Approach to Horizon-Free and Second-Order
Bounds*, ICLR 2025 (arXiv:2408.08994). A theory paper without code or experiments: this module
implements its two algorithms exactly on tabular MDPs with a finite model class, so that the
notebooks can show the theorems' predictions empirically.

Public API
----------
- MDPs: :class:`TabularMDP`, :func:`value_iteration` (batched over models; ``"loop"`` reference),
  :func:`evaluate`, :func:`return_moments` (exact return variance), :func:`occupancy`, :func:`rollout`;
- the model class: :class:`FiniteModelClass` (vectorised log-likelihoods, MLE, version space),
  :func:`counts_from`, :func:`default_beta`; the test-bed :func:`gamble_chain`,
  :func:`gamble_chain_class`;
- online: :func:`run_online` (O-MBRL, greedy MLE, eps-greedy);
- the horizon comparison: the river lock :func:`river_lock`, :func:`river_lock_class`, :func:`river_rho`,
  the river variants :func:`river_instance` (fixed, per-step reward, growing unknowns), the UCBVI
  baselines :func:`run_ucbvi` (Hoeffding UCBVI-CH, Bernstein UCBVI-BF), :func:`horizon_sweep`,
  :func:`tune_shared`, :func:`tune_river` (registered grids, extended until interior);
- offline: :func:`cppo_lr` (pessimism over a restricted policy set), :func:`plug_in`,
  :class:`PolicyTable`, :func:`collect`, :func:`coverage`, :func:`pessimistic_value`, :func:`offline_sweep`,
  :func:`worst_case_gap_sweep` and :class:`Family` (the realised gap over a family of instances),
  the VI-LCB baseline :func:`vi_lcb` (Hoeffding penalty :func:`lcb_width`),
  :func:`restriction_check` (the restricted policy set against all policies, brute force);
- the registry's replicates: :func:`version_space_sizes`, :func:`late_slopes`, :func:`block_slopes`,
  :func:`worst_block_slopes`, :func:`tune_interior`;
- analysis: :func:`loglog_slope`, the named instances :func:`instance`; configs per profile: :func:`version_space_config`,
  :func:`online_config`, :func:`offline_config`.
"""

from .mdp import (VI_BACKENDS, TabularMDP, as_probs, check_transitions, evaluate, max_total_reward,
                  occupancy, return_moments, rollout, value_iteration)
from .models import FiniteModelClass, counts_from, default_beta, gamble_chain, gamble_chain_class
from .online import ALGORITHMS, OnlineResult, run_online
from .offline import (Family, OfflineResult, PolicyTable, all_deterministic_policies, collect,
                      coverage, cppo_lr, lcb_width, offline_sweep, pessimistic_value, plug_in,
                      restriction_check, vi_lcb, worst_case_gap_sweep)
from .horizon import (BONUSES, RIVER, RIVER_INSTANCES, VARIANTS, UCBVIResult, growing_lock,
                      horizon_sweep, policy_values, river_instance, river_lock, river_lock_class,
                      river_rho, run_ucbvi, tune_river, tune_shared, ucbvi_plan)
from .analysis import (LOCK, OFFLINE_INSTANCES, ONLINE_INSTANCES, fine_q_grid, gamble_behaviour,
                       instance, loglog_slope, q_grid)
from .measures import (block_ids, block_slopes, late_slopes, tune_interior, version_space_sizes,
                       worst_block_slopes)
from .configs import (OfflineConfig, OnlineConfig, VersionSpaceConfig, offline_config,
                      online_config, version_space_config)

__all__ = [
    "TabularMDP", "value_iteration", "VI_BACKENDS", "evaluate", "return_moments", "occupancy",
    "rollout", "as_probs", "check_transitions", "max_total_reward",
    "FiniteModelClass", "counts_from", "default_beta", "gamble_chain", "gamble_chain_class",
    "ALGORITHMS", "OnlineResult", "run_online",
    "OfflineResult", "PolicyTable", "collect", "cppo_lr", "plug_in", "coverage", "pessimistic_value",
    "offline_sweep", "worst_case_gap_sweep", "all_deterministic_policies", "restriction_check",
    "Family", "vi_lcb", "lcb_width",
    "RIVER", "RIVER_INSTANCES", "UCBVIResult", "horizon_sweep", "policy_values", "river_lock",
    "river_lock_class", "river_rho", "run_ucbvi", "tune_shared", "ucbvi_plan", "tune_river",
    "river_instance", "growing_lock", "BONUSES", "VARIANTS", "instance", "ONLINE_INSTANCES", "OFFLINE_INSTANCES", "LOCK",
    "loglog_slope", "q_grid", "fine_q_grid", "gamble_behaviour",
    "VersionSpaceConfig", "OnlineConfig", "OfflineConfig", "version_space_config",
    "online_config", "offline_config",
    "version_space_sizes", "late_slopes", "block_ids", "block_slopes", "worst_block_slopes",
    "tune_interior",
]
