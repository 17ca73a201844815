"""The main-table pipeline (chapter 14, notebooks 02-03): split, fit the classifier and the SPN,
pick factuals, run every method, evaluate."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from .baselines import dice_counterfactuals, nearest_neighbour_cf
from .data import Dataset
from .features import DataHandler
from .lice import LiCE, thresholds
from .metrics import evaluate
from .model import predict_logit, train_mlp
from .spn import SPN, LearnSPN

__all__ = ["Prepared", "prepare", "METHODS", "run_methods"]

METHODS = ("MIO", "LiCE (optimize)", "LiCE (quartile)", "LiCE (sample)", "LiCE (median)",
           "DiCE (+spn)", "NN (FACE-like)")


@dataclass
class Prepared:
    """A data set split into train/test with its fitted handler, classifier and SPN."""

    data: Dataset
    handler: DataHandler
    train: np.ndarray
    test: np.ndarray
    mlp: object
    spn: SPN
    thresholds: dict
    accuracy: float
    fit_seconds: dict


def prepare(data: Dataset, *, hidden: Sequence[int] = (20, 10), n_epochs: int = 50,
            min_instances_slice: int = 200, max_bins: int = 10, n_train: int | None = None,
            test_fraction: float = 0.2, seed: int = 0) -> Prepared:
    """Split (one fold of the paper's 5-fold CV: 80/20), fit the handler on all rows (so every
    factual lies within the bounds), the MLP and the SPN on the training rows."""
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(data.X))
    n_test = max(1, int(round(test_fraction * len(idx))))
    test, train = idx[:n_test], idx[n_test:]
    if n_train is not None:
        train = train[:n_train]
    h = data.handler()
    E = h.encode(data.X)
    t0 = time.perf_counter()
    mlp = train_mlp(E[train], data.y[train], hidden, n_epochs=n_epochs, seed=seed)
    t1 = time.perf_counter()
    S = h.spn_matrix(data.X.iloc[train], data.y[train])
    spn = LearnSPN(h.spn_types(), min_instances_slice=min_instances_slice, max_bins=max_bins,
                   seed=seed).fit(S)
    t2 = time.perf_counter()
    acc = float(((predict_logit(mlp, E[test]) > 0) == data.y[test]).mean())
    return Prepared(data, h, train, test, mlp, spn, thresholds(spn, S), acc,
                    {"mlp": t1 - t0, "spn": t2 - t1})


def run_methods(p: Prepared, factuals: Sequence[int], methods: Sequence[str] = METHODS, *,
                alpha: float = 0.1, time_limit: float = 10.0, n_dice: int = 10, seed: int = 0,
                progress=None) -> pd.DataFrame:
    """Run ``methods`` on the test rows ``factuals``; one row per (method, factual) with the
    metrics of :func:`~iclr25.lice.evaluate`, ``found``, ``time`` and solver statistics."""
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise ValueError(f"unknown method(s) {bad}; valid: {list(METHODS)}")
    h, d = p.handler, p.data
    lice = LiCE(p.spn, p.mlp, h)
    Xtr, ytr = d.X.iloc[p.train].reset_index(drop=True), d.y[p.train]
    rows = []
    it = [(m, i) for i in factuals for m in methods]
    for method, i in (progress(it, desc=d.name) if progress else it):
        x0 = d.X.iloc[[i]].reset_index(drop=True)
        target = int(predict_logit(p.mlp, h.encode(x0))[0] <= 0)
        info = {"status": "", "optimal": np.nan, "mio_ll": np.nan, "build_time": np.nan}
        if method.startswith("MIO") or method.startswith("LiCE"):
            if method == "MIO":
                kw = dict(mode="mio")
            elif method == "LiCE (optimize)":
                kw = dict(mode="optimize", alpha=alpha)
            else:
                which = method[6:-1]
                if which == "sample":
                    ll0 = float(p.spn.log_likelihood(h.spn_matrix(x0, target))[0])
                    theta = min(p.thresholds["median"], ll0)
                else:
                    theta = p.thresholds[which]
                kw = dict(mode="threshold", theta=theta)
            ex = lice.explain(x0, target, time_limit=time_limit, seed=seed, **kw)
            cfs, seconds = ex.counterfactuals, ex.stats["total_time"]
            info = {"status": ex.stats["status"][0] if ex.stats["status"] else "timelimit",
                    "optimal": bool(ex.stats["optimal"][0]) if ex.stats["optimal"] else False,
                    "mio_ll": ex.stats["mio_ll"][0] if ex.stats["mio_ll"] else np.nan,
                    "build_time": ex.stats["build_time"]}
        elif method == "DiCE (+spn)":
            cfs, seconds = dice_counterfactuals(h, p.mlp, p.spn, Xtr, ytr, x0, target, n=n_dice,
                                                seed=seed)
        else:
            cfs, seconds = nearest_neighbour_cf(h, p.mlp, p.spn, Xtr, x0, target)
        ev = evaluate(h, p.spn, p.mlp, x0, cfs, target)
        row = {"method": method, "factual": int(i), "found": len(cfs) > 0, "time": seconds, **info}
        if len(cfs):
            row.update(ev.iloc[0].to_dict())
        else:
            row.update({"nll": np.nan, "distance": np.nan, "n_changed": np.nan, "valid": False,
                        "actionable": False})
        if len(cfs) and not np.isnan(row["mio_ll"]):
            row["ll_gap"] = -row["nll"] - row["mio_ll"]  # exact LL minus the MIO's max-approximation
        rows.append(row)
    return pd.DataFrame(rows)
