"""Model comparisons used by the chapter's notebooks: fit several choice models on one split and
tabulate held-out NLL and accuracy; sweep Logic-Logit's rules-per-type budget
(``01-logic-logit/03-real-choices``)."""

from __future__ import annotations

import time
from typing import Mapping, Sequence

import numpy as np

from ..progress import progress
from .base import ChoiceModel
from .data import ChoiceData

__all__ = ["compare_models", "budget_sweep", "uniform_nll"]


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
