"""Chapter 18 -- stationary points and escape neurons of one-hidden-layer ReLU-like networks.

Wu, Simsek & Ged, *Loss Landscape of Shallow ReLU-like Neural Networks: Stationary Points, Saddle
Escape, and Network Embedding*, ICLR 2025 (arXiv:2402.05626).

Public API
----------
- data sets: :func:`five_point`, :func:`three_d_seven_point`, :func:`two_d_two_out`, :func:`load`;
- the model: :class:`ShallowNet`, :func:`init_net`;
- training: :func:`train_gd` (compiled fast path, numpy reference, official-style torch loop), :func:`run`;
- configs per profile: :func:`fig3`, :func:`fig11`, :func:`fig12` (:class:`RunConfig`);
- the landscape: :func:`sectors`, :func:`d_vectors`, :func:`classify_neurons`, :func:`certify`,
  :func:`perturbation_test`;
- the certificate at its edges: :func:`tolerance_sweep`, :func:`verdict_flips`,
  :func:`certificate_margins`, :func:`certify_run`;
- the reference certificate in exact arithmetic: :func:`certify_exact`, and where the fast path is
  decided: :func:`float_decided`;
- embedding: :func:`split_neuron`, :func:`add_zero_neuron`;
- dynamics: :func:`find_plateaus`, :func:`neuron_angles`, :func:`direction_clusters`,
  :func:`balancedness`, :func:`balance_after_escape`, and the controls and statistics of
  notebook 01 (:func:`random_direction_groups`, :func:`hyperplane_angle`,
  :func:`random_hyperplane_angle`, :func:`plateau_end_deviation`);
- figures: :mod:`iclr25.relu_landscape.plots`.
"""

from .configs import RunConfig, fig3, fig11, fig12
from .data import DATASETS, five_point, load, three_d_seven_point, two_d_two_out
from .dynamics import (Plateau, balance_after_escape, balancedness, direction_clusters,
                       find_plateaus, hyperplane_angle, neuron_angles, plateau_end_deviation,
                       random_direction_groups, random_hyperplane_angle)
from .edges import (DEFAULT_TOLERANCES, TOLERANCES, certificate_margins, certify_run,
                    decade_flips, default_tolerances, tolerance_grid, tolerance_sweep, verdict_flips)
from .embed import add_zero_neuron, split_neuron
from .exact import Decided, certify_exact, exact_signs, float_decided, min_directional_exact
from .landscape import (Certificate, PerturbationResult, Sector, certify, classify_neurons,
                        correlation, cos_error_bound, d_vectors, gamma, perturbation_test, sectors,
                        sectors_bruteforce)
from .net import ShallowNet, init_net
from .train import BACKENDS, Trajectory, default_backend, run, train_gd
from . import plots  # noqa: E402  (figures; imports matplotlib)

__all__ = [
    "DATASETS", "five_point", "three_d_seven_point", "two_d_two_out", "load",
    "ShallowNet", "init_net", "Trajectory", "train_gd", "run", "BACKENDS", "default_backend",
    "RunConfig", "fig3", "fig11", "fig12",
    "Sector", "sectors", "sectors_bruteforce", "d_vectors", "correlation", "classify_neurons",
    "Certificate", "certify", "PerturbationResult", "perturbation_test",
    "split_neuron", "add_zero_neuron",
    "Plateau", "find_plateaus", "neuron_angles", "direction_clusters", "balancedness",
    "balance_after_escape", "random_direction_groups", "hyperplane_angle",
    "random_hyperplane_angle", "plateau_end_deviation",
    "TOLERANCES", "DEFAULT_TOLERANCES", "default_tolerances", "tolerance_grid", "tolerance_sweep",
    "verdict_flips", "decade_flips", "certificate_margins", "certify_run",
    "certify_exact", "float_decided", "Decided", "exact_signs", "min_directional_exact",
    "cos_error_bound", "gamma",
]
