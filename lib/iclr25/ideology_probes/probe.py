"""Per-head ridge probes for all layers x heads in one batched closed-form solve.

For head ``g = (l, h)`` with activations ``X_g`` (``n x d``) and labels ``y`` the paper fits
``Ridge(alpha, fit_intercept=False)``:

    w_g = (X_g^T X_g + alpha I)^{-1} X_g^T y                                    (ridge normal eq.)

and scores it by the Spearman correlation of held-out predictions, averaged over a 2-fold
``KFold(shuffle=True, random_state=42)``. All ``G = L * H`` systems share ``y`` and the fold
split, so we stack the Gram matrices into ``(G, d, d)`` and call ``torch.linalg.solve`` once per
fold (:func:`ridge_fit`, ``method="batched"``); ``method="loop"`` solves head by head with numpy
(the reference the tests and the benchmark compare with scikit-learn's ``Ridge``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import rankdata

__all__ = ["RIDGE_METHODS", "ridge_fit", "ridge_predict", "fold_indices", "spearman",
           "spearman_columns", "HeadCV", "cv_head_scores", "HeadProbe", "ensemble_cv",
           "permutation_control", "lexical_cv", "LEXICAL_KINDS"]

RIDGE_METHODS = ("batched", "loop")


def _check_xy(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 3:
        raise ValueError(f"X must be (n, n_heads, head_dim), got shape {X.shape}")
    if y.ndim != 1 or len(y) != X.shape[0]:
        raise ValueError(f"y must be a vector of length n = {X.shape[0]}, got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("y has NaN or infinite values")
    return X, y


def ridge_fit(X: np.ndarray, y: np.ndarray, alpha: float = 1.0, *, fit_intercept: bool = False,
              method: str = "batched") -> tuple[np.ndarray, np.ndarray]:
    """Fit one ridge regression per head: ``X`` is ``(n, G, d)`` (``G`` heads), ``y`` ``(n,)``.

    Defined in chapter 10 (ideology probes). Returns ``coef`` ``(G, d)`` and ``intercept``
    ``(G,)`` (zeros unless ``fit_intercept``, which centres ``X`` and ``y`` first, as
    scikit-learn does). Solved in float64. ``method``: ``"batched"`` (one
    ``torch.linalg.solve`` on the stacked ``(G, d, d)`` systems) or ``"loop"`` (numpy, head by
    head; the reference).
    """
    X, y = _check_xy(X, y)
    if method not in RIDGE_METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(RIDGE_METHODS)}")
    if not (np.isscalar(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a number >= 0, got {alpha!r}")
    n, G, d = X.shape
    if method == "loop":
        coef = np.zeros((G, d))
        icpt = np.zeros(G)
        for g in range(G):
            Xg = X[:, g, :].astype(np.float64)
            xm = Xg.mean(0) if fit_intercept else np.zeros(d)
            ym = y.mean() if fit_intercept else 0.0
            Xc = Xg - xm
            coef[g] = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(d), Xc.T @ (y - ym))
            icpt[g] = ym - xm @ coef[g]
        return coef, icpt
    Xt = torch.as_tensor(X, dtype=torch.float64)
    yt = torch.as_tensor(y, dtype=torch.float64)
    if fit_intercept:
        xm = Xt.mean(0)                                    # (G, d)
        ym = yt.mean()
        Xt = Xt - xm
        yt = yt - ym
    gram = torch.einsum("ngd,nge->gde", Xt, Xt)           # X_g^T X_g for every head at once
    gram.diagonal(dim1=-2, dim2=-1).add_(alpha)
    rhs = torch.einsum("ngd,n->gd", Xt, yt)                # X_g^T y
    coef = torch.linalg.solve(gram, rhs)                   # (G, d)
    icpt = (ym - (xm * coef).sum(-1)) if fit_intercept else torch.zeros(G, dtype=torch.float64)
    return coef.numpy(), icpt.numpy()


def ridge_predict(X: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """Per-head predictions ``(n, G)`` for ``X`` ``(n, G, d)``."""
    return np.einsum("ngd,gd->ng", np.asarray(X, dtype=np.float64), coef) + intercept


def fold_indices(n: int, folds: int = 2, seed: int = 42,
                 groups: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(train, test)`` index pairs. Without ``groups``: scikit-learn's
    ``KFold(folds, shuffle=True, random_state=seed)`` (the paper's split). With ``groups``
    (e.g. the state of a state x year prompt): whole groups are shuffled and split, so a test
    fold holds only unseen groups."""
    if not isinstance(folds, (int, np.integer)) or folds < 2:
        raise ValueError(f"folds must be an integer >= 2, got {folds!r}")
    if groups is None:
        if n < folds:
            raise ValueError(f"{n} samples cannot be split into {folds} folds")
        from sklearn.model_selection import KFold

        return [(tr, te) for tr, te in KFold(folds, shuffle=True, random_state=seed).split(np.arange(n))]
    groups = np.asarray(groups)
    if len(groups) != n:
        raise ValueError(f"groups has length {len(groups)}, expected {n}")
    uniq = np.unique(groups)
    if len(uniq) < folds:
        raise ValueError(f"{len(uniq)} groups cannot be split into {folds} folds")
    perm = np.random.default_rng(seed).permutation(uniq)
    out = []
    for part in np.array_split(perm, folds):
        te = np.flatnonzero(np.isin(groups, part))
        tr = np.flatnonzero(~np.isin(groups, part))
        out.append((tr, te))
    return out


