"""Metrics of a counterfactual (chapter 14, notebook 02): NLL under the SPN (exact), inverse-MAD
L1 distance, #changed features, validity and actionability."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .features import DataHandler
from .model import predict_logit
from .spn import SPN

__all__ = ["evaluate", "summarise", "paired"]


def evaluate(handler: DataHandler, spn: SPN, mlp, x0: pd.DataFrame, cfs: pd.DataFrame,
             target: int) -> pd.DataFrame:
    """One row per counterfactual: nll, distance, n_changed, valid, actionable."""
    if len(cfs) == 0:
        return pd.DataFrame(columns=["nll", "distance", "n_changed", "valid", "actionable"])
    E0, E = handler.encode(x0), handler.encode(cfs)
    logit = predict_logit(mlp, E)
    return pd.DataFrame({
        "nll": -spn.log_likelihood(handler.spn_matrix(cfs, target)),
        "distance": handler.distance(E0, E),
        "n_changed": handler.changed(x0, cfs).sum(axis=1),
        "valid": (logit > 0) if target == 1 else (logit < 0),
        "actionable": handler.actionable(x0, cfs),
    })


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Per method: found %, valid %, actionable % (over factuals) and mean NLL / distance /
    #changed over valid counterfactuals, and median time. ``rows``: one row per (method,
    factual) with columns method, found, nll, distance, n_changed, valid, actionable, time."""
    out = []
    for method, g in rows.groupby("method", sort=False):
        ok = g[g["found"] & g["valid"].astype(bool)]
        out.append({"method": method, "n": len(g),
                     "valid %": 100 * (g["found"] & g["valid"].astype(bool)).mean(),
                     "actionable %": 100 * (g["found"] & g["valid"].astype(bool)
                                            & g["actionable"].astype(bool)).mean(),
                     "NLL": ok["nll"].mean(), "distance": ok["distance"].mean(),
                     "#changed": ok["n_changed"].mean(), "median time (s)": g["time"].median()})
    return pd.DataFrame(out)


def paired(rows: pd.DataFrame, a: str, b: str, column: str, *, need: str = "found"
           ) -> tuple[np.ndarray, np.ndarray]:
    """``column`` of methods ``a`` and ``b`` on the factuals where both satisfy ``need`` (a
    boolean column such as ``found`` or ``optimal``), aligned by factual: a paired comparison.
    ``rows`` as for :func:`summarise`, with a ``factual`` column. Chapter 14 (notebook 02)."""
    for m in (a, b):
        if not (rows["method"] == m).any():
            raise ValueError(f"method {m!r} has no rows; methods: {sorted(rows['method'].unique())}")
    A = rows[rows["method"] == a].set_index("factual")
    B = rows[rows["method"] == b].set_index("factual")
    common = A.index.intersection(B.index)
    keep = common[(A.loc[common, need].astype(bool) & B.loc[common, need].astype(bool)).to_numpy()]
    return A.loc[keep, column].to_numpy(float), B.loc[keep, column].to_numpy(float)
