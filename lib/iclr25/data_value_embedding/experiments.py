"""The chapter's measurements: one function per notebook run, returning numbers per replicate.

The notebooks hand these replicates to the chapter's claims registry
(``book/claims/02-data-value-embedding.yaml``), which judges them; nothing here decides a verdict.

- notebook 01 (Fig. 3): :func:`tsloo_vs_influence` runs the whole comparison for one training
  seed and learning rate (:class:`Fig3Run`); :func:`spearman_table` collects the runs' mean
  Spearman correlations, one row per (lr, seed); :func:`point_differences` gives the paired
  per-test-point differences; :func:`spearman_per_item` and :func:`cross_item_spearman` are the
  scores.
- notebook 02 (App. E.5, Alg. 1): :func:`projection_robustness` (projected DVEmb and a
  LoGRA-style projected influence function against their unprojected selves, one seed) and
  :func:`time_solvers` (Algorithm 1 step by step against the blocked solver, per repeat).
- notebook 03 (Fig. 1a, Fig. 4): :func:`regime_margin` and :func:`saturation`.

Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from .baselines import (DampedIF, grad_dot, influence_function, influence_function_validated,
                        tracin)
from .embed import compute_dvemb, influence, influence_checkpointing
from .mlp import (MLP, REMOVALS, gauss_newton_hessian, hessian, load_digits_split, make_schedule,
                  per_sample_grads, train_mlp, tsloo_exact)
from .recorder import GradRecorder, Records

__all__ = ["spearman_per_item", "cross_item_partner", "cross_item_spearman", "Fig3Run",
           "tsloo_vs_influence", "spearman_table", "point_differences", "METHODS_FIG3",
           "projection_robustness", "time_solvers", "regime_margin", "saturation"]

#: the estimators of notebook 01, in the order of its tables
METHODS_FIG3 = ("DVEmb", "IF (practitioner)", "IF (exact H, validated λ)",
                "IF (Gauss-Newton, validated λ)", "IF (hindsight λ)", "IF (fixed λ, indefinite)",
                "TracIn", "grad-dot")
_HESSIANS = {"exact H": "IF (exact H, validated λ)", "Gauss-Newton": "IF (Gauss-Newton, validated λ)"}


def spearman_per_item(est, truth) -> np.ndarray:
    """Spearman correlation over the rows (training points) for each column (test point).

    ``est`` and ``truth`` are ``(n, m)``; returns ``(m,)``. Its mean is
    :func:`~.baselines.mean_spearman`, the score of Fig. 3.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    from scipy.stats import rankdata

    est, truth = np.asarray(est, dtype=float), np.asarray(truth, dtype=float)
    if est.shape != truth.shape or est.ndim != 2 or est.shape[0] < 2:
        raise ValueError(f"est and truth must both be (n, m) with n >= 2; got {est.shape} and "
                         f"{truth.shape}")
    a, b = rankdata(est, axis=0), rankdata(truth, axis=0)       # average ranks for ties
    a, b = a - a.mean(0), b - b.mean(0)
    den = np.sqrt((a ** 2).sum(0) * (b ** 2).sum(0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (a * b).sum(0) / np.where(den > 0, den, 1.0), np.nan)


def cross_item_partner(labels) -> np.ndarray:
    """For each test point ``j``, the next test point ``j'`` (cyclically, ``j+1, j+2, ...``)
    whose label differs: the cross-item control of notebook 01. Raises when all labels agree.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    y = np.asarray(labels).reshape(-1)
    m = len(y)
    if m < 2 or np.all(y == y[0]):
        raise ValueError("the cross-item control needs test points of at least two classes")
    out = np.empty(m, dtype=int)
    for j in range(m):
        out[j] = next((j + k) % m for k in range(1, m) if y[(j + k) % m] != y[j])
    return out


def cross_item_spearman(est, truth, labels) -> np.ndarray:
    """``Spearman(est[:, j'], truth[:, j])`` per test point ``j``, with ``j'`` its
    :func:`cross_item_partner` (a test point of another class): what the scores of the *wrong*
    test point achieve. Returns ``(m,)``.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    est = np.asarray(est, dtype=float)
    return spearman_per_item(est[:, cross_item_partner(labels)], truth)


@dataclass
class Fig3Run:
    """One training seed at one learning rate of notebook 01 (see :func:`tsloo_vs_influence`).

    Attributes
    ----------
    lr, seed
        The run's SGD learning rate and training seed (data split, initialisation, batch order).
    per_point
        ``{(removal, method): (n_test,) Spearman with exact TSLOO}`` for every method of
        :data:`METHODS_FIG3` and both removals.
    cross_item
        ``(n_test,)``: Spearman(DVEmb scores of another-class test point, last-epoch TSLOO).
    practitioner
        Which Hessian the validation criterion preferred (``"exact H"`` or ``"Gauss-Newton"``).
    dampings, criteria, lam_mins
        Per Hessian: the chosen damping, its validation criterion, the smallest eigenvalue.
    hindsight
        Per removal: ``(Hessian, damping)`` that is best on the ground truth itself.
    sweep
        ``(Hessian, damping)`` rows: validation criterion and Spearman with TSLOO per removal.
    if_max_diff, dvemb_rel_diff
        ``max |IF(last) - IF(all)|`` and ``max |DVEmb(last) - DVEmb(all)| / max |DVEmb(all)|``.
    example
        Test point 0's exact TSLOO and DVEmb and practitioner-IF scores (for a scatter plot).
    accuracy, seconds
        Test accuracy of the final model; wall time of the run.
    """

    lr: float
    seed: int
    per_point: dict
    cross_item: np.ndarray
    practitioner: str
    dampings: dict
    criteria: dict
    lam_mins: dict
    hindsight: dict
    sweep: pd.DataFrame
    if_max_diff: float
    dvemb_rel_diff: float
    example: dict = field(repr=False, default_factory=dict)
    accuracy: float = float("nan")
    seconds: float = float("nan")

    @property
    def rho(self) -> pd.DataFrame:
        """Mean Spearman per method (rows) and removal (columns)."""
        return pd.DataFrame({r: {m: float(np.mean(self.per_point[(r, m)])) for m in METHODS_FIG3}
                             for r in REMOVALS})


def tsloo_vs_influence(cfg, *, lr: float | None = None, seed: int | None = None,
                       show_progress: bool = False) -> Fig3Run:
    """Notebook 01 for one training seed and learning rate: train the MLP with the recorder on,
    compute DVEmb, the exact TSLOO of every training point by retraining (removal from the last
    epoch and from all epochs), and score every estimator of :data:`METHODS_FIG3` against it.

    ``cfg`` is a :class:`~.configs.Fig3Config` (``lr``, ``seed`` default to its own). The
    practitioner's influence function is the better, *on the validation retraining*, of the
    exact-Hessian and Gauss-Newton IFs, each with its damping chosen on that validation set
    (:func:`~.baselines.influence_function_validated`); the test points' ground truth is used only
    to score, and by the hindsight baseline (the damping of either grid that is best on it).

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    lr = float(cfg.lr if lr is None else lr)
    seed = int(cfg.seed if seed is None else seed)
    t0 = time.perf_counter()
    Xtr, ytr, Xho, yho = load_digits_split(cfg.n_train, cfg.n_test + cfg.n_val, seed=seed)
    Xte, yte = Xho[:cfg.n_test], yho[:cfg.n_test]                # attributed test points
    Xva, yva = Xho[cfg.n_test:], yho[cfg.n_test:]                # validation: chooses the damping
    schedule = make_schedule(cfg.n_train, cfg.batch_size, cfg.n_epochs, seed=seed)
    model = MLP(Xtr.shape[1], cfg.hidden, seed=seed)
    model0 = copy.deepcopy(model)
    rec = GradRecorder(model)
    hist = train_mlp(model, Xtr, ytr, schedule, lr, recorder=rec, X_test=Xte, y_test=yte)
    with torch.no_grad():
        acc = float((model(Xte).argmax(1) == yte).double().mean())
    emb = compute_dvemb(rec.records)
    g_test = per_sample_grads(model, Xte, yte)
    last = max(schedule.epochs)
    points = torch.arange(cfg.n_train)
    truth = {r: tsloo_exact(model0, Xtr, ytr, schedule, lr, points, Xte, yte, removal=r,
                            show_progress=show_progress) for r in REMOVALS}
    # the practitioner's validation set: retrain without a few random points (ordinary LOO)
    rng = np.random.default_rng(seed + 1)
    val_points = torch.as_tensor(rng.choice(cfg.n_train, cfg.n_val_removed, replace=False))
    val_loo = tsloo_exact(model0, Xtr, ytr, schedule, lr, val_points, Xva, yva, removal="all",
                          show_progress=show_progress)
    G = per_sample_grads(model, Xtr, ytr)
    g_val = per_sample_grads(model, Xva, yva)
    GN = gauss_newton_hessian(model, Xtr, ytr)
    hess = {"exact H": hessian(model, Xtr, ytr, gauss_newton=GN), "Gauss-Newton": GN}
    fits: dict[str, DampedIF] = {
        k: influence_function_validated(G, g_test, H, val_points=val_points, val_grads=g_val,
                                        val_loo=val_loo) for k, H in hess.items()}
    practitioner = max(fits, key=lambda k: fits[k].criterion[fits[k].damping])
    naive = influence_function(G, g_test, hess["exact H"], cfg.damping)
    common = {**{_HESSIANS[k]: a.scores for k, a in fits.items()},
              "IF (practitioner)": fits[practitioner].scores, "IF (fixed λ, indefinite)": naive,
              "grad-dot": grad_dot(G, g_test)}
    scores = {"last": {"DVEmb": influence(emb.by_epoch(last), g_test),
                       "TracIn": tracin(rec.records, hist["test_grads"], epochs=[last]), **common},
              "all": {"DVEmb": influence(emb.total, g_test),
                      "TracIn": tracin(rec.records, hist["test_grads"]), **common}}
    sweep = pd.DataFrame([{"Hessian": k, "damping": lam, "validation": a.criterion[lam],
                           **{r: float(np.mean(spearman_per_item(s, truth[r]))) for r in REMOVALS}}
                          for k, a in fits.items() for lam, s in a.sweep.items()])
    hindsight = {}
    for r in REMOVALS:
        best = sweep.loc[sweep[r].idxmax()]
        hindsight[r] = (best["Hessian"], float(best["damping"]))
        scores[r]["IF (hindsight λ)"] = fits[best["Hessian"]].sweep[float(best["damping"])]
    per_point = {(r, m): spearman_per_item(scores[r][m], truth[r])
                 for r in REMOVALS for m in METHODS_FIG3}
    dv_diff = float((scores["last"]["DVEmb"] - scores["all"]["DVEmb"]).abs().max())
    return Fig3Run(
        lr=lr, seed=seed, per_point=per_point,
        cross_item=cross_item_spearman(scores["last"]["DVEmb"], truth["last"], yte.numpy()),
        practitioner=practitioner,
        dampings={k: a.damping for k, a in fits.items()},
        criteria={k: a.criterion[a.damping] for k, a in fits.items()},
        lam_mins={k: a.lam_min for k, a in fits.items()}, hindsight=hindsight,
        sweep=sweep.set_index(["Hessian", "damping"]),
        if_max_diff=float((scores["last"]["IF (practitioner)"]
                           - scores["all"]["IF (practitioner)"]).abs().max()),
        dvemb_rel_diff=dv_diff / float(scores["all"]["DVEmb"].abs().max()),
        example={r: {"truth": truth[r][:, 0].numpy(), "DVEmb": scores[r]["DVEmb"][:, 0].numpy(),
                     "IF": scores[r]["IF (practitioner)"][:, 0].numpy()} for r in REMOVALS},
        accuracy=acc, seconds=time.perf_counter() - t0)


def spearman_table(runs) -> pd.DataFrame:
    """The runs' mean Spearman with exact TSLOO: one row per ``(lr, seed)``, columns
    ``(removal, method)``, plus ``("cross-item", "DVEmb")`` (last-epoch TSLOO scored by another
    test point's DVEmb).

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    rows = {}
    for run in runs:
        row = {(r, m): float(np.mean(run.per_point[(r, m)])) for r in REMOVALS for m in METHODS_FIG3}
        row[("cross-item", "DVEmb")] = float(np.mean(run.cross_item))
        rows[(run.lr, run.seed)] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.names = ["lr", "seed"]
    out.columns = pd.MultiIndex.from_tuples(out.columns, names=["removal", "method"])
    return out.sort_index()


def point_differences(runs, a: str = "DVEmb", b: str = "IF (practitioner)") -> pd.DataFrame:
    """Per learning rate and removal, the paired per-test-point differences ``Spearman(a) -
    Spearman(b)`` pooled over the seeds: their number, mean, a 95% t interval over the test
    points (seeds and test points pooled, so narrower than the registered interval over seeds),
    and how many favour ``a``.

    Introduced in ``notebooks/02-data-value-embedding/01-tsloo-vs-influence.ipynb``.
    """
    from scipy import stats

    rows = []
    for lr in sorted({run.lr for run in runs}):
        for r in REMOVALS:
            d = np.concatenate([run.per_point[(r, a)] - run.per_point[(r, b)]
                                for run in runs if run.lr == lr])
            half = float(stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))) \
                if len(d) > 1 else float("inf")
            rows.append({"lr": lr, "removal": r, "test points x seeds": len(d),
                         "mean difference": float(d.mean()), "low": float(d.mean()) - half,
                         "high": float(d.mean()) + half, f"{a} ahead": int((d > 0).sum())})
    return pd.DataFrame(rows).set_index(["lr", "removal"])


# ---------------------------------------------------------------------------------------------
# notebook 02


def projection_robustness(cfg, *, seed: int | None = None) -> pd.DataFrame:
    """Notebook 02's projection study (App. E.5) for one seed, which seeds the data split, the
    initialisation, the batch order and the projection matrices.

    For each per-layer projection dimension of ``cfg.proj_dims`` the same trajectory is recorded
    with projected gradients. Rows ``recursion="full"`` and ``"per-layer"``: Spearman (mean over
    test points) of the projected DVEmb scores with the unprojected scores of the same recursion,
    and their relative error. Row ``recursion="IF"``: the LoGRA-style influence function -- the
    final model's per-sample gradients projected with the *same* matrices, the Gauss-Newton
    Hessian projected to ``Pi GN Pi^T``, its damping chosen by notebook 01's validation rule in
    the projected space --
    against the unprojected Gauss-Newton IF (damping chosen by the same rule). ``attrs``: the
    seed, the unprojected IF's damping, and the unprojected per-layer recursion's Spearman with
    the full one.

    Introduced in ``notebooks/02-data-value-embedding/02-recursion-and-cost.ipynb``.
    """
    seed = int(cfg.seed if seed is None else seed)
    Xtr, ytr, Xho, yho = load_digits_split(cfg.n_train, cfg.n_test + cfg.n_val, seed=seed)
    Xte, yte = Xho[:cfg.n_test], yho[:cfg.n_test]
    Xva, yva = Xho[cfg.n_test:], yho[cfg.n_test:]
    schedule = make_schedule(cfg.n_train, cfg.batch_size, cfg.n_epochs, seed=seed)
    model0 = MLP(Xtr.shape[1], cfg.hidden, seed=seed)

    def record(proj_dim=None):
        model = copy.deepcopy(model0)
        rec = GradRecorder(model, proj_dim=proj_dim, seed=seed)
        train_mlp(model, Xtr, ytr, schedule, cfg.lr, recorder=rec)
        with rec.probe() as pr:
            F.cross_entropy(model(Xte), yte).backward()
        return rec, pr.grads, model

    rec, g_test, model = record()
    exact = {pl: influence(compute_dvemb(rec.records, per_layer=pl), g_test) for pl in (False, True)}
    # the influence function's ingredients at the final model (full space)
    G, g_te, g_va = (per_sample_grads(model, X, y) for X, y in ((Xtr, ytr), (Xte, yte), (Xva, yva)))
    GN = gauss_newton_hessian(model, Xtr, ytr)
    rng = np.random.default_rng(seed + 1)
    vp = torch.as_tensor(rng.choice(cfg.n_train, cfg.n_val_removed, replace=False))
    vloo = tsloo_exact(model0, Xtr, ytr, schedule, cfg.lr, vp, Xva, yva, removal="all",
                       show_progress=False)
    if_full = influence_function_validated(G, g_te, GN, val_points=vp, val_grads=g_va, val_loo=vloo)
    rows = []
    for k in cfg.proj_dims:
        prec, pg, _ = record(k)
        for pl in (False, True):
            s = influence(compute_dvemb(prec.records, per_layer=pl), pg)
            rows.append({"proj_dim per layer": k, "stored p~": prec.dim,
                         "recursion": "per-layer" if pl else "full",
                         "Spearman with unprojected": float(np.mean(spearman_per_item(s, exact[pl]))),
                         "relative error": float((s - exact[pl]).norm() / exact[pl].norm())})
        P = prec.projection_matrix()
        Gp = P @ GN @ P.T
        proj = influence_function_validated(G @ P.T, g_te @ P.T, (Gp + Gp.T) / 2, val_points=vp,
                                            val_grads=g_va @ P.T, val_loo=vloo)
        rows.append({"proj_dim per layer": k, "stored p~": prec.dim, "recursion": "IF",
                     "Spearman with unprojected": float(np.mean(spearman_per_item(proj.scores,
                                                                                   if_full.scores))),
                     "relative error": float((proj.scores - if_full.scores).norm()
                                             / if_full.scores.norm()),
                     "damping": proj.damping})
    out = pd.DataFrame(rows)
    out.attrs.update(seed=seed, if_damping=float(if_full.damping),
                     per_layer_vs_full=float(np.mean(spearman_per_item(exact[True], exact[False]))))
    return out


def time_solvers(p: int, n_rows: int, *, repeats: int = 1, seed: int = 0, batch: int = 32,
                 eta: float = 0.01) -> pd.DataFrame:
    """Wall time of Algorithm 1 step by step (``method="reference"``) and of the blocked solver on
    ``n_rows`` synthetic float32 gradients of width ``p`` (batches of ``batch``), once per repeat:
    repeat ``r`` draws fresh gradients seeded by ``seed + r`` and times both after a warm-up.
    Returns one row per repeat: the seconds of each, their ratio and the embeddings' relative
    difference.

    Introduced in ``notebooks/02-data-value-embedding/02-recursion-and-cost.ipynb``.
    """
    if p < 1 or n_rows < batch or repeats < 1:
        raise ValueError(f"need p >= 1, n_rows >= batch ({batch}) and repeats >= 1; got p={p}, "
                         f"n_rows={n_rows}, repeats={repeats}")
    rows = []
    for r in range(repeats):
        gen = torch.Generator().manual_seed(seed + r)
        synth = Records()
        for t in range(n_rows // batch):
            synth.append(torch.randn(batch, p, generator=gen) / p ** 0.5, eta,
                         torch.arange(batch) + batch * t)
        out, secs = {}, {}
        for method in ("reference", "blocked"):
            compute_dvemb(synth.truncate(2), method=method)                   # warm-up
            t1 = time.perf_counter()
            out[method] = compute_dvemb(synth, method=method).rows
            secs[method] = time.perf_counter() - t1
        rows.append({"p~": p, "repeat": r, "reference s": secs["reference"],
                     "blocked s": secs["blocked"], "speed-up": secs["reference"] / secs["blocked"],
                     "rel. diff": float((out["blocked"] - out["reference"]).norm()
                                        / out["reference"].norm()),
                     "gradients MiB": synth.nbytes() / 2 ** 20, "M MiB": p * p * 4 / 2 ** 20})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# notebook 03


def regime_margin(summary: dict) -> float:
    """``min(early - basin, late - basin) / basin_sd`` from a :func:`~.lm.regime_summary`: both
    regimes above the basin, in units of the basin's per-iteration standard deviation (positive
    only when both are).

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """
    sd = float(summary["basin_sd"])
    if not sd > 0:
        raise ValueError(f"the basin's standard deviation must be positive, got {sd}")
    return min(summary["early"] - summary["basin"], summary["late"] - summary["basin"]) / sd


def saturation(records: Records, lrs, val_grads: dict, n_checkpoints: int, *, n_bins: int = 10,
               ) -> tuple[pd.DataFrame, float]:
    """Influence checkpointing (Fig. 4): for each of ``n_checkpoints`` evenly spaced checkpoints
    ``k``, the embeddings of the iterations before ``k`` (:func:`~.embed.influence_checkpointing`)
    dotted with the mean validation gradient probed at ``k`` (``val_grads[k]``), as mean
    ``|influence| / lr`` per iteration, averaged in ``n_bins`` equal bins of the whole run.

    Returns the ``(bin, checkpoint)`` table and the log-ratio of the first bin's value at the last
    checkpoint over that at the first checkpoint that covers the whole bin (negative: the
    earliest iterations' influence shrank).

    Introduced in ``notebooks/02-data-value-embedding/03-three-regimes.ipynb``.
    """
    from .lm import iteration_influence

    T = records.n_steps
    if len(lrs) != T:
        raise ValueError(f"need one learning rate per recorded step ({T}), got {len(lrs)}")
    cps = influence_checkpointing(records, n_checkpoints)
    missing = [k for k in cps if k not in val_grads]
    if missing:
        raise ValueError(f"no validation gradient probed at checkpoint(s) {missing}; train with "
                         "checkpoints=... covering them")
    evo = {}
    for k, e in cps.items():
        vals = iteration_influence(e, lrs[:k], val_grads[k].mean(0), kind="abs")
        bins = np.minimum(np.arange(k) * n_bins // T, n_bins - 1)
        evo[k] = pd.Series(vals).groupby(bins).mean()
    table = pd.DataFrame(evo).rename_axis(index="bin", columns="checkpoint")
    first_bin_end = -(-T // n_bins)                                  # ceil(T / n_bins)
    covering = [k for k in table.columns if k >= first_bin_end]
    first = table.loc[0]
    return table, float(np.log(first[covering[-1]] / first[covering[0]]))
