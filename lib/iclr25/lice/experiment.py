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

__all__ = ["Prepared", "folds", "prepare", "prepare_config", "METHODS", "run_methods", "run_folds",
           "pool_certified", "rounds_optimal"]

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


def folds(n_rows: int, n_folds: int = 5, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """The paper's 5-fold cross-validation: ``(train, test)`` row indices of each fold of
    ``sklearn.model_selection.KFold(n_folds, shuffle=True, random_state=seed)``, each of them
    permuted with ``seed`` (so the first test rows of a fold are a random draw of its test set,
    not the file's first rows). Chapter 14, notebooks 02-04."""
    from sklearn.model_selection import KFold

    if not 2 <= n_folds <= n_rows:
        raise ValueError(f"n_folds must be between 2 and the number of rows ({n_rows}), got {n_folds}")
    rng = np.random.default_rng(seed)
    out = []
    for train, test in KFold(n_folds, shuffle=True, random_state=seed).split(np.arange(n_rows)):
        out.append((rng.permutation(train), rng.permutation(test)))
    return out


def prepare(data: Dataset, *, hidden: Sequence[int] = (20, 10), n_epochs: int = 50,
            min_instances_slice: int = 200, max_bins: int = 10, n_train: int | None = None,
            test_fraction: float = 0.2, seed: int = 0, fold: int | None = None,
            n_folds: int = 5) -> Prepared:
    """Split, fit the handler on all rows (so every factual lies within the bounds), the MLP and
    the SPN on the training rows. ``fold=None``: one random 80/20 split (``test_fraction``);
    ``fold=k``: fold ``k`` of :func:`folds` (the paper's 5-fold CV, ``n_folds``, seeded by
    ``seed``). ``n_train``: at most this many training rows (a random subset)."""
    if fold is None:
        rng = np.random.default_rng(seed)
        idx = rng.permutation(len(data.X))
        n_test = max(1, int(round(test_fraction * len(idx))))
        test, train = idx[:n_test], idx[n_test:]
    else:
        if not 0 <= fold < n_folds:
            raise ValueError(f"fold must be in 0..{n_folds - 1}, got {fold}")
        train, test = folds(len(data.X), n_folds, seed)[fold]
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
                    "beat_start": st["beat_start"], "n_rounds": len(st["status"]),
                    "rounds_optimal": rounds_optimal(ex),
                    "stopped_at_start": bool(st.get("stopped_at_start", False)),
                    "pool_certified": pool_certified(ex, h)}
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


def rounds_optimal(ex) -> bool:
    """Every solve of ``ex`` (each n-best round) ended with a proof: status ``optimal`` (or
    ``infeasible``: no further pattern exists), and none stopped at the CPU-seconds safety net."""
    st = ex.stats
    return bool(st["status"]) and all(s in ("optimal", "infeasible") for s in st["status"]) \
        and not st["hit_time_limit"]


def pool_certified(ex, handler: DataHandler) -> bool:
    """Whether the pool ``ex`` reports is a set of distinct optima of its program (issue 65): its
    decoded counterfactuals are pairwise distinct, each is the proven optimum of its n-best round
    (``stats["optimal"]``) and, where a shared start was given, each objective beats the start's
    by the relative tolerance :data:`~iclr25.lice.lice.START_TOL` (no near-start solution). An
    empty pool is certified when its solves ended with a proof (:func:`rounds_optimal`)."""
    from .lice import START_TOL

    st = ex.stats
    if not len(ex.counterfactuals):
        return rounds_optimal(ex)
    keys = {tuple(r) for r in handler.encode(ex.counterfactuals).round(6)}
    ok = len(keys) == len(ex.counterfactuals) and all(st["optimal"]) \
        and len(st["optimal"]) == len(ex.counterfactuals)
    s0 = st.get("start_objective")
    if s0 is not None:
        ok = ok and all(v < s0 - START_TOL * (1.0 + abs(s0)) for v in st["objective"])
    return bool(ok)


def run_folds(data: Dataset, cfg, *, progress=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The main table under the paper's protocol (notebooks 02 and 04): for each of the
    ``cfg.n_folds`` folds of :func:`folds` (KFold, seed ``cfg.seed``), refit the MLP and the SPN on
    the fold's training rows (Adult: a random ``cfg.n_train_adult`` of them) and run ``cfg.methods`` on the first
    ``cfg.n_per_fold`` of its (shuffled) test rows with :func:`run_methods`. Returns the rows (one
    per fold, method and factual, with a ``fold`` column) and one row per fold: test accuracy, SPN
    size, likelihood thresholds and fit seconds."""
    all_rows, info = [], []
    for k in range(cfg.n_folds):
        p = prepare(data, hidden=cfg.hidden, n_epochs=cfg.n_epochs,
                    min_instances_slice=cfg.min_instances_slice, max_bins=cfg.max_bins,
                    n_train=cfg.n_train_adult if data.name == "adult" else None, seed=cfg.seed,
                    fold=k, n_folds=cfg.n_folds)
        rows = run_methods(p, p.test[:cfg.n_per_fold], cfg.methods, alpha=cfg.alpha,
                           node_limit=cfg.node_limit, time_limit=cfg.time_limit,
                           separating=cfg.separating, n_cf=cfg.n_cf, n_dice=cfg.n_dice,
                           collect=cfg.collect, warm=cfg.warm, heuristics=cfg.heuristics,
                           seed=cfg.seed, progress=progress)
        all_rows.append(rows.assign(fold=k))
        info.append({"fold": k, "train": len(p.train), "test": len(p.test),
                     "accuracy": p.accuracy, "SPN nodes": len(p.spn.nodes),
                     "median LL": p.thresholds["median"], "fit s": sum(p.fit_seconds.values())})
    return pd.concat(all_rows, ignore_index=True), pd.DataFrame(info).set_index("fold")


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
