"""Baselines in the same API: MNL, latent-class MNL (EM and Frank-Wolfe) and a small neural
utility model (stand-in for the paper's neural choice models). Introduced in
``01-logic-logit/01-consider-then-choose`` (MNL) and ``02-inside-the-solver`` (latent classes).
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import minimize

from .base import ChoiceModel, fit_mixture_weights, log_softmax, softmax
from .data import ChoiceData

__all__ = ["MNL", "LatentClassMNL", "NeuralUtility", "LC_METHODS"]

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
