"""Chapter 15 -- generalisation bounds for Kolmogorov--Arnold networks.

Xianyang Zhang and Huijuan Zhou, *Generalization Bounds and Model Complexity for Kolmogorov--Arnold
Networks*, ICLR 2025 (arXiv:2410.08026). No official code exists; the theorem's exact form could
not be read offline, so :mod:`~iclr25.kan_bounds.bounds` derives the bounds by the proof technique
the paper names (Maurey covering + Dudley), with every constant explicit; the older *bound-shaped*
measures of :mod:`~iclr25.kan_bounds.complexity` are kept for comparison.

Public API
----------
- bases: :func:`bspline_basis` (``"fast"`` uniform path / ``"reference"`` Cox--de Boor),
  :func:`bspline_reference`, :func:`extended_grid`;
- models: :class:`KANLayer`, :class:`KAN` (``coef_matrices``, ``basis``, ``from_pykan``),
  :class:`RKHSLayer`, :class:`LowRankRKHSKAN`; :class:`OutOfGridWarning` (inputs outside the
  spline grid, at training and at prediction), :func:`outside_grid_share`;
- bounds: :func:`kan_bound` (basis-function and low-rank RKHS case), :func:`layer_terms`,
  :func:`entropy`, :func:`dudley`, :func:`bspline_kappa`, :func:`silu_sup`;
- measures: :func:`l1_measure`, :func:`bartlett_measure`, :func:`rkhs_measure`, :func:`measures`,
  :func:`spline_lipschitz`, :func:`basis_lipschitz`, :func:`network_lipschitz`, :func:`add_zero_nodes`;
- data: :func:`regression` (targets ``f1``, ``f2``: ours), :func:`digits`, :func:`mnist` (the paper's data, for users who have the files);
- training: :func:`train` (:class:`History`; by epochs or by SGD steps); configs :func:`sweep`,
  :func:`digits_run`;
- the registered claims' replicates: :func:`sweep_rows`, :func:`rank_correlations`,
  :func:`n_effects`, :func:`dropout_pairs`, :func:`non_vacuity` (:mod:`~iclr25.kan_bounds.replicates`);
- figures: :mod:`iclr25.kan_bounds.plots`.
"""

from .basis import (BACKENDS, HAVE_NUMBA, SILU_MAX_SLOPE, bspline_basis, kan_basis, bspline_max_slope, bspline_reference,
                    bspline_uniform, extended_grid)
from .complexity import (MEASURES, add_zero_nodes, bartlett_measure, basis_lipschitz, l1_measure,
                         log_factor, measures, network_lipschitz, rkhs_measure, spline_lipschitz)
from .configs import DigitsConfig, SweepConfig, digits_run, sweep
from .data import TARGETS, Dataset, digits, f1, f2, mnist, read_idx, regression
from .model import (DROPOUT_MODES, KAN, KANLayer, LowRankRKHSKAN, OutOfGridWarning, RKHSLayer,
                    outside_grid_share, warn_outside_grid)
from .train import OPTIMIZERS, UNITS, History, bound_terms, check_data, fit_regression, run_grid, train
from .replicates import dropout_pairs, n_effects, non_vacuity, rank_correlations, sweep_rows
from .bounds import (LOSSES, NORMS, LayerTerms, bspline_kappa, dudley, entropy, kan_bound, layer_terms,
                     silu_sup)
from . import plots  # noqa: E402

__all__ = [
    "kan_bound", "layer_terms", "LayerTerms", "entropy", "dudley", "bspline_kappa", "silu_sup", "NORMS", "LOSSES",
    "BACKENDS", "HAVE_NUMBA", "SILU_MAX_SLOPE", "bspline_basis", "kan_basis", "bspline_max_slope", "bspline_reference",
    "bspline_uniform", "extended_grid",
    "KANLayer", "KAN", "RKHSLayer", "LowRankRKHSKAN", "DROPOUT_MODES", "OutOfGridWarning",
    "outside_grid_share", "warn_outside_grid",
    "MEASURES", "l1_measure", "bartlett_measure", "rkhs_measure", "measures", "basis_lipschitz",
    "spline_lipschitz", "network_lipschitz", "log_factor", "add_zero_nodes",
    "TARGETS", "Dataset", "regression", "digits", "mnist", "read_idx", "f1", "f2",
    "History", "train", "bound_terms", "check_data", "fit_regression", "run_grid", "OPTIMIZERS", "UNITS",
    "SweepConfig", "DigitsConfig", "sweep", "digits_run",
    "sweep_rows", "rank_correlations", "n_effects", "dropout_pairs", "non_vacuity",
]
