"""Chapter 01 -- Logic-Logit: a rule-based interpretable choice model.

Zhang, Ren & Li, *Logic-Logit: A Logic-Based Approach to Choice Modeling*, ICLR 2025
(OpenReview vJgJSrYPe1). No official code was published; the estimator here is our reconstruction
from the paper's description (see the chapter page for every deviation).

Public API
----------
- data: :class:`ChoiceData`, :func:`make_hotel_search` (planted rules; ``continuous=True`` for
  off-grid features), :func:`load_swissmetro`, :func:`load_modecanada`, :func:`load_tafeng`,
  :func:`load_scanner_panel`, :func:`load_expedia` (the paper's data, not shipped),
  :func:`train_test_split`;
- recovery scored by two-level Hungarian matching of learned to planted types:
  :func:`recovery_report` (precision, recall, weight and proportion errors), :func:`chance_recovery`;
- predicates and rules: :class:`PredicateLibrary`, :class:`Predicate`, :func:`jaccard`;
- the model: :class:`LogicLogit` (Frank-Wolfe + column generation), :func:`match_rules`;
- candidate scoring (the hot path, two backends): :func:`score_rules`, :func:`pack_predicates`;
- baselines in the same API: :class:`MNL`, :class:`LatentClassMNL` (EM / Frank-Wolfe),
  :class:`NeuralUtility`; MNLs on the features Logic-Logit sees: :class:`PredicateMNL` (predicate
  indicators, optionally with their pairwise conjunctions; L2 chosen on a validation split),
  :func:`mnl_baselines`, feature builders :func:`predicate_features`,
  :func:`conjunction_features`, :func:`informative_columns`;
- hyperparameters on validation: :class:`Tuned` (any model, a grid of tries, one validation
  split), :func:`validation_split`; the chance level of the data's marginals: :class:`MarketShare`;
- experiments as measurements (one replicate per seed; validation decides, test is touched once):
  :func:`consider_then_choose_run`, :func:`solver_run`, :func:`real_data_run` and their
  ``*_measurements`` (per registered claim id, ours and the control per replicate),
  :func:`chosen_on_validation`, :func:`score_models`; :func:`versus` / :func:`paired_gaps`
  (paired differences on held-out choices);
- configs per profile: :func:`config` (:class:`Config`).
"""

from .base import ChoiceModel, NotFittedError, fit_mixture_weights, log_softmax, softmax
from .baselines import (L2_GRID, LC_METHODS, MNL, LatentClassMNL, MarketShare, NeuralUtility, OnPredicates,
                        PredicateMNL, Tuned, predicate_data, validation_split,
                        conjunction_features, conjunction_pairs, informative_columns, mnl_baselines,
                        predicate_features)
from .configs import Config, config
from .formats import from_long, from_wide
from .data import (HOTEL_TYPES, SCANNER_PANELS, TAFENG_SUBCLASS, ChoiceData, PlantedType, hotel_library,
                   load_expedia, load_modecanada, load_scanner_panel, load_swissmetro, load_tafeng,
                   make_hotel_search, train_test_split)
from .experiments import (PREDICATE_MNLS, REAL_BASELINES, SOLVER_BASELINES, PlantedSplit,
                          chosen_on_validation, consider_then_choose_measurements,
                          consider_then_choose_run, frank_wolfe_gaps, latent_class_models, logic_logit,
                          measurement_table, mnl_models, n_parameters, neural_model, paired_gaps,
                          planted_arguments, planted_model, planted_split, plot_budget_sweep,
                          real_data_measurements, real_data_run, recovery_table, replicate,
                          replicate_table, score_models,
                          solver_measurements, solver_run, subsample_split, uniform_nll, versus)
from .model import LogicLogit, LogicType, match_rules
from .predicates import Predicate, PredicateLibrary, jaccard
from .recovery import (RecoveryReport, chance_recovery, recovery_row, recovery_run, match_rule_sets, match_types, recovery_report,
                       rule_similarity, rule_truth)
from .scoring import BACKENDS, default_backend, pack_predicates, rule_bits, score_rules

__all__ = [
    "ChoiceData", "PlantedType", "HOTEL_TYPES", "SCANNER_PANELS", "make_hotel_search",
    "hotel_library", "load_swissmetro", "load_scanner_panel", "load_expedia", "train_test_split",
    "load_modecanada", "load_tafeng", "TAFENG_SUBCLASS",
    "recovery_report", "RecoveryReport", "chance_recovery", "match_rule_sets", "match_types",
    "rule_similarity", "rule_truth", "recovery_run", "recovery_row",
    "from_wide", "from_long",
    "Predicate", "PredicateLibrary", "jaccard",
    "LogicLogit", "LogicType", "match_rules",
    "BACKENDS", "default_backend", "score_rules", "pack_predicates", "rule_bits",
    "ChoiceModel", "NotFittedError", "softmax", "log_softmax", "fit_mixture_weights",
    "MNL", "LatentClassMNL", "NeuralUtility", "LC_METHODS", "OnPredicates", "predicate_data",
    "PredicateMNL", "L2_GRID", "mnl_baselines", "predicate_features", "conjunction_pairs",
    "conjunction_features", "informative_columns", "paired_gaps", "versus", "n_parameters",
    "Tuned", "MarketShare", "validation_split",
    "Config", "config", "uniform_nll", "subsample_split", "plot_budget_sweep", "score_models",
    "chosen_on_validation", "logic_logit", "mnl_models", "latent_class_models", "neural_model",
    "PlantedSplit", "planted_split", "planted_model", "planted_arguments", "frank_wolfe_gaps",
    "consider_then_choose_run", "consider_then_choose_measurements", "solver_run",
    "solver_measurements", "real_data_run", "real_data_measurements", "measurement_table",
    "replicate", "replicate_table", "recovery_table", "PREDICATE_MNLS", "REAL_BASELINES", "SOLVER_BASELINES",
]