def spearman_columns(P: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman correlation of each column of ``P`` ``(n, G)`` with ``y`` (average ranks for
    ties, as ``scipy.stats.spearmanr``); a constant column gives 0."""
    P = np.asarray(P, dtype=np.float64)
    if P.ndim == 1:
        P = P[:, None]
    ry = rankdata(y)
    ry = ry - ry.mean()
    rp = rankdata(P, axis=0)
    rp = rp - rp.mean(0)
    den = np.sqrt((rp ** 2).sum(0) * (ry ** 2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (rp * ry[:, None]).sum(0) / den
    return np.where(den > 0, r, 0.0)


def spearman(a, b) -> float:
    """Spearman correlation of two vectors."""
    return float(spearman_columns(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))[0])


@dataclass
class HeadCV:
    """Result of :func:`cv_head_scores`: ``rho`` ``(L, H)`` (mean held-out Spearman over folds,
    the paper's Fig. 2 map), ``rho_folds`` ``(folds, L, H)``, ``oof`` ``(n, L, H)`` out-of-fold
    predictions, and the ``splits`` used."""

    rho: np.ndarray
    rho_folds: np.ndarray
    oof: np.ndarray
    splits: list

    def top(self, k: int) -> list[tuple[int, int]]:
        """The ``k`` heads with the highest ``rho``, best first, as ``(layer, head)``."""
        return _top(self.rho, k)


def _top(rho: np.ndarray, k: int) -> list[tuple[int, int]]:
    L, H = rho.shape
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= L * H:
        raise ValueError(f"k must be an integer in [1, {L * H}] (the number of heads), got {k!r}")
    flat = np.argsort(-np.nan_to_num(rho.ravel(), nan=-np.inf), kind="stable")[:k]
    return [(int(i // H), int(i % H)) for i in flat]


def _acts(acts: np.ndarray) -> np.ndarray:
    acts = np.asarray(acts)
    if acts.ndim != 4:
        raise ValueError(f"acts must be (n, n_layers, n_heads, head_dim), got shape {acts.shape}")
    return acts


def cv_head_scores(acts: np.ndarray, y: np.ndarray, *, alpha: float = 1.0, folds: int = 2,
                   seed: int = 42, groups: np.ndarray | None = None, fit_intercept: bool = False,
                   method: str = "batched") -> HeadCV:
    """Cross-validated Spearman map of per-head ridge probes (the paper's Fig. 2).

    Defined in chapter 10 (ideology probes). ``acts`` is ``(n, L, H, d)``; for each fold every
    head's ridge is fitted on the training rows (:func:`ridge_fit`, all heads at once) and
    scored by the Spearman correlation of its test-row predictions with ``y``.
    """
    acts = _acts(acts)
    n, L, H, d = acts.shape
    X = acts.reshape(n, L * H, d)
    _check_xy(X, y)
    y = np.asarray(y, dtype=np.float64)
    splits = fold_indices(n, folds, seed, groups)
    oof = np.zeros((n, L * H))
    rf = []
    for tr, te in splits:
        coef, icpt = ridge_fit(X[tr], y[tr], alpha, fit_intercept=fit_intercept, method=method)
        pred = ridge_predict(X[te], coef, icpt)
        oof[te] = pred
        rf.append(spearman_columns(pred, y[te]).reshape(L, H))
    rf = np.stack(rf)
    return HeadCV(rf.mean(0), rf, oof.reshape(n, L, H), splits)


class HeadProbe:
    """Ridge probes on every head, scored by cross-validation and refitted on all data.

    Defined in chapter 10 (ideology probes). ``fit(acts, y)`` sets ``cv_`` (:class:`HeadCV`),
    ``rho_`` ``(L, H)``, ``coef_`` ``(L, H, d)`` and ``intercept_`` ``(L, H)`` (fitted on all
    rows). ``predict`` gives every head's prediction ``(n, L, H)``; ``ensemble_predict`` the
    mean over the top-``k`` heads (the paper's ``y_hat_K``); ``score`` its Spearman correlation.

    Parameters follow the paper: ``alpha=1``, no intercept, 2 folds, seed 42.
    """

    def __init__(self, alpha: float = 1.0, *, fit_intercept: bool = False, folds: int = 2,
                 seed: int = 42, method: str = "batched") -> None:
        if method not in RIDGE_METHODS:
            raise ValueError(f"unknown method {method!r}; valid: {', '.join(RIDGE_METHODS)}")
        self.alpha, self.fit_intercept, self.folds, self.seed = alpha, fit_intercept, folds, seed
        self.method = method

    def fit(self, acts: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> "HeadProbe":
        acts = _acts(acts)
        n, L, H, d = acts.shape
        self.cv_ = cv_head_scores(acts, y, alpha=self.alpha, folds=self.folds, seed=self.seed,
                                  groups=groups, fit_intercept=self.fit_intercept, method=self.method)
        self.rho_ = self.cv_.rho
        coef, icpt = ridge_fit(acts.reshape(n, L * H, d), y, self.alpha,
                               fit_intercept=self.fit_intercept, method=self.method)
        self.coef_ = coef.reshape(L, H, d)
        self.intercept_ = icpt.reshape(L, H)
        self.shape_ = (L, H, d)
        return self

    def _fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise RuntimeError("this HeadProbe is not fitted yet: call fit(acts, y) first")

    def top(self, k: int) -> list[tuple[int, int]]:
        """The ``k`` heads with the highest cross-validated ``rho``, best first."""
        self._fitted()
        return _top(self.rho_, k)

    def predict(self, acts: np.ndarray) -> np.ndarray:
        """Every head's prediction ``(n, L, H)``."""
        self._fitted()
        acts = _acts(acts)
        if acts.shape[1:] != self.shape_:
            raise ValueError(f"acts have per-sample shape {acts.shape[1:]}, the probe was fitted "
                             f"on {self.shape_}")
        n, L, H, d = acts.shape
        pred = ridge_predict(acts.reshape(n, L * H, d), self.coef_.reshape(L * H, d),
                             self.intercept_.ravel())
        return pred.reshape(n, L, H)

    def ensemble_predict(self, acts: np.ndarray, k: int = 32,
                         heads: Sequence[tuple[int, int]] | None = None) -> np.ndarray:
        """Mean prediction of the top-``k`` heads (or of ``heads``), ``(n,)``."""
        heads = self.top(k) if heads is None else list(heads)
        P = self.predict(acts)
        return np.mean([P[:, l, h] for l, h in heads], axis=0)

    def score(self, acts: np.ndarray, y: np.ndarray, k: int = 32) -> float:
        """Spearman correlation of :meth:`ensemble_predict` with ``y``."""
        return spearman(self.ensemble_predict(acts, k), y)


def ensemble_cv(acts: np.ndarray, y: np.ndarray, k: int, *, alpha: float = 1.0, folds: int = 2,
                seed: int = 42, groups: np.ndarray | None = None, fit_intercept: bool = False,
                heads: Sequence[tuple[int, int]] | None = None) -> tuple[float, np.ndarray]:
    """Held-out Spearman of the top-``k`` ensemble with the heads *chosen inside each training
    fold* (an inner cross-validation on the training rows ranks the heads), so the test rows
    never choose the heads that predict them. Returns ``(mean rho over folds, out-of-fold
    ensemble predictions (n,))``. ``heads`` fixes the heads instead (e.g. random heads, the
    control for the choice; ``k`` is then ignored).

    Defined in chapter 10 (ideology probes)."""
    acts = _acts(acts)
    y = np.asarray(y, dtype=np.float64)
    n = len(y)
    oof = np.zeros(n)
    rhos = []
    for tr, te in fold_indices(n, folds, seed, groups):
        g_tr = None if groups is None else np.asarray(groups)[tr]
        probe = HeadProbe(alpha, fit_intercept=fit_intercept, folds=folds, seed=seed + 1)
        probe.fit(acts[tr], y[tr], groups=g_tr)
        oof[te] = probe.ensemble_predict(acts[te], k, heads=heads)
        rhos.append(spearman(oof[te], y[te]))
    return float(np.mean(rhos)), oof


def permutation_control(acts: np.ndarray, y: np.ndarray, *, n_perm: int = 5, seed: int = 0,
                        **kw) -> np.ndarray:
    """Random-label control (the paper's Fig. A3): the best head's cross-validated rho when
    ``y`` is randomly permuted, for ``n_perm`` permutations, ``(n_perm,)``."""
    rng = np.random.default_rng(seed)
    return np.array([np.nanmax(cv_head_scores(acts, rng.permutation(y), **kw).rho)
                     for _ in range(n_perm)])


LEXICAL_KINDS = ("tfidf", "embedding")


def lexical_cv(y: np.ndarray, *, texts: Sequence[str] | None = None,
               features: np.ndarray | None = None, folds: int = 2, seed: int = 42,
               groups: np.ndarray | None = None,
               alphas: Sequence[float] = tuple(np.logspace(-3, 4, 15))) -> tuple[float, np.ndarray]:
    """The lexical baseline: ridge on surface features of the prompt, with the *same* folds as the
    head probes and its penalty tuned inside each training fold (``RidgeCV``, efficient
    leave-one-out over ``alphas``), so it is given more tuning than the heads get.

    Pass ``texts`` for TF-IDF (word 1-2-grams, fitted on the training fold) or ``features``
    (e.g. :func:`~iclr25.ideology_probes.capture.mean_embeddings`, standardised on the training
    fold). Returns ``(mean held-out Spearman over folds, out-of-fold predictions)``.

    Defined in chapter 10 (ideology probes)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import RidgeCV
    from sklearn.preprocessing import StandardScaler

    if (texts is None) == (features is None):
        raise ValueError("pass exactly one of texts= (TF-IDF) or features= (e.g. mean embeddings)")
    y = np.asarray(y, dtype=np.float64)
    n = len(y)
    if features is not None and len(features) != n or texts is not None and len(texts) != n:
        raise ValueError(f"the features/texts must have one row per label ({n})")
    oof = np.zeros(n)
    rhos = []
    for tr, te in fold_indices(n, folds, seed, groups):
        if texts is not None:
            vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
            Xtr = vec.fit_transform([texts[i] for i in tr])
            Xte = vec.transform([texts[i] for i in te])
        else:
            sc = StandardScaler().fit(features[tr])
            Xtr, Xte = sc.transform(features[tr]), sc.transform(features[te])
        model = RidgeCV(alphas=list(alphas)).fit(Xtr, y[tr])
        oof[te] = model.predict(Xte)
        rhos.append(spearman(oof[te], y[te]))
    return float(np.mean(rhos)), oof
