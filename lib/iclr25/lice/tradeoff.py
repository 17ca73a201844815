"""The likelihood-distance front and the solve-time scaling (chapter 14, notebook 03), over the
folds of the paper's 5-fold cross-validation.

:func:`sweep_fold` fits the MLP and the SPN on one fold of German credit and solves LiCE on the
fold's first factuals while sweeping alpha (``optimize``), the threshold quantile (``threshold``),
the SPN's size (``min_instances_slice``, LiCE (median)) and the MLP's width. :func:`front_violations`
checks the front's monotonicity at optimality, and :func:`fold_pair` turns the sweeps into the
per-fold replicates the chapter's registry judges (``book/claims/14-lice.yaml``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .data import Dataset
from .experiment import Prepared, prepare
from .lice import LiCE
from .metrics import evaluate
from .model import train_mlp
from .spn import LearnSPN

__all__ = ["solve", "sweep_fold", "front_violations", "fold_pair", "TIME_RESOLUTION"]

TIME_RESOLUTION = 0.01  # seconds: SCIP's CPU clock resolution


def solve(lice: LiCE, p: Prepared, i: int, *, node_limit: int | None, time_limit: float,
          seed: int = 0, **kw) -> dict:
    """One LiCE solve for test row ``i`` (``kw``: mode, alpha, theta): whether it found a
    counterfactual and was proven optimal, SCIP CPU and build seconds, whether it hit the safety
    net, and for a found one its MIP log-likelihood (max-approximation), exact log-likelihood,
    distance and #changed features."""
    x0 = p.data.X.iloc[[i]].reset_index(drop=True)
    ex = lice.explain(x0, node_limit=node_limit, time_limit=time_limit, seed=seed, **kw)
    row = {"factual": int(i), "found": ex.found,
           "optimal": bool(ex.stats["optimal"][0]) if ex.found else ex.stats["status"][:1] == ["infeasible"],
           "time": ex.stats["solve_time"], "build": ex.stats["build_time"],
           "hit": bool(ex.stats["hit_time_limit"])}
    if ex.found:
        ev = evaluate(p.handler, lice.spn, lice.mlp, x0, ex.counterfactuals, ex.stats["target"]).iloc[0]
        row.update(mio_ll=ex.stats["mio_ll"][0], exact_ll=-float(ev["nll"]),
                   distance=float(ev["distance"]), n_changed=float(ev["n_changed"]))
    return row


def sweep_fold(data: Dataset, cfg, fold: int, *, alphas: Sequence[float] = (),
               quantiles: Sequence[float] = (), slices: Sequence[int] = (),
               widths: Sequence[int] = (), progress=None) -> tuple[pd.DataFrame, Prepared]:
    """Fit fold ``fold`` (of ``cfg.n_folds``, KFold seeded by ``cfg.seed``) and solve its first
    ``cfg.n_per_fold`` test rows: LiCE (optimize) at each of ``alphas``, LiCE (threshold) at the
    training-LL quantile of each of ``quantiles``, LiCE (median) with the SPN relearned at each
    ``min_instances_slice`` of ``slices`` (same MLP; theta the median training LL of that SPN),
    and LiCE (median) with the MLP retrained at each hidden width of ``widths`` (same SPN). One
    row per solve, with columns ``fold``, ``sweep`` (alpha, quantile, slice, width), ``value``,
    ``size`` (SPN nodes or width) and those of :func:`solve`."""
    p = prepare(data, hidden=cfg.hidden, n_epochs=cfg.n_epochs,
                min_instances_slice=cfg.min_instances_slice, seed=cfg.seed, fold=fold,
                n_folds=cfg.n_folds)
    factuals = p.test[:cfg.n_per_fold]
    S_train = p.handler.spn_matrix(data.X.iloc[p.train], data.y[p.train])
    train_ll = p.spn.log_likelihood(S_train)
    kw = dict(node_limit=cfg.node_limit, time_limit=cfg.time_limit, seed=cfg.seed)
    jobs = [("alpha", a) for a in alphas] + [("quantile", q) for q in quantiles] \
        + [("slice", s) for s in slices] + [("width", w) for w in widths]
    rows = []
    for sweep, value in (progress(jobs, desc=f"fold {fold}") if progress else jobs):
        lice, size = LiCE(p.spn, p.mlp, p.handler), len(p.spn.nodes)
        if sweep == "alpha":
            mode = dict(mode="optimize", alpha=float(value))
        elif sweep == "quantile":
            mode = dict(mode="threshold", theta=float(np.quantile(train_ll, value)))
        elif sweep == "slice":
            spn = LearnSPN(p.handler.spn_types(), min_instances_slice=int(value), seed=cfg.seed).fit(S_train)
            lice, size = LiCE(spn, p.mlp, p.handler), len(spn.nodes)
            mode = dict(mode="threshold", theta=float(np.median(spn.log_likelihood(S_train))))
        else:
            E = p.handler.encode(data.X.iloc[p.train])
            mlp = train_mlp(E, data.y[p.train], (int(value),), n_epochs=cfg.n_epochs, seed=cfg.seed)
            lice, size = LiCE(p.spn, mlp, p.handler), int(value)
            mode = dict(mode="threshold", theta=p.thresholds["median"])
        for i in factuals:
            rows.append({"fold": fold, "sweep": sweep, "value": value, "size": size,
                         **solve(lice, p, i, **kw, **mode)})
    return pd.DataFrame(rows), p


