"""Chapter 17 -- soft preference learning (SPL): decoupling the entropy and the cross-entropy
in the KL penalty of preference learning.

Slocum, Parker-Sartori & Hadfield-Menell, *Diverse Preference Learning for Capabilities and
Alignment*, ICLR 2025 (arXiv:2511.08594).

The KL penalty of RLHF and DPO, ``beta KL(pi || pi_ref) = beta [CE(pi, pi_ref) - H(pi)]``, ties the
entropy bonus to the pull towards the reference. SPL weights them apart,
``max E_pi[r] + alpha H(pi) - beta CE(pi, pi_ref)``, whose optimum is
``pi* ∝ pi_ref^(beta/alpha) exp(r / alpha)``; under Bradley-Terry preferences with ``r = log p``,
``pi* ∝ pi_ref^(beta/alpha) p^(1/alpha)``. DPO (``alpha = beta``) gives ``pi_ref p^(1/beta)``, which
piles onto the majority as beta falls; SPL with ``alpha = 1, beta -> 0`` gives ``pi* = p``.

Public API
----------
- losses: :func:`spl_loss`, :func:`dpo_loss`, :func:`dpo_loss_reference`, :func:`spl_margin`;
- the exact bandit: :func:`closed_form_policy`, :func:`sample_comparisons`, :func:`fit_policy`, :func:`fit_policies`,
  :func:`tv_distance`, :func:`entropy`, :func:`temperature_scale`;
- language models (imported on demand, they need ``transformers``): :mod:`.lm` --
  ``PreferenceData``, ``make_preference_data``, ``reference_logprobs``, ``train_preference``,
  ``response_logprobs`` (with token-level temperature);
- metrics: :func:`distinct_n`, :func:`attribute_entropy`, :func:`embedding_spread`, :func:`ece`,
  :func:`pass_at_n`;
- the registered statistics: :mod:`.evaluation` (matched controls on a trade-off curve, slopes,
  exact pass@k, hard items, per-item calibration) and, on demand, :mod:`.experiments` (one
  replicate of each notebook's language-model experiment, returning measurements);
- tasks: :mod:`.tasks` (the fruit bandit, stories, multiple choice, addition);
- configs per profile: :mod:`.configs`.
"""

from .bandit import (Comparisons, closed_form_policy, entropy, fit_policies, fit_policy,
                     sample_comparisons,
                     temperature_scale, tv_distance)
from .losses import check_coefficients, dpo_loss, dpo_loss_reference, spl_loss, spl_margin
from . import evaluation
from .metrics import attribute_entropy, distinct_n, ece, embedding_spread, pass_at_n, words

__all__ = [
    "spl_loss", "dpo_loss", "dpo_loss_reference", "spl_margin", "check_coefficients",
    "closed_form_policy", "sample_comparisons", "Comparisons", "fit_policy", "fit_policies", "tv_distance",
    "entropy", "temperature_scale",
    "distinct_n", "attribute_entropy", "embedding_spread", "ece", "pass_at_n", "words",
    "evaluation",
]
