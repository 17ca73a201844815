"""Baselines in the same API: MNL, latent-class MNL (EM and Frank-Wolfe), a small neural
utility model (stand-in for the paper's neural choice models) and MNLs that see the features
Logic-Logit sees (chapter 01). Introduced in ``01-logic-logit/01-consider-then-choose`` (MNL and
the predicate MNLs) and ``02-inside-the-solver`` (latent classes).

The raw-feature :class:`MNL` is linear in the item features and never sees the predicates that
Logic-Logit's rule search draws from. :class:`PredicateMNL` closes that gap: an MNL on the same
predicate indicators (``conjunctions=False``) or on the predicates plus all their pairwise
conjunctions (``conjunctions=True``), with the L2 penalty chosen on a validation split carved from
the training data (so every model is fit on the same training choices and scored on the same
held-out ones). The feature builders are :func:`predicate_features`,
:func:`conjunction_features` and :func:`informative_columns`.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import minimize

from .base import ChoiceModel, fit_mixture_weights, log_softmax, softmax
from .data import ChoiceData

__all__ = ["MNL", "LatentClassMNL", "NeuralUtility", "LC_METHODS", "PredicateMNL", "L2_GRID", "OnPredicates",
           "predicate_data", "validation_split", "Tuned", "MarketShare",
           "predicate_features", "conjunction_pairs", "conjunction_features", "informative_columns",
           "mnl_baselines"]

LC_METHODS = ("em", "fw")


class _Standardizer:
    def fit(self, data: ChoiceData):
        v = data.X[data.mask]
        self.mean_, self.std_ = v.mean(0), v.std(0)
        self.std_[self.std_ < 1e-12] = 1.0
        return self

    def transform(self, data: ChoiceData) -> np.ndarray:
        return np.where(data.mask[..., None], (data.X - self.mean_) / self.std_, 0.0)


def _weighted_mnl(Z, mask, choice, weights, beta0, l2, bounds=None, max_iter=500, tol=1e-10):
    """argmin_beta -sum_i weights_i log P_i(beta) / sum(weights) + l2/2 |beta|^2 (L-BFGS)."""
    n = Z.shape[0]
    wsum = weights.sum()
    Zch = Z[np.arange(n), choice]

    def f(beta):
        U = Z @ beta
        S = softmax(U, mask)
        lp = log_softmax(U, mask)[np.arange(n), choice]
        val = -(weights * lp).sum() / wsum + 0.5 * l2 * beta @ beta
        grad = -(weights[:, None] * (Zch - np.einsum("nj,njd->nd", S, Z))).sum(0) / wsum + l2 * beta
        return val, grad

    res = minimize(f, beta0, jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-9})
    return res.x, res


class MNL(ChoiceModel):
    """Multinomial logit with linear utility ``u(x) = beta^T x``, fit by L-BFGS on the exact
    log-likelihood (chapter 01, ``01-consider-then-choose``).

    ``l2``: ridge penalty on the standardised coefficients (keeps collinear indicator sets
    identifiable); ``coef_`` is in the data's units.
    """

    def __init__(self, l2: float = 1e-6, max_iter: int = 1000, tol: float = 1e-12):
        if l2 < 0:
            raise ValueError(f"l2 must be >= 0, got {l2}")
        self.l2, self.max_iter, self.tol = l2, max_iter, tol

    def fit(self, data: ChoiceData) -> "MNL":
        data = self._check_data(data)
        t0 = time.perf_counter()
        self.std_ = _Standardizer().fit(data)
        Z = self.std_.transform(data)
        beta, res = _weighted_mnl(Z, data.mask, data.choice, np.ones(data.n_obs),
                                  np.zeros(Z.shape[2]), self.l2, max_iter=self.max_iter, tol=self.tol)
        self.beta_, self.coef_ = beta, beta / self.std_.std_
        self.n_iter_, self.fit_seconds_ = res.nit, time.perf_counter() - t0
        self.feature_names_ = data.feature_names
        self.fitted_ = True
        return self

    def utilities(self, data: ChoiceData) -> np.ndarray:
        self._check_fitted()
        return self.std_.transform(self._check_data(data)) @ self.beta_

    def predict_proba(self, data: ChoiceData) -> np.ndarray:
        return softmax(self.utilities(data), data.mask)


class LatentClassMNL(ChoiceModel):
    """Latent-class MNL: ``P(j|S) = sum_k alpha_k MNL_k(j|S)`` (chapter 01, ``02-inside-the-solver``).

    ``method="em"``: expectation-maximisation with ``n_classes`` classes from random
    responsibilities. ``method="fw"``: Frank-Wolfe over the mixing distribution (Jagabathula et al.
    2020): start from one MNL, add the class maximising the support objective
    ``mean_i P_i(beta) / p_i`` (L-BFGS from ``n_starts`` random starts within ``bound``), then a fully
    corrective update of the proportions; at most ``n_classes`` classes.
    """

    def __init__(self, n_classes: int = 3, method: str = "em", n_iter: int = 50, l2: float = 1e-3,
                 bound: float = 8.0, n_starts: int = 3, tol: float = 1e-6, seed: int = 0):
        if method not in LC_METHODS:
            raise ValueError(f"unknown method {method!r}; valid: {', '.join(LC_METHODS)}")
        if n_classes < 1:
            raise ValueError(f"n_classes must be >= 1, got {n_classes}")
        self.n_classes, self.method, self.n_iter, self.l2 = n_classes, method, n_iter, l2
        self.bound, self.n_starts, self.tol, self.seed = bound, n_starts, tol, seed

    def _class_probs(self, Z, mask, choice):
        n = Z.shape[0]
        return np.stack([softmax(Z @ b, mask)[np.arange(n), choice] for b in self.betas_], 1)

    def fit(self, data: ChoiceData) -> "LatentClassMNL":
        data = self._check_data(data)
        t0 = time.perf_counter()
        rng = np.random.default_rng(self.seed)
        self.std_ = _Standardizer().fit(data)
        Z = self.std_.transform(data)
        n, J, d = Z.shape
        mask, choice = data.mask, data.choice
        self.history_ = []
        if self.method == "em":
            R = rng.dirichlet(np.ones(self.n_classes), size=n)
            self.betas_ = [rng.normal(0, 0.1, d) for _ in range(self.n_classes)]
            prev = np.inf
            for it in range(self.n_iter):
                alpha = R.mean(0)
                self.betas_ = [_weighted_mnl(Z, mask, choice, R[:, k] + 1e-12, self.betas_[k],
                                             self.l2, max_iter=100)[0] for k in range(self.n_classes)]
                Pch = self._class_probs(Z, mask, choice)
                joint = Pch * alpha
                p = joint.sum(1)
                R = joint / p[:, None]
                nll = -np.mean(np.log(p))
                self.history_.append({"iter": it, "nll": nll, "n_types": self.n_classes})
                if prev - nll < self.tol:
                    break
                prev = nll
            self.alphas_ = R.mean(0)
        else:
            beta0, _ = _weighted_mnl(Z, mask, choice, np.ones(n), np.zeros(d), self.l2)
            self.betas_ = [beta0]
            alpha = np.ones(1)
            Pch = self._class_probs(Z, mask, choice)
            self.history_.append({"iter": 0, "nll": -np.mean(np.log(Pch @ alpha)), "gap": np.nan,
                                  "n_types": 1})
            bounds = [(-self.bound, self.bound)] * d
            for it in range(1, self.n_classes):
                inv_p = 1.0 / (Pch @ alpha)

                def f(beta):  # -(1/n) sum_i P_i(beta) / p_i and its gradient
                    S = softmax(Z @ beta, mask)
                    Pi = S[np.arange(n), choice]
                    g = (inv_p * Pi)[:, None] * (Z[np.arange(n), choice] - np.einsum("nj,njd->nd", S, Z))
                    return -np.mean(inv_p * Pi), -g.mean(0)

                best = None
                for s in range(self.n_starts):
                    x0 = rng.normal(0, 1.0, d) if s else self.betas_[-1] + rng.normal(0, 0.5, d)
                    r = minimize(f, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                                 options={"maxiter": 200})
                    if best is None or r.fun < best.fun:
                        best = r
                gap = -best.fun - 1.0       # Frank-Wolfe gap: max_theta <-grad, P(theta) - p>
                if gap < self.tol:
                    self.history_[-1]["gap"] = gap
                    break
                self.betas_.append(best.x)
                Pch = self._class_probs(Z, mask, choice)
                alpha = fit_mixture_weights(Pch, np.append(alpha, 0.0) * 0.9 + 0.1 * np.eye(len(alpha) + 1)[-1])
                self.history_[-1]["gap"] = gap
                self.history_.append({"iter": it, "nll": -np.mean(np.log(Pch @ alpha)), "gap": np.nan,
                                      "n_types": len(self.betas_)})
            self.alphas_ = alpha
        self.coefs_ = [b / self.std_.std_ for b in self.betas_]
        self.fit_seconds_ = time.perf_counter() - t0
        self.fitted_ = True
        return self

    def predict_proba(self, data: ChoiceData) -> np.ndarray:
        self._check_fitted()
        Z = self.std_.transform(self._check_data(data))
        return sum(a * softmax(Z @ b, data.mask) for a, b in zip(self.alphas_, self.betas_))


class NeuralUtility(ChoiceModel):
    """A small neural utility model ``u(x) = w_2^T tanh(W_1^T x + b_1)`` inside a logit (a stand-in
    for the paper's neural choice models; chapter 01, ``03-real-choices``).

    Trained by L-BFGS (at most ``n_steps`` iterations) on the NLL plus ``weight_decay / 2`` times
    the squared weights, with exact gradients (numpy; no deep-learning framework needed).
    ``val_fraction`` of the training choices (of the respondents, when ``data.meta["groups"]``
    names them) are held out for early stopping: the iterate with the best validation NLL is kept
    (0: no early stopping).
    """

    def __init__(self, hidden: int = 32, n_steps: int = 300, weight_decay: float = 1e-3,
                 val_fraction: float = 0.2, seed: int = 0):
        if hidden < 1 or n_steps < 1:
            raise ValueError("hidden and n_steps must be positive")
        if not 0 <= val_fraction < 1:
            raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        self.hidden, self.n_steps, self.weight_decay = hidden, n_steps, weight_decay
        self.val_fraction, self.seed = val_fraction, seed

    def _unpack(self, theta, d):
        h = self.hidden
        W1 = theta[: d * h].reshape(d, h)
        b1 = theta[d * h: d * h + h]
        w2 = theta[d * h + h:]
        return W1, b1, w2

    def _utilities(self, theta, Z):
        W1, b1, w2 = self._unpack(theta, Z.shape[2])
        H = np.tanh(Z @ W1 + b1)
        return H @ w2, H

    def _loss_grad(self, theta, Z, mask, choice):
        n, J, d = Z.shape
        W1, b1, w2 = self._unpack(theta, d)
        U, H = self._utilities(theta, Z)
        lp = log_softmax(U, mask)
        loss = -lp[np.arange(n), choice].mean()
        dU = np.exp(lp) * mask                        # dNLL/dU = (S - onehot(y)) / n
        dU[np.arange(n), choice] -= 1.0
        dU /= n
        dw2 = np.einsum("nj,njh->h", dU, H)
        dA = dU[..., None] * w2 * (1.0 - H ** 2)
        dW1 = np.einsum("njd,njh->dh", Z, dA)
        db1 = dA.sum((0, 1))
        lam = self.weight_decay
        loss += 0.5 * lam * (W1 ** 2).sum() + 0.5 * lam * (w2 ** 2).sum()
        grad = np.concatenate([(dW1 + lam * W1).ravel(), db1, dw2 + lam * w2])
        return loss, grad

    def fit(self, data: ChoiceData) -> "NeuralUtility":
        data = self._check_data(data)
        t0 = time.perf_counter()
        rng = np.random.default_rng(self.seed)
        self.std_ = _Standardizer().fit(data)
        Z = self.std_.transform(data)
        n, J, d = Z.shape
        h = self.hidden
        theta0 = np.concatenate([rng.normal(0, 1 / np.sqrt(d), d * h), np.zeros(h),
                                 rng.normal(0, 1 / np.sqrt(h), h)])
        groups = data.meta.get("groups")
        if groups is not None and np.shape(groups) == (n,):
            # hold out whole respondents/households, as the test split does
            uniq = rng.permutation(np.unique(groups))
            is_val = np.isin(groups, uniq[: int(round(self.val_fraction * len(uniq)))])
            va, tr = np.flatnonzero(is_val), np.flatnonzero(~is_val)
        else:
            perm = rng.permutation(n)
            n_cut = int(round(self.val_fraction * n))
            va, tr = perm[:n_cut], perm[n_cut:]
        n_val = len(va)
        args = (Z[tr], data.mask[tr], data.choice[tr])
        best = {"nll": np.inf, "theta": theta0}

        def val_nll(theta):
            U, _ = self._utilities(theta, Z[va])
            return -log_softmax(U, data.mask[va])[np.arange(n_val), data.choice[va]].mean()

        def callback(theta):
            if n_val:
                v = val_nll(theta)
                if v < best["nll"]:
                    best["nll"], best["theta"] = v, theta.copy()

        res = minimize(self._loss_grad, theta0, args=args, jac=True, method="L-BFGS-B",
                       callback=callback, options={"maxiter": self.n_steps})
        self.theta_ = best["theta"] if n_val else res.x
        self.fit_seconds_ = time.perf_counter() - t0
        self.fitted_ = True
        return self

    def predict_proba(self, data: ChoiceData) -> np.ndarray:
        self._check_fitted()
        Z = self.std_.transform(self._check_data(data))
        return softmax(self._utilities(self.theta_, Z)[0], data.mask)


# ----------------------------------------------------------------------------------------------
# MNL on the features Logic-Logit sees (chapter 01: the fair baselines)

#: the L2 penalties :class:`PredicateMNL` chooses from on its validation split (penalty
#: ``l2 / 2 * |beta|^2`` added to the mean NLL per choice)
L2_GRID = (1.0, 3e-1, 1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4)


def predicate_features(library, data: ChoiceData) -> np.ndarray:
    """The predicate indicators Logic-Logit's rule search draws from, as MNL features (chapter 01):
    float ``[n_obs, max_items, M]``, column ``m`` = predicate ``m`` of ``library`` on each offered
    item (0 on padding slots)."""
    return library.evaluate(data).astype(np.float64)


def conjunction_pairs(n_predicates: int) -> list[tuple[int, int]]:
    """All pairs ``(a, b)`` with ``a < b < n_predicates``, in lexicographic order (chapter 01)."""
    return [(a, b) for a in range(n_predicates) for b in range(a + 1, n_predicates)]


def conjunction_features(P: np.ndarray, pairs=None, dtype=np.float64) -> np.ndarray:
    """Predicates plus their pairwise conjunctions (chapter 01): for indicators ``P[..., M]``
    (bool or 0/1), ``[..., M + len(pairs)]`` with the ``M`` predicates first, then
    ``P[..., a] AND P[..., b]`` for each pair (default :func:`conjunction_pairs` ``(M)``), as
    ``dtype``."""
    P = np.asarray(P).astype(bool)
    pairs = conjunction_pairs(P.shape[-1]) if pairs is None else list(pairs)
    if not pairs:
        return P.astype(dtype)
    a, b = np.array(pairs, dtype=int).T
    if min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= P.shape[-1]:
        raise ValueError(f"pair indices must lie in [0, {P.shape[-1] - 1}]")
    return np.concatenate([P, P[..., a] & P[..., b]], axis=-1).astype(dtype)


def informative_columns(F: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Indices of the columns of ``F[n, J, D]`` an MNL can use (chapter 01): those that vary
    within at least one offer set (a column constant within every offer set cancels in the logit,
    e.g. an always-false conjunction such as ``price <= 60 AND price >= 80``), and of exact
    duplicates over the offered items only the first (``price <= 60 AND price <= 80`` is
    ``price <= 60``). Uses no choices, only the offered items."""
    mask = np.asarray(mask, bool)
    if F.dtype == bool:
        varies = (F & mask[..., None]).any(1) & (~F & mask[..., None]).any(1)
    else:
        big = np.finfo(np.float64).max
        varies = np.where(mask[..., None], F, -big).max(1) > np.where(mask[..., None], F, big).min(1)
    varies = np.flatnonzero(varies.any(0))
    rows = F[mask][:, varies]
    _, first = np.unique(np.ascontiguousarray(rows.T), axis=0, return_index=True)
    return varies[np.sort(first)]


def _flat_mnl(Zu, pid, starts, ch_rows, l2, beta0, max_iter=1000, tol=1e-10):
    """argmin_beta -mean_i log P_i(beta) + l2/2 |beta|^2 on offered-item rows ``Zu[pid]``
    (``Zu[K, D]``: the distinct feature rows; ``pid[N]``: each offered item's row; offer set ``i``
    is items ``starts[i]:starts[i+1]``, its chosen item ``ch_rows[i]``), by L-BFGS."""
    n, K = len(starts), Zu.shape[0]
    seg = np.repeat(np.arange(n), np.diff(np.append(starts, len(pid))))
    zch = Zu.T @ np.bincount(pid[ch_rows], minlength=K)

    def f(beta):
        U = (Zu @ beta)[pid]
        m = np.maximum.reduceat(U, starts)
        e = np.exp(U - m[seg])
        den = np.add.reduceat(e, starts)
        val = -(U[ch_rows] - m - np.log(den)).mean() + 0.5 * l2 * beta @ beta
        grad = -(zch - Zu.T @ np.bincount(pid, e / den[seg], minlength=K)) / n + l2 * beta
        return val, grad

    # the products are small (K x D): one BLAS thread is much faster than several on a busy machine
    from threadpoolctl import threadpool_limits  # a dependency of scikit-learn

    with threadpool_limits(1, user_api="blas"):
        res = minimize(f, beta0, jac=True, method="L-BFGS-B",
                       options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-7})
    return res.x, res


