"""A shared starting solution for the MIO-based methods (chapter 14, notebooks 02 and 04).

Under a small branch-and-bound budget SCIP may stop before it finds any feasible point of the
LiCE program, so a method "finds nothing" because of the budget, not because of its objective.
:func:`warm_start` builds ONE feasible point per factual that is given to every MIO-based method
(MIO and each LiCE variant) alike: the nearest training row -- after copying the factual's
immutable features into it and lifting its monotone features to at least the factual's value --
that satisfies every rule of the program (actionability, validity with the program's margin and,
when ``theta`` is given, the SPN max-approximation at least ``theta``, the strictest threshold
run). It is not a counterfactual of any of the methods, and no method sees another's solution.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .features import DataHandler
from .model import predict_logit
from .spn import SPN

__all__ = ["repair", "warm_start"]


def repair(handler: DataHandler, x0: pd.DataFrame, X: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``X`` with the factual's immutable features copied in and monotone features
    moved to at least (increasing) / at most (decreasing) the factual's value. Causal and
    greater-than rules are not repaired (:func:`warm_start` filters on them)."""
    x0r = x0.iloc[0]
    out = X[handler.names].copy().reset_index(drop=True)
    for s in handler.specs:
        info = handler.info[s.name]
        if not s.mutable:
            out[s.name] = [x0r[s.name]] * len(out)
            continue
        if s.monotone is None:
            continue
        up = s.monotone == "increasing"
        if info["kind"] == "cont":
            v, v0 = out[s.name].astype(float), float(x0r[s.name])
            out[s.name] = np.maximum(v, v0) if up else np.minimum(v, v0)
        else:  # binary (values off, on) or ordinal categorical: by position in ``values``
            vals = list(info["values"])
            i = np.array([vals.index(v) for v in out[s.name]])
            i0 = vals.index(x0r[s.name])
            i = np.maximum(i, i0) if up else np.minimum(i, i0)
            out[s.name] = [vals[k] for k in i]
    return out


def warm_start(handler: DataHandler, spn: SPN | None, mlp, X_train: pd.DataFrame,
               x0: pd.DataFrame, target: int, *, theta: float | None = None,
               margin: float = 1e-3, validity_margin: float = 1e-4) -> pd.DataFrame:
    """The nearest (inverse-MAD L1, the programs' cost) repaired training row that is feasible
    for every MIO-based program: actionable w.r.t. ``x0``, ``sign * logit >= validity_margin +
    margin`` for class ``target`` and, if ``theta`` is given, SPN max-approximation (sum as max,
    the programs' encoding) ``>= theta + margin``. Returns a one-row frame, or an empty frame
    when no training row qualifies. ``margin`` keeps the point strictly inside the program's
    constraints, so the solver's tolerances cannot reject it."""
    if target not in (0, 1):
        raise ValueError(f"target must be 0 or 1, got {target}")
    if theta is not None and spn is None:
        raise ValueError("theta needs an SPN")
    if not isinstance(x0, pd.DataFrame) or len(x0) != 1:
        raise ValueError("x0 must be a one-row DataFrame of raw features")
    R = repair(handler, x0, X_train)
    ok = handler.actionable(x0, R)
    E = handler.encode(R)
    sign = 1.0 if target == 1 else -1.0
    ok &= sign * predict_logit(mlp, E) >= validity_margin + margin
    if theta is not None and ok.any():
        idx = np.flatnonzero(ok)
        ll = spn.max_approx(handler.spn_matrix(R.iloc[idx], target))
        ok[idx[ll < theta + margin]] = False
    if not ok.any():
        return pd.DataFrame(columns=handler.names)
    d = handler.distance(handler.encode(x0), E)
    d[~ok] = np.inf
    return R.iloc[[int(np.argmin(d))]].reset_index(drop=True)
