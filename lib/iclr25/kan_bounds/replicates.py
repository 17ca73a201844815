"""The replicates each registered claim of chapter 15 is judged from (``book/claims/15-kan-bounds.yaml``).

Notebook 02's sweep has one row per trained KAN (columns ``seed``, ``target``, ``hidden``,
``n_train``, ``dropout``, ``gap``, ``excess``, ``main_term``, ``main_term_spectral``, ``bound``,
``loss_range``, ``n_params``); each function here turns it into one number per unit of
replication -- per (seed, target) for the rank correlations, per seed otherwise -- as the registry
defines the statistic. Chapter 15, notebook ``02-bound-vs-gap``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

__all__ = ["sweep_rows", "rank_correlations", "n_effects", "dropout_pairs", "non_vacuity",
           "hand_built_kans", "terms_against_hand"]


def sweep_rows(cfg) -> list[dict]:
    """The runs of the sweep of :class:`~iclr25.kan_bounds.configs.SweepConfig` ``cfg``: for each
    of ``cfg.n_seeds`` seeds and each target, every width x training size without dropout, and
    dropout ``cfg.dropout`` at width ``cfg.dropout_hidden`` and every training size. Chapter 15,
    notebook ``02-bound-vs-gap``."""
    rows = []
    for s in range(cfg.seed, cfg.seed + cfg.n_seeds):
        for t in cfg.targets:
            rows += [dict(target=t, hidden=h, n_train=n, dropout=0.0, seed=s)
                     for h in cfg.hidden for n in cfg.n_trains]
            rows += [dict(target=t, hidden=cfg.dropout_hidden, n_train=n, dropout=cfg.dropout, seed=s)
                     for n in cfg.n_trains]
    return rows


def _rho(x, y) -> float:
    if np.ptp(np.asarray(x, dtype=float)) == 0 or np.ptp(np.asarray(y, dtype=float)) == 0:
        return 0.0                          # a constant column ranks nothing
    r = spearmanr(x, y).statistic
    return float(r) if np.isfinite(r) else 0.0  # a constant column ranks nothing


def rank_correlations(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (seed, target): the Spearman correlation with the gap, across the sweep's runs, of the
    bound's main term (``l1``), of its spectral variant, and of the two baselines sqrt(p/n)
    (parameters over training size) and 1/sqrt(n) (ties ranked by scipy's average rule). A
    constant column scores 0. Chapter 15, notebook ``02-bound-vs-gap``."""
    out = []
    for (s, t), g in runs.groupby(["seed", "target"]):
        out.append({"seed": s, "target": t, "runs": len(g),
                    "bound": _rho(g.main_term, g.gap),
                    "bound (spectral)": _rho(g.main_term_spectral, g.gap),
                    "sqrt(p/n)": _rho(np.sqrt(g.n_params / g.n_train), g.gap),
                    "1/sqrt(n)": _rho(1 / np.sqrt(g.n_train), g.gap)})
    return pd.DataFrame(out)


def n_effects(runs: pd.DataFrame) -> pd.DataFrame:
    """Per seed, over the plain KANs: the mean over (target, width) of the larger of
    gap(n_max) - gap(n_min) and excess(n_max) - excess(n_min) (``gap_and_excess``: negative when
    both shrink), and of log main term(n_max) - log main term(n_min) (``log_main``). Chapter 15,
    notebook ``02-bound-vs-gap``."""
    plain = runs[runs.dropout == 0]
    lo, hi = plain.n_train.min(), plain.n_train.max()
    out = []
    for s, g in plain.groupby("seed"):
        k = ["target", "hidden"]
        a, b = g[g.n_train == lo].set_index(k), g[g.n_train == hi].set_index(k)
        both = np.maximum(b.gap - a.gap, b.excess - a.excess)
        out.append({"seed": s, "gap_and_excess": float(both.mean()),
                    "log_main": float((np.log(b.main_term) - np.log(a.main_term)).mean()),
                    "pairs": len(both)})
    return pd.DataFrame(out)


