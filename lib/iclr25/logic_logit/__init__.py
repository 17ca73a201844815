"""Chapter 01 -- Logic-Logit: a rule-based interpretable choice model.

Zhang, Ren & Li, *Logic-Logit: A Logic-Based Approach to Choice Modeling*, ICLR 2025
(OpenReview vJgJSrYPe1). No official code was published; the estimator here is our reconstruction
from the paper's description (see the chapter page for every deviation).

Public API
----------
- data: :class:`ChoiceData`, :func:`make_hotel_search` (planted rules), :func:`load_swissmetro`,
  :func:`load_scanner_panel`, :func:`load_expedia` (the paper's data, not shipped),
  :func:`train_test_split`;
- predicates and rules: :class:`PredicateLibrary`, :class:`Predicate`, :func:`jaccard`;
- the model: :class:`LogicLogit` (Frank-Wolfe + column generation), :func:`match_rules`;
- candidate scoring (the hot path, two backends): :func:`score_rules`, :func:`pack_predicates`;
- baselines in the same API: :class:`MNL`, :class:`LatentClassMNL` (EM / Frank-Wolfe),
  :class:`NeuralUtility`;
- experiments: :func:`compare_models`, :func:`budget_sweep`;
- configs per profile: :func:`config` (:class:`Config`).
"""

from .base import ChoiceModel, NotFittedError, fit_mixture_weights, log_softmax, softmax
from .baselines import LC_METHODS, MNL, LatentClassMNL, NeuralUtility
from .configs import Config, config
from .data import (HOTEL_TYPES, SCANNER_PANELS, ChoiceData, PlantedType, hotel_library,
                   load_expedia, load_scanner_panel, load_swissmetro, make_hotel_search,
                   train_test_split)
from .experiments import (budget_sweep, compare_models, compare_with_baselines, plot_budget_sweep,
                          subsample_split, uniform_nll)
from .model import LogicLogit, LogicType, match_rules
from .predicates import Predicate, PredicateLibrary, jaccard
from .scoring import BACKENDS, default_backend, pack_predicates, rule_bits, score_rules

__all__ = [
    "ChoiceData", "PlantedType", "HOTEL_TYPES", "SCANNER_PANELS", "make_hotel_search",
    "hotel_library", "load_swissmetro", "load_scanner_panel", "load_expedia", "train_test_split",
    "Predicate", "PredicateLibrary", "jaccard",
    "LogicLogit", "LogicType", "match_rules",
    "BACKENDS", "default_backend", "score_rules", "pack_predicates", "rule_bits",
    "ChoiceModel", "NotFittedError", "softmax", "log_softmax", "fit_mixture_weights",
    "MNL", "LatentClassMNL", "NeuralUtility", "LC_METHODS",
    "Config", "config", "compare_models", "budget_sweep", "uniform_nll", "subsample_split",
    "compare_with_baselines", "plot_budget_sweep",
]
