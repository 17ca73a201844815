"""The chapter's comparisons as measurements (chapter 01, every notebook).

Each notebook repeats one experiment over replicates (fresh planted data per seed in notebooks 01
and 02; a fresh subsample and respondent-level split per seed in 03 and 04). In each replicate
every model is fit on the same training choices with its hyperparameters chosen on the same
validation split of them (:class:`~iclr25.logic_logit.Tuned`, the same number of tries for every
model), and scored once on the held-out choices. A ``*_run`` function runs one replicate and
returns its table (one row per model: the chosen hyperparameter, validation and test NLL and
accuracy); a ``*_measurements`` function turns the replicates into what the chapter's registry
(``book/claims/01-logic-logit.yaml``) judges: per claim id, our statistic per replicate and its
control per replicate (``None`` where the registry fixes the control's value). Which baseline is
the control of a "best of" claim is decided on validation scores, never on test scores
(:func:`chosen_on_validation`). No function here decides whether a claim holds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from ..progress import progress
from .base import ChoiceModel
from .data import ChoiceData, train_test_split

__all__ = ["uniform_nll", "subsample_split", "n_parameters", "paired_gaps", "versus",
           "score_models", "chosen_on_validation", "logic_logit", "mnl_models", "latent_class_models",
           "neural_model", "PlantedSplit", "planted_split", "planted_model", "planted_arguments",
           "frank_wolfe_gaps", "consider_then_choose_run", "consider_then_choose_measurements",
           "solver_run", "solver_measurements", "real_data_run", "real_data_measurements",
           "measurement_table", "replicate", "replicate_table", "recovery_table", "plot_budget_sweep", "PREDICATE_MNLS", "REAL_BASELINES",
           "SOLVER_BASELINES"]

#: the two MNLs on Logic-Logit's own predicates: the control that decides whether rules add anything
PREDICATE_MNLS = ("MNL (predicates)", "MNL (predicates + pairs)")
#: the six baselines of a real-data "best of all models" claim (notebooks 03 and 04)
REAL_BASELINES = ("MNL (raw features)", "MNL (predicates)", "MNL (predicates + pairs)", "LC-MNL (EM)",
                  "LC-MNL (Frank-Wolfe)", "neural utility (MLP)")
#: the baselines of notebook 02 (planted data)
SOLVER_BASELINES = ("MNL (raw features)", "MNL (predicates)", "MNL (predicates + pairs)", "LC-MNL (EM)",
                    "LC-MNL (Frank-Wolfe)", "LC-MNL (Frank-Wolfe, predicates)")
COLUMNS = ("chosen", "val NLL", "val accuracy", "test NLL", "test accuracy", "parameters", "fit s")


def uniform_nll(data: ChoiceData) -> float:
    """NLL of the model that picks uniformly within each offer set (the no-information baseline)."""
    return float(-np.mean(np.log(1.0 / data.mask.sum(1))))


def subsample_split(data: ChoiceData, n_obs: int, test_size: float, seed: int = 0):
    """Keep ``n_obs`` random choices, then split them so that no group (``data.meta["groups"]``:
    a respondent or household, when the data set has one) is in both train and test
    (``01-logic-logit/03-real-choices``). Returns ``(train, test)``."""
    if n_obs < data.n_obs:
        keep = np.sort(np.random.default_rng(seed).permutation(data.n_obs)[:n_obs])
        data = data.subset(keep)
    groups = (data.meta or {}).get("groups")
    return train_test_split(data, test_size, seed=seed, groups=groups)


def n_parameters(model: ChoiceModel) -> int:
    """Free parameters of a fitted chapter-01 model (a size for the readability comparison):
    coefficients of an MNL; rule weights plus mixture proportions of Logic-Logit; class
    coefficients plus proportions of a latent-class MNL; network weights of the neural model;
    the alternatives' shares (less one) of the market-share model."""
    from .baselines import (MNL, LatentClassMNL, MarketShare, NeuralUtility, OnPredicates,
                            PredicateMNL, Tuned)
    from .model import LogicLogit

    if isinstance(model, Tuned):
        return n_parameters(model.model_)
    if isinstance(model, OnPredicates):
        return n_parameters(model.model)
    if isinstance(model, (MNL, PredicateMNL)):
        return int(len(model.beta_))
    if isinstance(model, LogicLogit):
        return int(sum(len(t.rules) for t in model.types_) + len(model.alphas_) - 1)
    if isinstance(model, LatentClassMNL):
        return int(sum(len(b) for b in model.betas_) + len(model.alphas_) - 1)
    if isinstance(model, NeuralUtility):
        return int(len(model.theta_))
    if isinstance(model, MarketShare):
        return int(len(model.shares_) - 1) if model.labelled_ and model.use_labels else 0
    raise TypeError(f"n_parameters does not know {type(model).__name__}")


