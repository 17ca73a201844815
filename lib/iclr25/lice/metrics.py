"""Metrics of a counterfactual (chapter 14, notebook 02): NLL under the SPN (exact), inverse-MAD
L1 distance, #changed features, validity and actionability."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .features import DataHandler
from .model import predict_logit
from .spn import SPN

__all__ = ["evaluate", "summarise", "paired", "mean_ci", "summarise_ci", "paired_diff"]


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


def mean_ci(x, level: float = 0.95) -> tuple[float, float]:
    """Mean of ``x`` (NaNs dropped) and the half-width of its Student-t ``level`` interval
    (NaN half-width for fewer than two values)."""
    from scipy import stats

    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    if len(x) == 0:
        return float("nan"), float("nan")
    if len(x) < 2:
        return float(x.mean()), float("nan")
    half = stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    return float(x.mean()), float(half)


def summarise_ci(rows: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """The main table with intervals: per method, factuals, valid % and actionable % (of
    factuals), mean and ``level`` t-interval half-width ("±") of NLL, distance and #changed over
    the valid reported counterfactuals, mean number of counterfactuals returned and median wall /
    SCIP CPU seconds. ``rows`` as from :func:`~iclr25.lice.run_methods`."""
    out = []
    for method, g in rows.groupby("method", sort=False):
        ok_mask = g["found"].astype(bool) & g["valid"].astype(bool)
        ok = g[ok_mask]
        r = {"method": method, "n": len(g), "valid %": 100 * ok_mask.mean(),
             "actionable %": 100 * (ok_mask & g["actionable"].astype(bool)).mean()}
        for col, name in (("nll", "NLL"), ("distance", "distance"), ("n_changed", "#changed")):
            r[name], r[name + " ±"] = mean_ci(ok[col], level)
        r["#CFs"] = float(g["n_cf"].mean()) if "n_cf" in g else float("nan")
        r["median time (s)"] = float(g["time"].median())
        r["median SCIP CPU (s)"] = float(g["cpu"].median()) if "cpu" in g else float("nan")
        out.append(r)
    return pd.DataFrame(out)


def paired_diff(rows: pd.DataFrame, a: str, b: str, column: str, level: float = 0.95
                ) -> dict:
    """Paired difference ``column``(a) - ``column``(b) over the factuals where both methods
    returned a valid counterfactual: n, means of each, mean difference and its t-interval
    (``lo``, ``hi``). Chapter 14 (notebooks 02 and 04)."""
    va = rows.assign(ok=rows["found"].astype(bool) & rows["valid"].astype(bool))
    x, y = paired(va, a, b, column, need="ok")
    m, half = mean_ci(x - y, level)
    return {"n": len(x), "a": float(np.mean(x)) if len(x) else float("nan"),
            "b": float(np.mean(y)) if len(y) else float("nan"), "diff": m,
            "lo": m - half if len(x) > 1 else float("nan"),
            "hi": m + half if len(x) > 1 else float("nan")}
