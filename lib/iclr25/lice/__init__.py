"""Chapter 14 -- LiCE: likely counterfactual explanations by mixed-integer optimisation over a
sum-product network.

Nemecek, Pevny & Marecek, *Generating Likely Counterfactuals Using Sum-Product Networks*,
ICLR 2025 (arXiv:2401.14086).

Public API
----------
- features and rules: :class:`Contiguous`, :class:`Binary`, :class:`Categorical`, :class:`Mixed`,
  :class:`DataHandler`;
- data: :func:`load_credit`, :func:`load_adult`, :func:`load_gmsc`, :func:`synthetic_2d`,
  :func:`load`, :class:`Dataset`;
- the plausibility model: :class:`LearnSPN`, :class:`SPN` (exact LL, max-approximation, bounds);
- the classifier: :func:`train_mlp`, :func:`predict_logit`;
- the MIO blocks (pyscipopt): :mod:`iclr25.lice.mio`;
- the method: :class:`LiCE` (``explain``), :func:`thresholds`;
- baselines: :func:`dice_counterfactuals`, :func:`nearest_neighbour_cf`;
- metrics: :func:`evaluate`, :func:`summarise`, :func:`summarise_ci` (means with intervals),
  :func:`paired_diff`; the paper's table and its orderings: :mod:`iclr25.lice.maintable`;
  configs: :func:`config`;
- the main-table pipeline: :func:`prepare`, :func:`run_methods`, :func:`folds` (the paper's 5-fold
  CV), :func:`run_folds`; the measurements of the registered claims: :func:`maintable.measurements`,
  :func:`maintable.checks`; the trade-off and scaling sweeps: :mod:`iclr25.lice.tradeoff`.
"""

from .features import Binary, Categorical, Contiguous, DataHandler, Mixed
from .data import (DATASETS, Dataset, load, load_adult, load_credit, load_gmsc, package_file,
                   synthetic_2d)
from .spn import SPN, LearnSPN, Leaf, Product, Sum, rdc
from .model import make_mlp, predict_logit, train_mlp
from .lice import MODES, Explanation, LiCE, thresholds
from . import mio
from .baselines import dice_counterfactuals, nearest_neighbour_cf
from .start import repair, warm_start
from .metrics import evaluate, mean_ci, paired, paired_diff, summarise, summarise_ci
from . import maintable
from .configs import config, CONFIGS
from .experiment import (METHODS, Prepared, folds, pool_certified, prepare, prepare_config,
                         rounds_optimal, run_folds, run_methods)
from . import tradeoff

__all__ = [
    "Contiguous", "Binary", "Categorical", "Mixed", "DataHandler",
    "Dataset", "DATASETS", "load", "load_credit", "load_adult", "load_gmsc", "synthetic_2d",
    "package_file", "SPN", "LearnSPN", "Leaf", "Product", "Sum", "rdc",
    "make_mlp", "train_mlp", "predict_logit", "LiCE", "Explanation", "MODES", "thresholds", "mio",
    "dice_counterfactuals", "nearest_neighbour_cf", "evaluate", "summarise", "paired", "mean_ci", "paired_diff", "summarise_ci", "maintable", "config", "CONFIGS",
    "METHODS", "Prepared", "prepare", "prepare_config", "run_methods", "repair", "warm_start",
    "folds", "run_folds", "pool_certified", "rounds_optimal", "tradeoff",
]