def dropout_pairs(runs: pd.DataFrame, *, target: str, hidden: int, n_train: int) -> pd.DataFrame:
    """Per seed: log main term of the plain and of the dropout KAN at one (target, width,
    training size). Chapter 15, notebook ``02-bound-vs-gap``."""
    sel = runs[(runs.target == target) & (runs.hidden == hidden) & (runs.n_train == n_train)]
    wide = sel.pivot_table(index="seed", columns=sel.dropout > 0, values="main_term")
    return pd.DataFrame({"seed": wide.index, "log main, plain": np.log(wide[False].to_numpy()),
                         "log main, dropout": np.log(wide[True].to_numpy())})


def non_vacuity(runs: pd.DataFrame) -> pd.Series:
    """Per seed: log10 of the smallest bound / loss range over the sweep's runs (below 0: the
    bound says something in at least one run). Chapter 15, notebook ``02-bound-vs-gap``."""
    return np.log10(runs.bound / runs.loss_range).groupby(runs.seed).min()


def hand_built_kans(seed: int = 0) -> dict:
    """Three small KANs on which every term of the bound has a closed form (registry entry
    ``paper-bound-terms-closed-form``): ``"one edge"`` (a spline KAN [1, 1]), ``"one layer"`` (a
    spline KAN [3, 2] with a bias) and ``"rank-1 RKHS layer"`` (a :class:`LowRankRKHSKAN` [2, 1] of
    rank 1), each with random coefficients, in double precision, and a sample ``(model, X, y,
    loss)``. Chapter 15, notebook ``01-kan-from-basis``."""
    import torch

    from .model import KAN, LowRankRKHSKAN

    g = torch.Generator().manual_seed(seed)
    out = {}
    torch.manual_seed(seed)
    for name, model, d in (("one edge", KAN([1, 1], dtype=torch.float64), 1),
                           ("one layer", KAN([3, 2], bias=True, dtype=torch.float64), 3),
                           ("rank-1 RKHS layer", LowRankRKHSKAN([2, 1], rank=1, dtype=torch.float64), 2)):
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
        X = torch.rand((20, d), generator=g, dtype=torch.float64) * 2 - 1
        y = torch.randn((20, model.widths[-1]), generator=g, dtype=torch.float64)
        out[name] = (model, X, y, "mse")
    return out


def terms_against_hand(cases: dict, *, eps=(0.1, 1.0, 10.0)) -> pd.DataFrame:
    """For each ``name: (model, X, y, loss)`` of ``cases``: every term of the chapter's bound as
    :func:`~iclr25.kan_bounds.bounds.kan_bound` computes it against its closed form from
    :func:`~iclr25.kan_bounds.bounds.terms_by_hand` -- per layer ``a``, ``W``, ``kappa``, ``beta``,
    ``M`` (sup bound), then the complexity, loss range, loss Lipschitz constant, main term and the
    entropy bound at each of ``eps``. Columns ``case``, ``term``, ``ours``, ``by hand``,
    ``rel. difference`` (relative to ``max(1, |by hand|)``). Chapter 15, notebook
    ``01-kan-from-basis``."""
    from .bounds import entropy, kan_bound, terms_by_hand

    rows = []
    for name, (model, X, y, loss) in cases.items():
        b = kan_bound(model, X, y, loss=loss)
        h = terms_by_hand(model, X, y, loss=loss, eps=eps)
        pairs = []
        for l, (t, th) in enumerate(zip(b["layers"], h["layers"])):
            pairs += [(f"layer {l + 1}: {k}", getattr(t, a), th[k]) for k, a in
                      (("a", "a"), ("W", "W"), ("kappa", "kappa"), ("beta", "beta"), ("m_out", "m_out"))]
        pairs += [(k, b[k], h[k]) for k in ("complexity", "loss_range", "lip_loss", "main_term")]
        ent = entropy(b["layers"], np.asarray(eps, dtype=float), lip_out=b["lip_loss"])[0]
        pairs += [(f"entropy at eps={e:g}", float(v), hv) for e, v, hv in zip(eps, ent, h["entropy"])]
        rows += [{"case": name, "term": k, "ours": float(o), "by hand": float(r),
                  "rel. difference": abs(float(o) - float(r)) / max(1.0, abs(float(r)))}
                 for k, o, r in pairs]
    return pd.DataFrame(rows)
