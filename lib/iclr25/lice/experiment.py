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
from .start import warm_start
from .model import predict_logit, train_mlp
from .spn import SPN, LearnSPN

__all__ = ["Prepared", "prepare", "prepare_config", "METHODS", "run_methods"]

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


def _select(p: Prepared, x0: pd.DataFrame, cfs: pd.DataFrame, target: int) -> tuple[int, pd.DataFrame]:
    """Index of the reported counterfactual among ``cfs`` -- the paper's protocol: the valid one
    with the highest exact SPN log-likelihood (the first, if none is valid) -- and the metrics
    of all of them."""
    ev = evaluate(p.handler, p.spn, p.mlp, x0, cfs, target).reset_index(drop=True)
    score = np.where(ev["valid"].astype(bool), -ev["nll"].to_numpy(float), -np.inf)
    return (int(np.argmax(score)) if np.isfinite(score).any() else 0), ev


def run_methods(p: Prepared, factuals: Sequence[int], methods: Sequence[str] = METHODS, *,
                alpha: float = 0.1, node_limit: int | None = None, lp_iterlim: int | None = None,
                time_limit: float = 600.0, separating: str = "fast", n_cf: int = 1,
                n_dice: int = 10, collect: str = "nogood", warm: bool = False,
                heuristics: str = "default", seed: int = 0, progress=None) -> pd.DataFrame:
    """Run ``methods`` on the test rows ``factuals``; one row per (method, factual).

    The paper's protocol: each method produces up to ``n_cf`` counterfactuals (MIO / LiCE: the
    ``n_cf`` best discrete patterns by re-solving with no-good cuts, each solve within
    ``node_limit`` branch-and-bound nodes and ``lp_iterlim`` simplex iterations per LP -- a
    deterministic budget, see :meth:`~iclr25.lice.LiCE.explain`; ``time_limit`` SCIP CPU
    seconds for all of them is only a safety net, recorded in ``hit_time_limit``; DiCE:
    ``n_dice``), and the **valid one with the highest exact SPN log-likelihood** is reported.
    Columns: the metrics of :func:`~iclr25.lice.evaluate` for the reported one, ``found``,
    ``n_cf`` (how many came back), ``time`` (wall seconds), ``cpu`` (SCIP seconds), ``nodes``
    (branch-and-bound nodes over all solves), solver statistics, and
    ``spn_gap`` = exact LL - the SPN's max-approximation at the decoded counterfactual (what
    the MIP's sum-as-max encoding loses there; >= 0 by construction).

    ``collect="pool"`` (the official code's protocol: one solve, its pool of the ``n_cf`` best):
    one solve per factual and method within ``node_limit`` nodes, the ``n_cf`` best distinct
    solutions SCIP kept (see :meth:`~iclr25.lice.LiCE.explain`). ``warm=True``: every MIO-based
    method gets the SAME starting point for a factual, :func:`~iclr25.lice.warm_start` with the
    strictest likelihood threshold among the methods run (so it is feasible for all of them);
    columns ``start_accepted`` (SCIP kept it), ``beat_start`` (solutions better than it, which
    alone make the pool when there are any), ``from_start`` (the reported counterfactual is
    that point) and ``n_stored`` (solutions in SCIP's storage)."""
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise ValueError(f"unknown method(s) {bad}; valid: {list(METHODS)}")
    if n_cf < 1:
        raise ValueError(f"n_cf must be >= 1, got {n_cf}")
    h, d = p.handler, p.data
    lice = LiCE(p.spn, p.mlp, h)
    Xtr, ytr = d.X.iloc[p.train].reset_index(drop=True), d.y[p.train]
    rows = []
    starts: dict = {}
    ths = [m[6:-1] for m in methods if m in ("LiCE (quartile)", "LiCE (median)", "LiCE (sample)")]
    theta_start = max(p.thresholds["median" if w == "sample" else w] for w in ths) if ths else None
    it = [(m, i) for i in factuals for m in methods]
    for method, i in (progress(it, desc=d.name) if progress else it):
        x0 = d.X.iloc[[i]].reset_index(drop=True)
        target = int(predict_logit(p.mlp, h.encode(x0))[0] <= 0)
        info = {"status": "", "optimal": np.nan, "n_optimal": np.nan, "mio_ll": np.nan,
                "cpu": np.nan, "build_time": np.nan, "nodes": np.nan, "hit_time_limit": False}
        t0 = time.perf_counter()
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
            start = None
            if warm:
                if i not in starts:
                    starts[i] = warm_start(h, p.spn, p.mlp, Xtr, x0, target, theta=theta_start)
                start = starts[i] if len(starts[i]) else None
            ex = lice.explain(x0, target, n=n_cf, node_limit=node_limit, lp_iterlim=lp_iterlim,
                              time_limit=time_limit, seed=seed, separating=separating,
                              collect=collect, start=start, heuristics=heuristics, **kw)
            cfs = ex.counterfactuals
            st = ex.stats
            info = {"status": st["status"][0] if st["status"] else "not run",
                    "optimal": bool(st["optimal"][0]) if st["optimal"] else False,
                    "n_optimal": int(sum(st["optimal"])), "mio_ll": np.nan,
                    "cpu": st["solve_time"], "build_time": st["build_time"],
                    "nodes": int(sum(st["nodes"])), "hit_time_limit": bool(st["hit_time_limit"]),
                    "start_accepted": st["start_accepted"], "n_stored": st["n_stored"],
                    "beat_start": st["beat_start"]}
        elif method == "DiCE (+spn)":
            cfs, _ = dice_counterfactuals(h, p.mlp, p.spn, Xtr, ytr, x0, target, n=n_dice,
                                          seed=seed, keep="all")
        else:
            cfs, _ = nearest_neighbour_cf(h, p.mlp, p.spn, Xtr, x0, target)
        row = {"method": method, "factual": int(i), "found": len(cfs) > 0, "n_cf": len(cfs),
               "time": time.perf_counter() - t0, **info}
        if len(cfs):
            k, ev = _select(p, x0, cfs, target)
            row.update(ev.iloc[k].to_dict())
            row["selected"] = k
            if method.startswith("MIO") or method.startswith("LiCE"):
                row["mio_ll"] = ex.stats["mio_ll"][k]
                row["from_start"] = bool(start is not None and np.allclose(
                    ex.encoded[k], h.encode(start)[0], atol=1e-6))
            S = h.spn_matrix(cfs.iloc[[k]], target)
            row["spn_gap"] = float(p.spn.log_likelihood(S)[0] - p.spn.max_approx(S)[0])
        else:
            row.update({"nll": np.nan, "distance": np.nan, "n_changed": np.nan, "valid": False,
                        "actionable": False, "selected": -1, "spn_gap": np.nan})
        rows.append(row)
    return pd.DataFrame(rows)


def prepare_config(cfg) -> Prepared:
    """Load ``cfg.dataset`` ("credit" or "adult") and :func:`prepare` it with the config's MLP,
    SPN and split settings (notebooks 02 and 04)."""
    from .data import load_adult, load_credit

    loaders = {"credit": load_credit, "adult": load_adult}
    if cfg.dataset not in loaders:
        raise ValueError(f"unknown data set {cfg.dataset!r}; valid: {sorted(loaders)} (GMSC needs "
                         "a path: iclr25.lice.load_gmsc)")
    d = loaders[cfg.dataset]()
    return prepare(d, hidden=cfg.hidden, n_epochs=cfg.n_epochs,
                   min_instances_slice=cfg.min_instances_slice, max_bins=cfg.max_bins,
                   n_train=cfg.n_train_adult if cfg.dataset == "adult" else None, seed=cfg.seed)