def front_violations(runs: pd.DataFrame, rel_tol: float = 1e-3) -> tuple[list, int]:
    """Over the alpha sweep's solves proven optimal, per fold and factual, the consecutive alpha
    pairs (a1 < a2) where the larger alpha gives a lower MIP log-likelihood or a shorter
    distance (beyond ``rel_tol`` relative): optimality forbids both, since adding the two
    optimality inequalities gives (a2 - a1)(l2 - l1) >= 0. Returns (violations, pairs checked)."""
    viol, pairs = [], 0
    A = runs[(runs["sweep"] == "alpha") & runs["optimal"].astype(bool) & runs["found"].astype(bool)]
    for (fold, i), g in A.groupby(["fold", "factual"]):
        g = g.sort_values("value")
        ll, dist = g["mio_ll"].to_numpy(float), g["distance"].to_numpy(float)
        tol = rel_tol * (1 + np.abs(ll).max())
        for k in range(len(g) - 1):
            pairs += 1
            if ll[k + 1] < ll[k] - tol or dist[k + 1] < dist[k] - tol:
                viol.append((int(fold), int(i), g["value"].iloc[k], g["value"].iloc[k + 1]))
    return viol, pairs


def fold_pair(runs: pd.DataFrame, sweep: str, ours_value, control_value, column: str, *,
              log: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per fold, the mean of ``column`` (its log with ``log=True``, times floored at
    :data:`TIME_RESOLUTION`) over the factuals solved at
    both settings ``ours_value`` and ``control_value`` of ``sweep`` (for a column that needs a
    counterfactual, the factuals where both found one): paired replicates, folds in order."""
    g = runs[runs["sweep"] == sweep]
    ours, ctrl = [], []
    for _, f in g.groupby("fold", sort=True):
        a = f[f["value"] == ours_value].set_index("factual")
        b = f[f["value"] == control_value].set_index("factual")
        common = a.index.intersection(b.index)
        if column not in ("time", "build"):
            common = common[(a.loc[common, "found"].astype(bool) & b.loc[common, "found"].astype(bool)).to_numpy()]
        if not len(common):
            continue
        x, y = a.loc[common, column].to_numpy(float), b.loc[common, column].to_numpy(float)
        if log:  # SCIP's CPU clock ticks in 0.01 s: a faster solve counts as 0.01 s
            x, y = np.log(np.maximum(x, TIME_RESOLUTION)), np.log(np.maximum(y, TIME_RESOLUTION))
        ours.append(float(x.mean()))
        ctrl.append(float(y.mean()))
    return np.array(ours), np.array(ctrl)
