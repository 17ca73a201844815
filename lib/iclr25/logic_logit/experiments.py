"""Model comparisons used by the chapter's notebooks: fit several choice models on one split and
tabulate held-out NLL and accuracy; sweep Logic-Logit's rules-per-type budget
(``01-logic-logit/03-real-choices``)."""

from __future__ import annotations

import time
from typing import Mapping, Sequence

import numpy as np

from ..progress import progress
from .base import ChoiceModel
from .data import ChoiceData, train_test_split

__all__ = ["compare_models", "budget_sweep", "uniform_nll", "subsample_split", "compare_with_baselines",
           "plot_budget_sweep"]


def uniform_nll(data: ChoiceData) -> float:
    """NLL of the model that picks uniformly within each offer set (the no-information baseline)."""
    return float(-np.mean(np.log(1.0 / data.mask.sum(1))))


def compare_models(train: ChoiceData, test: ChoiceData, models: Mapping[str, ChoiceModel],
                   show_progress: bool = True):
    """Fit each model on ``train``; a table with train/test NLL, test top-1 accuracy, fit seconds,
    plus a ``uniform`` row. Returns ``(table, fitted)``."""
    import pandas as pd

    rows = [{"model": "uniform", "train NLL": uniform_nll(train), "test NLL": uniform_nll(test),
             "top-1 accuracy": float(np.mean(1.0 / test.mask.sum(1))), "fit s": 0.0}]
    fitted = {}
    it = progress(list(models.items()), desc="models") if show_progress else models.items()
    for name, m in it:
        t = time.perf_counter()
        m.fit(train)
        rows.append({"model": name, "train NLL": m.nll(train), "test NLL": m.nll(test),
                     "top-1 accuracy": m.accuracy(test), "fit s": time.perf_counter() - t})
        fitted[name] = m
    return pd.DataFrame(rows).set_index("model"), fitted


def budget_sweep(train: ChoiceData, test: ChoiceData, budgets: Sequence[int], **logic_kw):
    """Logic-Logit at each rules-per-type budget ``R`` in ``budgets`` (other settings from
    ``logic_kw``): a table of R, test NLL, accuracy and rule count, and the fitted models."""
    import pandas as pd

    from .model import LogicLogit

    rows, fitted = [], {}
    for R in progress(list(budgets), desc="rules per type"):
        m = LogicLogit(max_rules=int(R), **logic_kw).fit(train)
        rows.append({"rules per type": int(R), "test NLL": m.nll(test), "top-1 accuracy": m.accuracy(test),
                     "rules": sum(len(t.rules) for t in m.types_), "types": len(m.types_),
                     "fit s": m.fit_seconds_})
        fitted[int(R)] = m
    return pd.DataFrame(rows).set_index("rules per type"), fitted


def subsample_split(data: ChoiceData, n_obs: int, test_size: float, seed: int = 0):
    """Keep ``n_obs`` random choices, then split them so that no group (``data.meta["groups"]``:
    a respondent or household, when the data set has one) is in both train and test
    (``01-logic-logit/03-real-choices``). Returns ``(train, test)``."""
    if n_obs < data.n_obs:
        keep = np.sort(np.random.default_rng(seed).permutation(data.n_obs)[:n_obs])
        data = data.subset(keep)
    groups = (data.meta or {}).get("groups")
    return train_test_split(data, test_size, seed=seed, groups=groups)


def compare_with_baselines(train: ChoiceData, test: ChoiceData, cfg):
    """Every model of the chapter on one split (``01-logic-logit/03-real-choices``): the uniform
    model, MNL, latent-class MNL (EM, ``cfg.n_classes`` classes), the neural utility model, and
    Logic-Logit at each rules-per-type budget in ``cfg.budgets``. Returns ``(table, sweep, logic)``:
    the table sorted by test NLL, the budget sweep, and the fitted Logic-Logit models by budget."""
    from .baselines import MNL, LatentClassMNL, NeuralUtility

    models = {"MNL": MNL(),
              f"LC-MNL (EM, {cfg.n_classes} classes)": LatentClassMNL(cfg.n_classes, "em", n_iter=cfg.em_iters,
                                                                      seed=cfg.seed),
              "neural utility (MLP)": NeuralUtility(hidden=32, n_steps=cfg.nn_steps, seed=cfg.seed)}
    table, _ = compare_models(train, test, models)
    sweep, logic = budget_sweep(train, test, cfg.budgets, max_types=cfg.max_types, max_len=cfg.max_len,
                                beam_width=cfg.beam_width, refine_iters=cfg.refine_iters, n_bins=cfg.n_bins)
    for R, m in logic.items():
        table.loc[f"Logic-Logit (R={R})"] = [m.nll(train), m.nll(test), m.accuracy(test), m.fit_seconds_]
    return table.sort_values("test NLL"), sweep, logic


def plot_budget_sweep(sweep, table, name: str, ax_nll, ax_acc) -> None:
    """Logic-Logit's test NLL and accuracy against the rules-per-type budget, with every other
    model of ``table`` as a dashed line (``01-logic-logit/03-real-choices``)."""
    for ax, col in ((ax_nll, "test NLL"), (ax_acc, "top-1 accuracy")):
        ax.plot(sweep.index, sweep[col], "o-", color="C3", label="Logic-Logit")
        for i, row in enumerate(r for r in table.index if not r.startswith("Logic")):
            ax.axhline(table.loc[row, col], ls="--", lw=1, color=f"C{i if i < 3 else i + 1}", label=row)
        ax.set(xlabel="rules per type R", ylabel=col, title=name)
        ax.set_xticks(list(sweep.index))
