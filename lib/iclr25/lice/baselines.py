"""Baselines of the main table (chapter 14, notebook 02): DiCE (random, with SPN selection) and
a FACE-like nearest-neighbour counterfactual."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from .features import DataHandler
from .model import predict_logit
from .spn import SPN

__all__ = ["dice_counterfactuals", "nearest_neighbour_cf", "MlpProba"]


class MlpProba:
    """sklearn-style wrapper: raw frame -> class probabilities of the MLP (for DiCE)."""

    def __init__(self, mlp, handler: DataHandler) -> None:
        self.mlp, self.handler = mlp, handler

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        p = 1 / (1 + np.exp(-predict_logit(self.mlp, self.handler.encode(X[self.handler.names]))))
        return np.c_[1 - p, p]

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return (self.predict_proba(X)[:, 1] > 0.5).astype(int)


def dice_counterfactuals(handler: DataHandler, mlp, spn: SPN, X_train: pd.DataFrame,
                         y_train: np.ndarray, x0: pd.DataFrame, target: int, *, n: int = 10,
                         method: str = "random", seed: int = 0, keep: str = "best"
                         ) -> tuple[pd.DataFrame, float]:
    """DiCE (``dice-ml``) counterfactuals for ``x0``; immutable features are not varied (DiCE has
    no monotonicity or causal rules). ``keep="best"``: of the ``n`` returned, the one with the
    highest exact SPN LL ("DiCE +spn" in the paper); ``keep="all"``: all of them. Returns
    (frame, possibly empty, and seconds)."""
    if keep not in ("best", "all"):
        raise ValueError(f"unknown keep {keep!r}; valid: 'best', 'all'")
    import dice_ml

    t0 = time.perf_counter()
    cont = [s.name for s in handler.specs if handler.info[s.name]["kind"] == "cont"]
    df = X_train.copy()
    df["__y"] = np.asarray(y_train)
    for c in cont:
        df[c] = df[c].astype(float)
    data = dice_ml.Data(dataframe=df, continuous_features=cont, outcome_name="__y")
    model = dice_ml.Model(model=MlpProba(mlp, handler), backend="sklearn")
    exp = dice_ml.Dice(data, model, method=method)
    vary = [s.name for s in handler.specs if s.mutable]
    ranges = {c: [handler.info[c]["lo"], handler.info[c]["hi"]] for c in cont if c in vary}
    q = x0.copy()
    for c in cont:
        q[c] = q[c].astype(float)
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # dice-ml 0.12 uses pandas' deprecated inplace=
            res = exp.generate_counterfactuals(q, total_CFs=n, desired_class=int(target),
                                               features_to_vary=vary, permitted_range=ranges,
                                               random_seed=seed, verbose=False)
        cfs = res.cf_examples_list[0].final_cfs_df
    except Exception as e:  # DiCE raises when it finds none ("No counterfactuals found")
        if "No counterfactuals found" not in str(e) and "counterfactual" not in str(e).lower():
            raise
        cfs = None
    seconds = time.perf_counter() - t0
    if cfs is None or len(cfs) == 0:
        return pd.DataFrame(columns=handler.names), seconds
    cfs = cfs[handler.names].reset_index(drop=True)
    for s in handler.specs:
        if handler.info[s.name]["kind"] == "cont" and s.discrete:
            cfs[s.name] = np.round(cfs[s.name].astype(float))
    if keep == "all":
        return cfs, seconds
    ll = spn.log_likelihood(handler.spn_matrix(cfs, target))
    return cfs.iloc[[int(np.argmax(ll))]].reset_index(drop=True), seconds


def nearest_neighbour_cf(handler: DataHandler, mlp, spn: SPN, X_train: pd.DataFrame,
                         x0: pd.DataFrame, target: int, *, k: int = 10,
                         quantile: float = 0.25) -> tuple[pd.DataFrame, float]:
    """FACE-like baseline: among training points the classifier puts in ``target`` and whose SPN
    LL is above the ``quantile`` of those points (a density condition, as FACE's), the one nearest
    to ``x0`` in the inverse-MAD L1 distance. No actionability rules. Returns (frame, seconds)."""
    t0 = time.perf_counter()
    E = handler.encode(X_train)
    logit = predict_logit(mlp, E)
    ok = (logit > 0) if target == 1 else (logit < 0)
    if not ok.any():
        return pd.DataFrame(columns=handler.names), time.perf_counter() - t0
    cand = X_train[ok].reset_index(drop=True)
    ll = spn.log_likelihood(handler.spn_matrix(cand, target))
    dense = ll >= np.quantile(ll, quantile)
    cand, Ec = cand[dense].reset_index(drop=True), E[ok][dense]
    d = handler.distance(handler.encode(x0), Ec)
    i = int(np.argmin(d))
    return cand.iloc[[i]].reset_index(drop=True), time.perf_counter() - t0
