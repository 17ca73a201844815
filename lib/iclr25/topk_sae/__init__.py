"""Chapter 06 -- scaling and evaluating k-sparse (TopK) autoencoders.

Gao, Dupré la Tour, Tillman, Goh, Troll, Radford, Sutskever, Leike & Wu, *Scaling and Evaluating
Sparse Autoencoders*, ICLR 2025 (arXiv:2406.04093).

Public API
----------
- models: :class:`TopKSAE`, :class:`ReLUSAE`, :func:`save` / :func:`load` (SAELens layout),
  :func:`geometric_median`;
- kernels (:mod:`.kernels`): :func:`sparse_decode`, :func:`sampled_rowdot`, :func:`scatter_rows`
  with ``"torch"``, ``"triton"`` and ``"reference"`` backends;
- training: :func:`train_sae` (the paper's recipe, sparse fast step :func:`topk_loss_and_grads`),
  :func:`train_relu_sae`, :func:`default_lr`, :class:`TrainLog`;
- evaluation: :func:`evaluate`, :func:`nmse`, :func:`shrinkage`, :func:`refine_on_support`;
- synthetic data: :func:`superposition_data`, :func:`feature_recovery`;
- language-model activations: :mod:`.acts` (``collect_activations``, ``spliced_loss``; imported
  on demand, it needs ``transformers``);
- feature quality: :mod:`.quality` (probe loss, first-level N2G explanations);
- scaling laws: :func:`fit_joint_law`;
- the replicates the chapter's registered claims are judged from: :mod:`.measures`;
- the shipped scaling grid: :mod:`.cached_grid`;
- configs per profile: :mod:`.configs`.
"""

from .kernels import BACKENDS, default_backend, sampled_rowdot, scatter_rows, sparse_decode
from .metrics import evaluate, nmse, refine_on_support, shrinkage
from .model import ReLUSAE, TopKSAE, geometric_median, load, save
from .synthetic import SyntheticData, feature_recovery, superposition_data
from .scaling import PAPER_LAW, JointLaw, fit_joint_law
from .train import (DEAD_THRESHOLD, TrainLog, activation_scale, default_lr, mse_scale,
                    topk_loss_and_grads, topk_loss_reference, train_relu_sae, train_sae)

__all__ = [
    "TopKSAE", "ReLUSAE", "save", "load", "geometric_median",
    "BACKENDS", "default_backend", "sparse_decode", "sampled_rowdot", "scatter_rows",
    "train_sae", "train_relu_sae", "topk_loss_and_grads", "topk_loss_reference", "default_lr",
    "mse_scale", "activation_scale", "TrainLog", "DEAD_THRESHOLD",
    "evaluate", "nmse", "shrinkage", "refine_on_support",
    "SyntheticData", "superposition_data", "feature_recovery",
    "JointLaw", "fit_joint_law", "PAPER_LAW",
]