def paired_gaps(model: ChoiceModel, other: ChoiceModel, data: ChoiceData) -> dict:
    """How much better ``model`` is than ``other`` on the same choices (chapter 01): the mean
    per-choice NLL gap ``NLL_other - NLL_model`` and top-1 accuracy gap ``acc_model - acc_other``
    (positive: ``model`` better), each with its paired standard error over choices."""
    n = data.n_obs
    lm = np.log(np.maximum(model.chosen_proba(data), 1e-300))
    lo = np.log(np.maximum(other.chosen_proba(data), 1e-300))
    d_nll = lm - lo
    d_acc = (model.predict(data) == data.choice).astype(float) - (other.predict(data) == data.choice)
    se = lambda d: float(d.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return {"NLL gap": float(d_nll.mean()), "NLL gap se": se(d_nll),
            "accuracy gap": float(d_acc.mean()), "accuracy gap se": se(d_acc)}


def versus(model: ChoiceModel, others: Mapping[str, ChoiceModel], data: ChoiceData, z: float = 2.0):
    """``model`` against each of ``others`` on the same held-out choices (chapter 01): the paired
    gaps of :func:`paired_gaps` and a label per metric, ``better`` / ``worse`` when the gap
    exceeds ``z`` standard errors, else ``tie`` (one data set, choices as the unit: a description,
    not the chapter's test, which replicates over seeds or splits). One row per other model."""
    import pandas as pd

    def label(g, se):
        return "better" if g > z * se else ("worse" if g < -z * se else "tie")

    rows = []
    for name, m in others.items():
        g = paired_gaps(model, m, data)
        rows.append({"baseline": name, **g, "NLL verdict": label(g["NLL gap"], g["NLL gap se"]),
                     "accuracy verdict": label(g["accuracy gap"], g["accuracy gap se"])})
    return pd.DataFrame(rows).set_index("baseline")


# ----------------------------------------------------------------------------------------------
# fitting and scoring: validation decides, test is touched once


def _chosen(model) -> str:
    from .baselines import PredicateMNL, Tuned

    if isinstance(model, Tuned):
        return f"{model.name}={model.best_:g}" if isinstance(model.best_, (int, float)) else \
            f"{model.name}={model.best_}"
    if isinstance(model, PredicateMNL):
        return f"l2={model.l2_:g}"
    return ""


def score_models(models: Mapping[str, ChoiceModel], train: ChoiceData, test: ChoiceData,
                 show_progress: bool = False):
    """Fit each model on ``train`` (each tunes itself on its validation split of ``train``) and
    score it once on ``test`` (chapter 01). Returns ``(table, fitted)``: the table has one row per
    model, with the hyperparameter chosen on validation, the validation NLL and accuracy of that
    choice (NaN for a model with nothing to tune), the test NLL and accuracy, the free parameters
    and the fit seconds."""
    import pandas as pd

    rows, fitted = [], {}
    items = list(models.items())
    for name, m in (progress(items, desc="models") if show_progress else items):
        t = time.perf_counter()
        m.fit(train)
        val = getattr(m, "val_scores_", None) or {}
        rows.append({"model": name, "chosen": _chosen(m), "val NLL": val.get("nll", np.nan),
                     "val accuracy": val.get("accuracy", np.nan), "test NLL": m.nll(test),
                     "test accuracy": m.accuracy(test), "parameters": n_parameters(m),
                     "fit s": time.perf_counter() - t})
        fitted[name] = m
    return pd.DataFrame(rows, columns=["model", *COLUMNS]).set_index("model"), fitted


def chosen_on_validation(table, candidates: Sequence[str], metric: str = "NLL") -> tuple[str, float]:
    """The candidate (rows of a :func:`score_models` table) a modeller would pick on validation,
    and its test score (chapter 01): for ``metric="NLL"`` the lowest validation NLL, returning its
    test NLL; for ``"accuracy"`` the highest validation accuracy (a tie goes to the lower
    validation NLL, then to the first candidate), returning its test accuracy."""
    if metric not in ("NLL", "accuracy"):
        raise ValueError(f"metric must be 'NLL' or 'accuracy', got {metric!r}")
    candidates = list(candidates)
    missing = [c for c in candidates if c not in table.index]
    if not candidates or missing:
        raise KeyError(f"candidates not in the table: {missing or '(none given)'}")
    val = table.loc[candidates, ["val NLL", "val accuracy"]]
    if val.isna().any().any():
        raise ValueError(f"candidates without validation scores: {list(val.index[val.isna().any(axis=1)])}")
    if metric == "NLL":
        name = min(candidates, key=lambda c: val.loc[c, "val NLL"])
        return name, float(table.loc[name, "test NLL"])
    name = min(candidates, key=lambda c: (-val.loc[c, "val accuracy"], val.loc[c, "val NLL"]))
    return name, float(table.loc[name, "test accuracy"])


def logic_logit(cfg, library, seed: int = 0):
    """Logic-Logit with its rules-per-type budget ``R`` chosen on validation from ``cfg.budgets``
    (chapter 01), the other settings from ``cfg``, rules drawn from ``library``."""
    from .baselines import Tuned
    from .model import LogicLogit

    def make(R):
        return LogicLogit(max_types=cfg.max_types, max_rules=int(R), max_len=cfg.max_len,
                          beam_width=cfg.beam_width, refine_iters=cfg.refine_iters, library=library)

    return Tuned(make, cfg.budgets, cfg.val_fraction, seed, name="R")


def mnl_models(cfg, library, seed: int = 0) -> dict:
    """The chapter's three MNLs, unfitted (chapter 01): linear in the raw features; on the
    indicators of ``library``'s predicates; on those plus their pairwise conjunctions. Each
    chooses its L2 penalty from ``cfg.l2_tries`` on the same validation split."""
    from .baselines import MNL, PredicateMNL, Tuned

    kw = dict(l2_grid=cfg.l2_tries, val_fraction=cfg.val_fraction, seed=seed)
    return {"MNL (raw features)": Tuned(lambda l2: MNL(l2=l2), cfg.l2_tries, cfg.val_fraction, seed,
                                        name="l2"),
            "MNL (predicates)": PredicateMNL(library, conjunctions=False, **kw),
            "MNL (predicates + pairs)": PredicateMNL(library, conjunctions=True, **kw)}


def latent_class_models(cfg, seed: int = 0, library=None) -> dict:
    """Latent-class MNL by EM and by Frank-Wolfe on the raw features (and, given ``library``, by
    Frank-Wolfe on its predicate indicators, one L-BFGS start per support step), unfitted, each
    with its number of classes chosen on validation from ``cfg.class_tries`` (chapter 01)."""
    from .baselines import LatentClassMNL, OnPredicates, Tuned

    tv = (cfg.val_fraction, seed)
    out = {"LC-MNL (EM)": Tuned(lambda k: LatentClassMNL(int(k), "em", n_iter=cfg.em_iters, seed=seed),
                                cfg.class_tries, *tv, name="classes"),
           "LC-MNL (Frank-Wolfe)": Tuned(lambda k: LatentClassMNL(int(k), "fw", seed=seed),
                                         cfg.class_tries, *tv, name="classes")}
    if library is not None:
        out["LC-MNL (Frank-Wolfe, predicates)"] = Tuned(
            lambda k: OnPredicates(LatentClassMNL(int(k), "fw", n_starts=1, seed=seed), library),
            cfg.class_tries, *tv, name="classes")
    return out


def neural_model(cfg, seed: int = 0):
    """The neural utility model with its width chosen on validation from ``cfg.nn_widths`` (its
    number of steps by early stopping, up to ``cfg.nn_steps``; chapter 01)."""
    from .baselines import NeuralUtility, Tuned

    return Tuned(lambda h: NeuralUtility(hidden=int(h), n_steps=cfg.nn_steps, seed=seed), cfg.nn_widths,
                 cfg.val_fraction, seed, name="width")


# ----------------------------------------------------------------------------------------------
# planted data (notebooks 01 and 02)


@dataclass
class PlantedSplit:
    """One replicate's planted data: ``train`` / ``test`` choices, the quantile predicate
    library built from ``train`` (``library``), the generator's own library (``planted_library``)
    and the planted population (``truth``)."""

    seed: int
    train: ChoiceData
    test: ChoiceData
    library: object
    planted_library: object
    truth: dict


def planted_split(n_obs: int, seed: int = 0, test_size: float = 0.3, n_bins: int = 4) -> PlantedSplit:
    """Fresh planted data for replicate ``seed`` (chapter 01, notebooks 01-02):
    ``make_hotel_search(n_obs, seed=seed, continuous=True)``, its own train/test split (seeded by
    ``seed``) and the quantile predicate library of its training part."""
    from .data import make_hotel_search
    from .predicates import PredicateLibrary

    data, glib, truth = make_hotel_search(n_obs, seed=seed, continuous=True)
    train, test = train_test_split(data, test_size, seed=seed)
    return PlantedSplit(seed, train, test, PredicateLibrary.from_data(train, n_bins), glib, truth)


def planted_arguments(truth: dict) -> tuple:
    """``(rules, alphas, weights)`` of a planted population, as :func:`recovery_report` takes them."""
    return truth["rules"], [t.alpha for t in truth["types"]], [t.weights for t in truth["types"]]


def planted_model(planted_library, truth: dict):
    """The planted population as a fitted :class:`LogicLogit` (the oracle: the best any model can
    do on the planted data; chapter 01)."""
    from .model import LogicLogit, LogicType

    oracle = LogicLogit(library=planted_library)
    oracle.library_, oracle.fitted_ = planted_library, True
    oracle.types_ = [LogicType(list(r), np.array(t.weights, float))
                     for r, t in zip(truth["rules"], truth["types"])]
    oracle.alphas_ = np.array([t.alpha for t in truth["types"]], float)
    return oracle


def _extra_rows(table, rows: Mapping[str, ChoiceModel], test: ChoiceData):
    for name, m in rows.items():
        table.loc[name] = {"chosen": "", "val NLL": np.nan, "val accuracy": np.nan,
                           "test NLL": m.nll(test), "test accuracy": m.accuracy(test),
                           "parameters": n_parameters(m) if not name.startswith("oracle") else 0,
                           "fit s": 0.0}
    return table


def consider_then_choose_run(cfg, seed: int = 0) -> dict:
    """One replicate of notebook 01 (``01-consider-then-choose``): fresh planted data
    (:func:`planted_split`), the three MNLs (:func:`mnl_models`) and Logic-Logit
    (:func:`logic_logit`) fit and scored, the planted model's test scores (``oracle (planted)``),
    recovery of the planted rules by the fitted Logic-Logit (:func:`recovery_report`), its chance
    level (:func:`chance_recovery`, ``cfg.n_draws`` random models of the same shape) and the same
    tuned fit handed the generator's own thresholds. Returns a dict: ``seed``, ``split``,
    ``table``, ``fitted``, ``report``, ``chance``, ``grid``, ``report_grid``, ``oracle``."""
    from .baselines import MarketShare
    from .recovery import chance_recovery, recovery_report

    sp = planted_split(cfg.n_obs, seed, cfg.test_size, cfg.n_bins)
    models = {**mnl_models(cfg, sp.library, seed), "Logic-Logit": logic_logit(cfg, sp.library, seed)}
    table, fitted = score_models(models, sp.train, sp.test)
    oracle = planted_model(sp.planted_library, sp.truth)
    _extra_rows(table, {"uniform": MarketShare().fit(sp.train), "oracle (planted)": oracle}, sp.test)
    planted = planted_arguments(sp.truth)
    model = fitted["Logic-Logit"]
    grid = logic_logit(cfg, sp.planted_library, seed).fit(sp.train)
    return {"seed": seed, "split": sp, "table": table, "fitted": fitted, "oracle": oracle,
            "report": recovery_report(model, sp.planted_library, *planted, sp.test),
            "chance": chance_recovery(model, sp.planted_library, *planted, sp.test,
                                      n_draws=cfg.n_draws, seed=seed),
            "grid": grid, "report_grid": recovery_report(grid, sp.planted_library, *planted, sp.test)}


def _pairs(runs, ours: Callable, control: Callable | None = None):
    return ([float(ours(r)) for r in runs], None if control is None else [float(control(r)) for r in runs])


def consider_then_choose_measurements(runs: Sequence[dict]) -> dict:
    """What notebook 01's registered findings judge, per replicate of
    :func:`consider_then_choose_run`: ``{claim id: (ours, control)}``, ``control`` ``None`` where
    the registry gives its value. Logic-Logit's test NLL / accuracy against the raw-feature MNL's,
    against the predicate MNL chosen on validation (:func:`chosen_on_validation`) and against the
    planted model's NLL; recall and precision of the planted rules, against the best of the
    random models of the same shape."""
    ll_nll = lambda r: r["table"].loc["Logic-Logit", "test NLL"]
    ll_acc = lambda r: r["table"].loc["Logic-Logit", "test accuracy"]
    return {
        "planted-nll-vs-raw-mnl": _pairs(runs, ll_nll, lambda r: r["table"].loc["MNL (raw features)", "test NLL"]),
        "planted-accuracy-vs-raw-mnl": _pairs(runs, ll_acc,
                                              lambda r: r["table"].loc["MNL (raw features)", "test accuracy"]),
        "planted-nll-vs-predicate-mnl": _pairs(runs, ll_nll,
                                               lambda r: chosen_on_validation(r["table"], PREDICATE_MNLS)[1]),
        "planted-accuracy-vs-predicate-mnl": _pairs(
            runs, ll_acc, lambda r: chosen_on_validation(r["table"], PREDICATE_MNLS, "accuracy")[1]),
        "planted-rule-recall-complete": _pairs(runs, lambda r: r["report"].recall),
        "planted-rule-recall-vs-chance": _pairs(runs, lambda r: r["report"].recall,
                                                lambda r: r["chance"]["recall max"]),
        "planted-rule-precision-half": _pairs(runs, lambda r: r["report"].precision),
        "planted-rule-precision-vs-chance": _pairs(runs, lambda r: r["report"].precision,
                                                   lambda r: r["chance"]["precision max"]),
        "planted-rule-recall-generator-grid": _pairs(runs, lambda r: r["report_grid"].recall),
        "planted-nll-gap-to-oracle": _pairs(runs, ll_nll, lambda r: r["table"].loc["oracle (planted)", "test NLL"]),
    }


def frank_wolfe_gaps(history) -> np.ndarray:
    """The Frank-Wolfe duality gaps ``F(theta*) - 1`` of a Logic-Logit or latent-class fit, in
    iteration order (``history_`` rows outside the EM refinement that carry a gap)."""
    gaps = [h.get("gap", np.nan) for h in history if h.get("phase", "frank-wolfe") != "refine"]
    return np.array([g for g in gaps if g is not None and np.isfinite(g)], float)


def solver_run(cfg, seed: int = 0) -> dict:
    """One replicate of notebook 02 (``02-inside-the-solver``): fresh planted data, Logic-Logit
    (:func:`logic_logit`), the three MNLs and the three latent-class MNLs (EM and Frank-Wolfe on
    the raw features, Frank-Wolfe on Logic-Logit's predicates), each tuned on the same validation
    split and scored once on the test split. Returns ``seed``, ``split``, ``table``, ``fitted``,
    ``gaps`` (Logic-Logit's Frank-Wolfe gaps)."""
    sp = planted_split(cfg.n_obs, seed, cfg.test_size, cfg.n_bins)
    models = {**mnl_models(cfg, sp.library, seed), **latent_class_models(cfg, seed, sp.library),
              "Logic-Logit": logic_logit(cfg, sp.library, seed)}
    table, fitted = score_models(models, sp.train, sp.test)
    return {"seed": seed, "split": sp, "table": table, "fitted": fitted,
            "gaps": frank_wolfe_gaps(fitted["Logic-Logit"].history_)}


def solver_measurements(runs: Sequence[dict]) -> dict:
    """What notebook 02's registered findings judge, per replicate of :func:`solver_run`: the
    change of the Frank-Wolfe gap (last minus first), and Logic-Logit's test NLL against the
    latent-class MNL on the raw features chosen on validation (EM or Frank-Wolfe), against
    latent-class MNL by Frank-Wolfe on its predicates, and against the baseline chosen on
    validation among all of :data:`SOLVER_BASELINES`."""
    ll_nll = lambda r: r["table"].loc["Logic-Logit", "test NLL"]
    return {
        "fw-gap-shrinks": _pairs(runs, lambda r: r["gaps"][-1] - r["gaps"][0] if len(r["gaps"]) else 0.0),
        "planted-nll-vs-lc-mnl-raw": _pairs(
            runs, ll_nll, lambda r: chosen_on_validation(r["table"], ["LC-MNL (EM)", "LC-MNL (Frank-Wolfe)"])[1]),
        "planted-nll-vs-lc-mnl-predicates": _pairs(
            runs, ll_nll, lambda r: r["table"].loc["LC-MNL (Frank-Wolfe, predicates)", "test NLL"]),
        "planted-nll-vs-strongest-baseline": _pairs(
            runs, ll_nll, lambda r: chosen_on_validation(r["table"], SOLVER_BASELINES)[1]),
    }


# ----------------------------------------------------------------------------------------------
# real data (notebooks 03 and 04)


def real_data_run(data: ChoiceData, cfg, seed: int = 0, n_obs: int | None = None,
                  library_kw: Mapping | None = None) -> dict:
    """One replicate of a real-data comparison (notebooks 03 and 04): a subsample of ``n_obs``
    choices (default ``cfg.n_obs``) split by respondent (:func:`subsample_split`, seeded by
    ``seed``), the quantile predicate library of the training part (``library_kw`` go to
    :meth:`PredicateLibrary.from_data`), and every model fit on the training part, tuned on the
    same validation split of it and scored once on the test part: the uniform and market-share
    models (the chance levels), the three MNLs, latent-class MNL by EM and by Frank-Wolfe, the
    neural utility model and Logic-Logit. Returns ``seed``, ``train``, ``test``, ``library``,
    ``table``, ``fitted``."""
    from .baselines import MarketShare
    from .predicates import PredicateLibrary

    train, test = subsample_split(data, cfg.n_obs if n_obs is None else n_obs, cfg.test_size, seed)
    lib = PredicateLibrary.from_data(train, cfg.n_bins, **dict(library_kw or {}))
    models = {"uniform": MarketShare(use_labels=False), "market shares": MarketShare(),
              **mnl_models(cfg, lib, seed), **latent_class_models(cfg, seed),
              "neural utility (MLP)": neural_model(cfg, seed), "Logic-Logit": logic_logit(cfg, lib, seed)}
    table, fitted = score_models(models, train, test)
    return {"seed": seed, "train": train, "test": test, "library": lib, "table": table, "fitted": fitted}


def real_data_measurements(runs: Sequence[dict], prefix: str) -> dict:
    """What the registered findings on one real data set judge (notebooks 03-04), per replicate of
    :func:`real_data_run`, keyed ``f"{prefix}-..."`` as in the registry (``prefix``:
    ``"swissmetro"``, ``"yogurt"``, ``"modecanada"``, ``"tafeng"``): Logic-Logit's test NLL and
    accuracy against the baseline chosen on validation among :data:`REAL_BASELINES` ("best of
    all"), against the market-share model, against the predicate MNL chosen on validation,
    latent-class MNL by Frank-Wolfe, the raw-feature MNL and the neural utility model."""
    t = lambda name, col: (lambda r: r["table"].loc[name, col])
    nll, acc = t("Logic-Logit", "test NLL"), t("Logic-Logit", "test accuracy")
    out = {
        "nll-best-of-all": _pairs(runs, nll, lambda r: chosen_on_validation(r["table"], REAL_BASELINES)[1]),
        "accuracy-best-of-all": _pairs(
            runs, acc, lambda r: chosen_on_validation(r["table"], REAL_BASELINES, "accuracy")[1]),
        "nll-vs-market-shares": _pairs(runs, nll, t("market shares", "test NLL")),
        "nll-vs-predicate-mnl": _pairs(runs, nll, lambda r: chosen_on_validation(r["table"], PREDICATE_MNLS)[1]),
        "accuracy-vs-predicate-mnl": _pairs(
            runs, acc, lambda r: chosen_on_validation(r["table"], PREDICATE_MNLS, "accuracy")[1]),
        "nll-vs-lc-mnl": _pairs(runs, nll, t("LC-MNL (Frank-Wolfe)", "test NLL")),
        "nll-vs-raw-mnl": _pairs(runs, nll, t("MNL (raw features)", "test NLL")),
        "accuracy-vs-raw-mnl": _pairs(runs, acc, t("MNL (raw features)", "test accuracy")),
        "nll-vs-neural": _pairs(runs, nll, t("neural utility (MLP)", "test NLL")),
        "accuracy-vs-neural": _pairs(runs, acc, t("neural utility (MLP)", "test accuracy")),
    }
    return {f"{prefix}-{k}": v for k, v in out.items()}


def measurement_table(measurements: Mapping[str, tuple], replicates: Sequence[int]):
    """The measurements handed to the registry as a table (chapter 01): one row per claim id,
    ``ours`` and ``control`` per replicate (the control blank where the registry fixes it)."""
    import pandas as pd

    rows = {}
    for cid, (ours, control) in measurements.items():
        row = {f"ours, {r}": v for r, v in zip(replicates, ours)}
        if control is not None:
            row.update({f"control, {r}": v for r, v in zip(replicates, control)})
        rows[cid] = row
    cols = [f"ours, {r}" for r in replicates] + [f"control, {r}" for r in replicates]
    return pd.DataFrame.from_dict(rows, orient="index").reindex(columns=cols)


def replicate_table(runs: Sequence[dict], column: str = "test NLL"):
    """One row per model, one column per replicate (``seed s``): ``column`` of each replicate's
    table (chapter 01)."""
    import pandas as pd

    return pd.DataFrame({f"seed {r['seed']}": r["table"][column] for r in runs})


def recovery_table(runs: Sequence[dict]):
    """Recovery of the planted rules per replicate of :func:`consider_then_choose_run` (notebook
    01): the budget chosen on validation, the report's summary, the chance level (mean and best of
    the random models of the same shape) and the recall and precision of the fit handed the
    generator's thresholds."""
    import pandas as pd

    rows = []
    for r in runs:
        c = r["chance"]
        rows.append({"seed": r["seed"], "R chosen": r["fitted"]["Logic-Logit"].best_, **r["report"].summary(),
                     "chance recall": c["recall"], "chance recall max": c["recall max"],
                     "chance precision": c["precision"], "chance precision max": c["precision max"],
                     "grid recall": r["report_grid"].recall, "grid precision": r["report_grid"].precision})
    return pd.DataFrame(rows).set_index("seed")


def replicate(run: Callable, seeds: Sequence[int], desc: str = "replicates", **kw) -> list:
    """``[run(seed=s, **kw) for s in seeds]`` with a progress bar (chapter 01)."""
    return [run(seed=s, **kw) for s in progress(list(seeds), desc=desc)]


def plot_budget_sweep(run: dict, name: str, ax_nll, ax_acc) -> None:
    """Logic-Logit's validation NLL and accuracy against the rules-per-type budget ``R`` (the
    tries of :func:`logic_logit`), with every tuned baseline's validation score as a dashed line
    (notebooks 03-04): what the budget was chosen on; the test split plays no part."""
    model, table = run["fitted"]["Logic-Logit"], run["table"]
    R = list(model.val_table_)
    for ax, key, col in ((ax_nll, "nll", "val NLL"), (ax_acc, "accuracy", "val accuracy")):
        ax.plot(R, [model.val_table_[r][key] for r in R], "o-", color="C3", label="Logic-Logit")
        others = [r for r in table.index if r != "Logic-Logit" and np.isfinite(table.loc[r, col])]
        for i, row in enumerate(others):
            ax.axhline(table.loc[row, col], ls="--", lw=1, color=f"C{i if i < 3 else i + 1}", label=row)
        ax.set(xlabel="rules per type R", ylabel=f"validation {key}", title=name)
        ax.set_xticks(R)