class PredicateMNL(ChoiceModel):
    """MNL on the features Logic-Logit sees (chapter 01, ``01-consider-then-choose``): utility
    ``u(x) = beta^T phi(x)`` with ``phi`` the predicate indicators of ``library`` (the library
    Logic-Logit's rule search draws from) and, with ``conjunctions=True``, all their pairwise
    conjunctions (rules of length 2, the interactions a linear MNL lacks).

    Columns no MNL can use are dropped on the training data (:func:`informative_columns`). The L2
    penalty (``l2 / 2 * |beta|^2`` on the mean NLL) is chosen from ``l2_grid`` by the NLL on a
    validation split of ``val_fraction`` of the training choices (of the respondents when
    ``data.meta["groups"]`` names them); the model is then refit on all training choices with
    that penalty. The penalties are tried from the largest down, each fit warm-started from the
    previous one; by default every penalty is tried (validation curves need not be unimodal: on the
    Yogurt panel the first three rise, then fall); with ``patience`` set, the path stops once the
    validation NLL has failed to improve that many times in a row. ``val_table_`` holds the
    validation NLL of each penalty tried, ``l2_`` the chosen one, ``val_scores_`` the validation
    NLL and accuracy of the chosen penalty's fit on the fit part (``{"nll", "accuracy"}``, as
    :class:`Tuned` reports them; None when ``l2_grid`` holds a single penalty and nothing is
    chosen). The split is :func:`validation_split` (``val_fraction``, ``seed``), the one every
    :class:`Tuned` model with the same seed uses.

    ``library``: a :class:`PredicateLibrary` (default: ``PredicateLibrary.from_data`` on the
    training data with ``n_bins``, as :class:`LogicLogit` builds it).
    """

    def __init__(self, library=None, conjunctions: bool = False, n_bins: int = 4,
                 l2_grid=L2_GRID, val_fraction: float = 0.2, patience: int | None = None,
                 max_iter: int = 1000, seed: int = 0):
        l2_grid = tuple(float(v) for v in np.atleast_1d(l2_grid))
        if not l2_grid or min(l2_grid) < 0:
            raise ValueError(f"l2_grid must be a non-empty list of penalties >= 0, got {l2_grid}")
        if not 0 < val_fraction < 1 and not (val_fraction == 0 and len(l2_grid) == 1):
            raise ValueError(f"val_fraction must be in (0, 1) (0 only with a single l2), got {val_fraction}")
        if patience is not None and patience < 1:
            raise ValueError(f"patience must be a positive integer or None, got {patience!r}")
        self.library, self.conjunctions, self.n_bins = library, bool(conjunctions), n_bins
        self.patience = patience
        self.l2_grid, self.val_fraction, self.max_iter, self.seed = l2_grid, val_fraction, max_iter, seed

    def _rows(self, data: ChoiceData) -> np.ndarray:
        """The kept feature columns on the offered items of ``data``, flat ``[N, D]`` bool."""
        P = self.library_.evaluate(data)[data.mask]
        a, b = np.array(self.pairs_, dtype=int).reshape(-1, 2).T
        return np.concatenate([P[:, self.singles_], P[:, a] & P[:, b]], axis=1)

    def features(self, data: ChoiceData) -> np.ndarray:
        """``[n_obs, max_items, D]``: the model's (kept) feature columns on ``data`` (0 on padding)."""
        self._check_fitted()
        F = np.zeros(data.mask.shape + (len(self.feature_names_),))
        F[data.mask] = self._rows(data)
        return F

    def _flat(self, data: ChoiceData):
        """``(Zu, pid, starts, ch_rows)`` for :func:`_flat_mnl`: items with the same feature row
        share it (on a grid of feature values most do), so each pass costs ``K << N`` rows."""
        rows = self._rows(data)
        packed = np.packbits(rows, axis=1)
        _, first, pid = np.unique(packed, axis=0, return_index=True, return_inverse=True)
        counts = data.mask.sum(1)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        before = np.cumsum(data.mask, 1)[np.arange(data.n_obs), data.choice] - 1
        Zu = np.ascontiguousarray(rows[first], dtype=np.float64)
        return Zu, pid.ravel(), starts, starts + before

    def fit(self, data: ChoiceData) -> "PredicateMNL":
        from .predicates import PredicateLibrary

        data = self._check_data(data)
        t0 = time.perf_counter()
        lib = self.library if self.library is not None else PredicateLibrary.from_data(data, self.n_bins)
        self.library_ = lib
        M = len(lib)
        pairs = conjunction_pairs(M) if self.conjunctions else []
        keep = informative_columns(conjunction_features(lib.evaluate(data), pairs, dtype=bool), data.mask)
        self.singles_ = [int(k) for k in keep if k < M]
        self.pairs_ = [pairs[k - M] for k in keep if k >= M]
        self.feature_names_ = ([str(lib.predicates[k]) for k in self.singles_]
                               + [lib.rule_str(p) for p in self.pairs_])
        d = len(self.feature_names_)
        self.val_table_ = {}
        beta0 = np.zeros(d)
        self.val_scores_ = None
        if len(self.l2_grid) == 1:        # nothing to choose: no validation split (val_scores_ None)
            self.l2_ = self.l2_grid[0]
        else:
            fit_part, val_part = validation_split(data, self.val_fraction, self.seed)
            fit_rows, val_rows = self._flat(data.subset(fit_part)), self._flat(data.subset(val_part))
            beta, betas, best, worse = beta0, {}, np.inf, 0
            for l2 in sorted(self.l2_grid, reverse=True):      # warm starts along the path
                beta, _ = _flat_mnl(*fit_rows, l2, beta, self.max_iter)
                betas[l2] = beta
                v = self.val_table_[l2] = _flat_nll(*val_rows, beta)
                worse = 0 if v < best else worse + 1
                best = min(best, v)
                if self.patience is not None and worse >= self.patience:
                    break
            self.l2_ = min(self.val_table_, key=lambda k: (self.val_table_[k], -k))
            beta0 = betas[self.l2_]
            # the chosen penalty's fit on the fit part, scored on the validation part (the numbers
            # a choice among model families is made on: Tuned.val_scores_ has the same form)
            self.val_scores_ = {"nll": self.val_table_[self.l2_],
                                "accuracy": _flat_accuracy(*val_rows, beta0)}
        self.beta_, res = _flat_mnl(*self._flat(data), self.l2_, beta0, self.max_iter)
        self.coef_ = self.beta_
        self.n_iter_, self.fit_seconds_ = res.nit, time.perf_counter() - t0
        self.fitted_ = True
        return self

    def coef_table(self):
        """The fitted coefficients by feature (readable predicate / conjunction), largest first."""
        import pandas as pd

        self._check_fitted()
        return (pd.DataFrame({"feature": self.feature_names_, "coef": self.beta_})
                .sort_values("coef", key=np.abs, ascending=False).reset_index(drop=True))

    def predict_proba(self, data: ChoiceData) -> np.ndarray:
        self._check_fitted()
        data = self._check_data(data)
        U = np.zeros(data.mask.shape)
        U[data.mask] = self._rows(data).astype(np.float64) @ self.beta_
        return softmax(U, data.mask)


