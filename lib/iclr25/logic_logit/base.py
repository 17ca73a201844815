"""Shared pieces of every choice model in chapter 01: masked softmax, the estimator base class,
and the fully corrective update of mixture weights."""

from __future__ import annotations

import numpy as np

from .data import ChoiceData

__all__ = ["ChoiceModel", "softmax", "log_softmax", "fit_mixture_weights", "NotFittedError"]


class NotFittedError(RuntimeError):
    """A model was used before :meth:`fit`."""


def log_softmax(U: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``log P(j | S_i)`` for utilities ``U[n, J]`` over the offered slots (``-inf`` on padding)."""
    U = np.where(mask, U, -np.inf)
    m = U.max(axis=1, keepdims=True)
    lse = m + np.log(np.exp(U - m).sum(axis=1, keepdims=True))
    return U - lse


def softmax(U: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The multinomial logit ``P(j | S_i) = e^{U_ij} / sum_{s in S_i} e^{U_is}`` (0 on padding)."""
    return np.exp(log_softmax(U, mask))


def fit_mixture_weights(Pch: np.ndarray, alpha: np.ndarray | None = None, n_iter: int = 2000,
                        tol: float = 1e-12) -> np.ndarray:
    """Fully corrective proportion update: ``argmin_{alpha in simplex} -mean_i log sum_k alpha_k
    Pch[i, k]`` by the EM fixed point ``alpha_k <- alpha_k mean_i Pch_ik / p_i`` (monotone, convex
    problem). ``Pch[n, K]``: each component's probability of the chosen item."""
    n, K = Pch.shape
    a = np.full(K, 1.0 / K) if alpha is None else np.asarray(alpha, float).copy()
    if a.shape != (K,) or np.any(a < 0) or not np.isclose(a.sum(), 1.0):
        raise ValueError(f"alpha must be a probability vector of length {K}")
    prev = np.inf
    for _ in range(n_iter):
        p = Pch @ a
        nll = -np.mean(np.log(p))
        a = a * (Pch / p[:, None]).mean(0)
        a /= a.sum()
        if prev - nll < tol:
            break
        prev = nll
    return a


class ChoiceModel:
    """Base class: ``predict_proba`` is the model; ``nll``/``score``/``accuracy``/``predict`` follow.

    ``score`` is the mean log-likelihood per choice (higher is better, as scikit-learn expects).
    """

    def _check_data(self, data) -> ChoiceData:
        if not isinstance(data, ChoiceData):
            raise TypeError(f"{type(self).__name__} expects a ChoiceData (X[n, J, d], mask, choice), "
                            f"got {type(data).__name__}")
        return data

    def _check_fitted(self) -> None:
        if not getattr(self, "fitted_", False):
            raise NotFittedError(f"{type(self).__name__} is not fitted yet; call fit(data) first")

    def predict_proba(self, data: ChoiceData) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def predict(self, data: ChoiceData) -> np.ndarray:
        """The most probable slot of each offer set."""
        P = self.predict_proba(data)
        return np.argmax(np.where(data.mask, P, -1.0), axis=1)

    def chosen_proba(self, data: ChoiceData) -> np.ndarray:
        P = self.predict_proba(data)
        return P[np.arange(data.n_obs), data.choice]

    def nll(self, data: ChoiceData) -> float:
        """Mean negative log-likelihood per choice."""
        return float(-np.mean(np.log(np.maximum(self.chosen_proba(data), 1e-300))))

    def score(self, data: ChoiceData) -> float:
        """Mean log-likelihood per choice (``-nll``)."""
        return -self.nll(data)

    def accuracy(self, data: ChoiceData) -> float:
        """Top-1 accuracy: the share of choices that are the model's most probable item."""
        return float(np.mean(self.predict(data) == data.choice))
