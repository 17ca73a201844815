"""Predicting benchmark scores from phylogenetic distances, leave one family out (chapter 12).

The paper (Sec. 5, Fig. 5): a model's features are its Nei distances to the *training* models
(its row of D restricted to their columns); FastICA (15 components) is fitted on the training
rows; a linear layer followed by a sigmoid maps the components to the scores, trained with Adam
(lr 1e-3, weight decay 0.01, 1000 full-batch epochs, MSE). Evaluation leaves one family out at a
time, so a model is never predicted from its own relatives.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["PhyloRegressor", "leave_one_family_out", "LOFOResult"]


class PhyloRegressor:
    """FastICA on distance rows, then ``sigmoid(W s + b)``, trained with Adam on MSE.

    Introduced in chapter 12. ``fit(D_train, y)``: ``D_train`` is the (n, n) distance matrix of
    the training models, ``y`` their scores in [0, 1], shape (n,) or (n, k).
    ``predict(D_rows)``: rows of distances from new models to the same training models; their
    standardised components are clipped to ``+-clip`` training standard deviations.
    """

    def __init__(self, n_ica: int = 15, epochs: int = 1000, lr: float = 1e-3,
                 weight_decay: float = 0.01, seed: int = 0, clip: float = 3.0):
        if n_ica < 1 or epochs < 1:
            raise ValueError(f"n_ica and epochs must be positive, got {n_ica}, {epochs}")
        self.n_ica, self.epochs, self.lr, self.wd, self.seed = n_ica, epochs, lr, weight_decay, seed
        self.clip = float(clip)

    def fit(self, D_train: np.ndarray, y: np.ndarray) -> "PhyloRegressor":
        from sklearn.decomposition import FastICA
        from sklearn.exceptions import ConvergenceWarning

        D_train = np.asarray(D_train, float)
        y = np.asarray(y, float)
        y = y[:, None] if y.ndim == 1 else y
        if D_train.shape[0] != D_train.shape[1] or D_train.shape[0] != y.shape[0]:
            raise ValueError(f"need an (n, n) distance matrix and n scores; got {D_train.shape}"
                             f" and {y.shape}")
        n_comp = max(1, min(self.n_ica, D_train.shape[0] - 1))
        self.ica_ = FastICA(n_components=n_comp, random_state=42, max_iter=1000, tol=1e-3)
        with warnings.catch_warnings():     # tiny training sets: FastICA may stop at max_iter
            warnings.simplefilter("ignore", category=ConvergenceWarning)
            Z = self.ica_.fit_transform(D_train)
        self.mu_, self.sd_ = Z.mean(0), Z.std(0) + 1e-8
        X = torch.tensor((Z - self.mu_) / self.sd_, dtype=torch.float32)
        Y = torch.tensor(y, dtype=torch.float32)
        g = torch.Generator().manual_seed(self.seed)
        self.lin_ = torch.nn.Linear(X.shape[1], Y.shape[1])
        with torch.no_grad():
            self.lin_.weight.copy_(torch.randn(self.lin_.weight.shape, generator=g) * 0.01)
            p = Y.mean(0).clamp(1e-3, 1 - 1e-3)
            self.lin_.bias.copy_(torch.log(p / (1 - p)))      # start at the training mean
        opt = torch.optim.Adam(self.lin_.parameters(), lr=self.lr, weight_decay=self.wd)
        for _ in range(self.epochs):
            opt.zero_grad()
            loss = ((torch.sigmoid(self.lin_(X)) - Y) ** 2).mean()
            loss.backward()
            opt.step()
        return self

    def predict(self, D_rows: np.ndarray) -> np.ndarray:
        Z = self.ica_.transform(np.atleast_2d(np.asarray(D_rows, float)))
        # a held-out family lies outside the training rows: clip its components to +-clip
        # training standard deviations so that the sigmoid does not saturate on extrapolation
        X = np.clip((Z - self.mu_) / self.sd_, -self.clip, self.clip)
        X = torch.tensor(X, dtype=torch.float32)
        with torch.no_grad():
            return torch.sigmoid(self.lin_(X)).numpy()


@dataclass
class LOFOResult:
    """Held-out predictions of every model (its family left out), with the mean baseline."""

    y: np.ndarray           # (M, k) true scores
    pred: np.ndarray        # (M, k) PhyloLM predictions
    mean: np.ndarray        # (M, k) the training mean of each fold
    families: list

    def mse(self) -> tuple[float, float]:
        """(PhyloLM, mean baseline) mean squared error over all models and tasks."""
        return float(((self.pred - self.y) ** 2).mean()), float(((self.mean - self.y) ** 2).mean())

    def pearson(self) -> list[float]:
        """Pearson r between prediction and truth per task (NaN when either is constant)."""
        out = []
        for k in range(self.y.shape[1]):
            a, b = self.pred[:, k], self.y[:, k]
            out.append(float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else float("nan"))
        return out


def leave_one_family_out(D: np.ndarray, y: np.ndarray, families, *, n_ica: int = 15,
                         epochs: int = 1000, seed: int = 0) -> LOFOResult:
    """Predict every family's scores from a :class:`PhyloRegressor` fitted on the other
    families (and the training-mean baseline of the same fold). Introduced in chapter 12."""
    D, y = np.asarray(D, float), np.asarray(y, float)
    y = y[:, None] if y.ndim == 1 else y
    fam = np.asarray(families)
    if len(set(families)) < 2:
        raise ValueError("leave-one-family-out needs at least two families")
    pred, mean = np.zeros_like(y), np.zeros_like(y)
    for f in dict.fromkeys(families):
        test, train = np.flatnonzero(fam == f), np.flatnonzero(fam != f)
        reg = PhyloRegressor(n_ica=n_ica, epochs=epochs, seed=seed).fit(D[np.ix_(train, train)],
                                                                         y[train])
        pred[test] = reg.predict(D[np.ix_(test, train)])
        mean[test] = y[train].mean(0)
    return LOFOResult(y, pred, mean, list(families))