def _flat_nll(Zu, pid, starts, ch_rows, beta) -> float:
    U = (Zu @ beta)[pid]
    seg = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(pid))))
    m = np.maximum.reduceat(U, starts)
    den = np.add.reduceat(np.exp(U - m[seg]), starts)
    return float(-(U[ch_rows] - m - np.log(den)).mean())


def _flat_accuracy(Zu, pid, starts, ch_rows, beta) -> float:
    """Top-1 accuracy on flat rows, ties broken as :meth:`ChoiceModel.predict` breaks them (the
    first offered item of highest utility)."""
    U = (Zu @ beta)[pid]
    seg = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(pid))))
    m = np.maximum.reduceat(U, starts)
    pos = np.where(U == m[seg], np.arange(len(U)), len(U))
    first = np.minimum.reduceat(pos, starts)
    return float(np.mean(first == ch_rows))


def validation_split(data: ChoiceData, val_fraction: float = 0.2, seed: int = 0):
    """Indices ``(fit, val)`` of the fit and validation parts of a training set (chapter 01): a
    share ``val_fraction`` of the choices, or of the respondents when ``data.meta["groups"]`` names
    them (whole respondents on one side). Every tuned model of the chapter (:class:`Tuned`,
    :class:`PredicateMNL`) with the same ``seed`` and ``val_fraction`` uses the same split."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    groups = data.meta.get("groups")
    groups = groups if groups is not None and np.shape(groups) == (data.n_obs,) else None
    return _split_index(data, val_fraction, seed, groups)


def _split_index(data: ChoiceData, val_fraction: float, seed: int, groups=None):
    """Indices of the fit and validation parts of ``data`` (whole groups on one side)."""
    rng = np.random.default_rng(seed)
    if groups is None:
        perm = rng.permutation(data.n_obs)
        is_val = np.zeros(data.n_obs, bool)
        is_val[perm[: int(round(val_fraction * data.n_obs))]] = True
    else:
        uniq = rng.permutation(np.unique(groups))
        is_val = np.isin(groups, uniq[: int(round(val_fraction * len(uniq)))])
    if is_val.all() or not is_val.any():
        raise ValueError(f"validation split of {data.n_obs} choices left one side empty")
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)


def predicate_data(library, data: ChoiceData) -> ChoiceData:
    """``data`` with its item features replaced by the 0/1 indicators of ``library``'s predicates
    (chapter 01, ``02-inside-the-solver``): the inputs Logic-Logit's rule search sees, for any
    model that takes a :class:`ChoiceData`."""
    return ChoiceData(predicate_features(library, data), data.mask, data.choice,
                      tuple(str(p) for p in library.predicates), data.item_names, dict(data.meta))


class OnPredicates(ChoiceModel):
    """A chapter-01 model fit on the predicate indicators of ``library`` instead of the raw item
    features (``02-inside-the-solver``): e.g. ``OnPredicates(LatentClassMNL(3, "fw"), library)``
    is latent-class MNL by Frank-Wolfe on exactly the inputs Logic-Logit sees."""

    def __init__(self, model: ChoiceModel, library):
        if not isinstance(model, ChoiceModel):
            raise TypeError(f"model must be a chapter-01 ChoiceModel, got {type(model).__name__}")
        if library is None or not hasattr(library, "evaluate"):
            raise TypeError("library must be a PredicateLibrary")
        self.model, self.library = model, library

    def fit(self, data: ChoiceData) -> "OnPredicates":
        data = self._check_data(data)
        self.model.fit(predicate_data(self.library, data))
        self.fit_seconds_ = getattr(self.model, "fit_seconds_", float("nan"))
        for k in ("alphas_", "history_"):
            if hasattr(self.model, k):
                setattr(self, k, getattr(self.model, k))
        self.fitted_ = True
        return self

    def predict_proba(self, data: ChoiceData) -> np.ndarray:
        self._check_fitted()
        return self.model.predict_proba(predicate_data(self.library, self._check_data(data)))


def mnl_baselines(library=None, n_bins: int = 4, seed: int = 0) -> dict:
    """The chapter's three MNL baselines, unfitted, by table name (chapter 01): the raw-feature
    MNL (linear in the item features), the MNL on Logic-Logit's predicates, and the MNL on the
    predicates plus their pairwise conjunctions (both with L2 chosen on a validation split)."""
    return {"MNL (raw features)": MNL(),
            "MNL (predicates)": PredicateMNL(library, conjunctions=False, n_bins=n_bins, seed=seed),
            "MNL (predicates + pairs)": PredicateMNL(library, conjunctions=True, n_bins=n_bins, seed=seed)}


# ----------------------------------------------------------------------------------------------
# hyperparameters chosen on a validation split; the chance level of the data's marginals


class Tuned(ChoiceModel):
    """A chapter-01 model whose hyperparameter is chosen on a validation split (chapter 01,
    ``03-real-choices``): ``make(h)`` builds the model for each ``h`` of ``grid``; each is fit on
    the fit part of :func:`validation_split` (``val_fraction``, ``seed``) and scored on the
    validation part; the ``h`` with the lowest validation NLL (the first on a tie) is refit on all
    the training choices. The test data are never seen. Every model of a comparison gets the same
    number of tries (``len(grid)``) and, with the same ``seed``, the same validation split.

    ``name`` labels the hyperparameter in tables (``"R"``, ``"l2"``). ``best_`` is the chosen
    ``h``, ``val_table_`` the validation NLL and accuracy of every try (``{h: {"nll",
    "accuracy"}}``), ``val_scores_`` those of the chosen one, ``model_`` the refit model.
    Attributes the wrapper lacks (``types_``, ``alphas_``, ``history_``, ...) are read from
    ``model_``.

    >>> tuned = Tuned(lambda l2: MNL(l2=l2), (1e-1, 1e-3))   # doctest: +SKIP
    """

    def __init__(self, make, grid, val_fraction: float = 0.2, seed: int = 0, name: str = "h"):
        if not callable(make):
            raise TypeError("make must be a callable h -> unfitted ChoiceModel")
        grid = tuple(grid)
        if not grid:
            raise ValueError("grid must hold at least one hyperparameter value")
        if not 0 < val_fraction < 1:
            raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
        self.make, self.grid, self.val_fraction, self.seed, self.name = make, grid, val_fraction, seed, name

    def __getattr__(self, name):
        if name.startswith("__") or name == "model_":
            raise AttributeError(name)
        model = self.__dict__.get("model_")
        if model is None:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (not fitted?)")
        return getattr(model, name)

    def fit(self, data: ChoiceData) -> "Tuned":
        data = self._check_data(data)
        t0 = time.perf_counter()
        fit_idx, val_idx = validation_split(data, self.val_fraction, self.seed)
        fit_part, val_part = data.subset(fit_idx), data.subset(val_idx)
        table = {}
        for h in self.grid:
            m = self.make(h)
            if not isinstance(m, ChoiceModel):
                raise TypeError(f"make({h!r}) must return a chapter-01 ChoiceModel, got {type(m).__name__}")
            m.fit(fit_part)
            table[h] = {"nll": m.nll(val_part), "accuracy": m.accuracy(val_part)}
        self.best_ = min(self.grid, key=lambda h: table[h]["nll"])
        self.val_table_, self.val_scores_ = table, dict(table[self.best_])
        self.model_ = self.make(self.best_).fit(data)
        self.fit_seconds_ = time.perf_counter() - t0
        self.fitted_ = True
        return self

    def predict_proba(self, data: ChoiceData) -> np.ndarray:
        self._check_fitted()
        return self.model_.predict_proba(self._check_data(data))

    def __str__(self) -> str:
        return str(self.model_) if "model_" in self.__dict__ else repr(self)


class MarketShare(ChoiceModel):
    """The chance level from the data's marginals (chapter 01, ``03-real-choices``): each
    alternative's share of the training choices, renormalised over the offer set,
    ``P(j | S) = s_j / sum_{k in S} s_k`` with ``s_j = (c_j + 1) / (n + J)`` (``c_j``: times slot
    ``j`` was chosen; one pseudo-choice per alternative, so an alternative never chosen in training
    keeps a positive share). Where the slots carry no labels (``data.item_names`` is None: the
    items of one offer set are not the same alternatives from one choice to the next) the shares
    are equal, which is the uniform model; ``use_labels=False`` makes it the uniform model on any
    data."""

    def __init__(self, use_labels: bool = True):
        self.use_labels = bool(use_labels)

    def fit(self, data: ChoiceData) -> "MarketShare":
        data = self._check_data(data)
        t0 = time.perf_counter()
        J = data.max_items
        self.labelled_ = data.item_names is not None
        use = self.labelled_ and self.use_labels
        counts = np.bincount(data.choice, minlength=J).astype(float) if use else np.zeros(J)
        self.shares_ = (counts + 1.0) / (counts.sum() + J)
        self.item_names_ = data.item_names
        self.fit_seconds_ = time.perf_counter() - t0
        self.fitted_ = True
        return self

    def predict_proba(self, data: ChoiceData) -> np.ndarray:
        self._check_fitted()
        data = self._check_data(data)
        if data.max_items != len(self.shares_):
            raise ValueError(f"fitted on {len(self.shares_)} slots, got data with {data.max_items}")
        w = np.where(data.mask, self.shares_[None, :], 0.0)
        return w / w.sum(1, keepdims=True)
