"""The chapter's registered statistics, one replicate per gene split, and their controls
(chapter 12; registry ``book/claims/12-phylolm.yaml``).

The zoo is built once, so training seeds cannot be replicated; the unit of replication is a
*gene split*: the G genes are cut into disjoint parts (:func:`gene_splits`) and each statistic
is recomputed from each part's alleles, which are independent draws. Each function returns
measurements only (replicates of a statistic and of its control); the registry judges them.

Imported on its own (``from iclr25.phylolm import replicates``): the package ``__init__`` does
not import it, so that the zoo's cache key (:func:`iclr25.phylolm.study.zoo_folder`, keyed by
the code that builds the zoo) does not change when a statistic does.
"""

from __future__ import annotations

from itertools import combinations
from typing import Mapping, Sequence

import numpy as np

from . import nei, predict, study, trees

__all__ = ["gene_splits", "split_similarities", "block_contrast", "permuted_block_contrast",
           "stability", "permuted_stability", "pairwise_stability", "oracle_errors",
           "nj_nrf", "random_tree_nrf", "edit_gap", "tasks_above_chance",
           "nearest_neighbour_predictions", "leave_groups_out", "prediction_replicate"]


def gene_splits(n_genes: int, k: int = 3, seed: int = 0) -> list[np.ndarray]:
    """``k`` disjoint parts of ``range(n_genes)`` (sorted indices), cut from one permutation
    seeded with ``seed``; sizes differ by at most one (``numpy.array_split``)."""
    if not isinstance(n_genes, (int, np.integer)) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"n_genes and k must be integers, got {n_genes!r}, {k!r}")
    if k < 1 or n_genes < k:
        raise ValueError(f"need 1 <= k <= n_genes to cut {n_genes} genes into {k} parts")
    perm = np.random.default_rng(seed).permutation(int(n_genes))
    return [np.sort(p) for p in np.array_split(perm, int(k))]


def split_similarities(table: nei.AlleleTable, parts: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Nei's similarity matrix of ``table`` restricted to each part's genes."""
    return [nei.nei_similarity(table.genes(p)) for p in parts]


def block_contrast(S: np.ndarray, families: Sequence[str]) -> float:
    """The smallest, over families of at least two models, of (mean within-family similarity,
    off-diagonal) minus (mean similarity between the family's models and all other models):
    positive when every family is a block (:func:`iclr25.phylolm.study.family_contrast`)."""
    S = np.asarray(S, float)
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] != len(families):
        raise ValueError(f"need an (M, M) matrix and M family labels; got {S.shape} and "
                         f"{len(families)} labels")
    c = study.family_contrast(S, list(families))
    if not c or len(set(families)) < 2:
        raise ValueError("block_contrast needs a family of at least two models and another family")
    return float(min(w - b for w, b in c.values()))


def permuted_block_contrast(S: np.ndarray, families: Sequence[str], n_perm: int = 200,
                            seed: int = 0) -> float:
    """The control of :func:`block_contrast`: its mean over ``n_perm`` random permutations of
    the family labels (family sizes kept): the contrast without family structure."""
    rng = np.random.default_rng(seed)
    fam = np.asarray(families)
    return float(np.mean([block_contrast(S, list(fam[rng.permutation(len(fam))]))
                          for _ in range(n_perm)]))


def _upper(S: np.ndarray) -> np.ndarray:
    S = np.asarray(S, float)
    return S[np.triu_indices(S.shape[0], 1)]


def stability(S_a: np.ndarray, S_b: np.ndarray) -> float:
    """Pearson correlation between the off-diagonal entries (upper triangle) of two similarity
    matrices of the same models; 0 when either is constant (it says nothing about which models
    are alike)."""
    a, b = _upper(S_a), _upper(S_b)
    if np.shape(S_a) != np.shape(S_b) or a.size < 2:
        raise ValueError(f"need two (M, M) matrices of the same M >= 3, got {np.shape(S_a)} "
                         f"and {np.shape(S_b)}")
    if a.std() == 0 or b.std() == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def permuted_stability(S_a: np.ndarray, S_b: np.ndarray, n_perm: int = 200, seed: int = 0) -> float:
    """The control of :func:`stability`: its mean over ``n_perm`` random permutations of the
    model order of ``S_b`` (rows and columns together): two gene sets that saw unrelated models."""
    rng = np.random.default_rng(seed)
    S_b = np.asarray(S_b, float)
    out = []
    for _ in range(n_perm):
        p = rng.permutation(S_b.shape[0])
        out.append(stability(S_a, S_b[np.ix_(p, p)]))
    return float(np.mean(out))


def pairwise_stability(Ss: Sequence[np.ndarray], n_perm: int = 200,
                       seed: int = 0) -> tuple[list[float], list[float]]:
    """For every pair of the split matrices ``Ss`` (in :func:`itertools.combinations` order):
    ``(correlations, permuted controls)``, paired by pair."""
    ours, ctrl = [], []
    for k, (a, b) in enumerate(combinations(range(len(Ss)), 2)):
        ours.append(stability(Ss[a], Ss[b]))
        ctrl.append(permuted_stability(Ss[a], Ss[b], n_perm, seed=[seed, k]))
    return ours, ctrl


def oracle_errors(pool: Mapping[str, Sequence[Sequence[str]]], G: int, N: int, n_stacks: int,
                  eps: float = 1e-10) -> list[float]:
    """Per disjoint stack of ``G`` genes of the pool's first half (its first ``N`` draws), the
    mean absolute error over off-diagonal entries of Nei's distance against the oracle (the
    second half of the genes, every draw): the per-stack errors whose mean
    :func:`iclr25.phylolm.study.gn_study` reports."""
    names = list(pool)
    half = len(pool[names[0]]) // 2
    if G < 1 or N < 1 or n_stacks < 1:
        raise ValueError(f"G, N and n_stacks must be positive, got {G}, {N}, {n_stacks}")
    if n_stacks * G > half:
        raise ValueError(f"{n_stacks} disjoint stacks of G={G} genes need {n_stacks * G} genes; "
                         f"the pool's first half has {half}")
    ref = nei.nei_distance(nei.nei_similarity(nei.AlleleTable.from_alleles(
        {n: pool[n][half:2 * half] for n in names})), eps)
    off = ~np.eye(len(names), dtype=bool)
    out = []
    for s in range(n_stacks):
        tab = nei.AlleleTable.from_alleles(
            {n: [row[:N] for row in pool[n][s * G:(s + 1) * G]] for n in names})
        out.append(float(np.abs(nei.nei_distance(nei.nei_similarity(tab), eps) - ref)[off].mean()))
    return out


# ---------------------------------------------------------------- trees (notebook 02)

def nj_nrf(D: np.ndarray, names: Sequence[str], truth: trees.Tree, mode: str = "compatible") -> float:
    """Normalised Robinson-Foulds distance between the neighbour-joining tree of ``D`` and the
    true genealogy ``truth``."""
    return float(trees.robinson_foulds(trees.neighbor_joining(D, names), truth, normalized=True,
                                       mode=mode))


def random_tree_nrf(names: Sequence[str], truth: trees.Tree, n: int = 200, seed=0,
                    mode: str = "compatible") -> float:
    """The mean normalised RF of ``n`` random binary trees on the same leaves (neighbour joining
    of random symmetric matrices, seeded by ``seed``) against ``truth``."""
    rng = np.random.default_rng(seed)
    M = len(names)
    out = []
    for _ in range(n):
        r = np.triu(rng.random((M, M)), 1)
        out.append(nj_nrf(r + r.T, names, truth, mode))
    return float(np.mean(out))


def edit_gap(D: np.ndarray, names: Sequence[str], families: Sequence[str], edits: Sequence[str],
             parents: Sequence[str | None], near: Sequence[str] = ("int8", "int4", "prune"),
             sibling: str = "reseed") -> tuple[float, float]:
    """``(largest D(child, parent) over the children made by an edit in near, smallest
    D(seed-sibling, family root))`` over the families that have a seed-sibling."""
    idx = {n: k for k, n in enumerate(names)}
    kids, sibs = [], []
    for f in dict.fromkeys(families):
        members = [k for k, g in enumerate(families) if g == f]
        sib = [k for k in members if edits[k] == sibling]
        root = idx.get(f"{f}/root")
        if not sib or root is None:
            continue
        sibs += [float(D[k, root]) for k in sib]
        kids += [float(D[k, idx[parents[k]]]) for k in members
                 if edits[k] in near and parents[k] is not None]
    if not kids or not sibs:
        raise ValueError(f"no family has both a seed-sibling ({sibling!r}) and a child made by "
                         f"{', '.join(near)}")
    return max(kids), min(sibs)


# ---------------------------------------------------------------- prediction (notebook 03)

def tasks_above_chance(y: np.ndarray, n_items: int, chance: float = 0.25,
                       alpha: float = 0.05) -> np.ndarray:
    """Which tasks (columns of the (M, k) accuracies ``y``) the zoo is above chance on: the
    pooled number of correct answers over all M models and ``n_items`` items rejects
    ``Binomial(M * n_items, chance)`` one-sided at level ``alpha``. A task on which the zoo is
    at chance leaves nothing to predict."""
    from scipy import stats

    y = np.atleast_2d(np.asarray(y, float))
    if n_items < 1 or not 0 < chance < 1:
        raise ValueError(f"need n_items >= 1 and 0 < chance < 1, got {n_items}, {chance}")
    trials = y.shape[0] * n_items
    hits = np.rint(y.sum(0) * n_items).astype(int)
    return stats.binom.sf(hits - 1, trials, chance) < alpha


def nearest_neighbour_predictions(D: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Leave one model out, 1-nearest-neighbour: model i gets the scores of the other model
    closest to it in ``D`` (the mean of the scores of all models tied at that distance)."""
    D, y = np.asarray(D, float), np.asarray(y, float)
    y = y[:, None] if y.ndim == 1 else y
    if D.shape != (len(y), len(y)) or len(y) < 2:
        raise ValueError(f"need an (M, M) distance matrix and M >= 2 rows of scores; got "
                         f"{D.shape} and {y.shape}")
    pred = np.zeros_like(y)
    for i in range(len(y)):
        d = np.delete(D[i], i)
        others = np.delete(np.arange(len(y)), i)
        pred[i] = y[others[d == d.min()]].mean(0)
    return pred


def leave_groups_out(D: np.ndarray, y: np.ndarray, groups: Sequence[str], *, n_ica: int = 15,
                     epochs: int = 1000, lr: float = 1e-3, weight_decay: float = 0.01,
                     seed: int = 0, clip: float = 3.0) -> predict.LOFOResult:
    """:func:`iclr25.phylolm.predict.leave_one_family_out` with every fold trained at once:
    each group left out in turn, the paper's regressor (:class:`~iclr25.phylolm.predict.PhyloRegressor`:
    FastICA on the training rows, standardised, then ``sigmoid(W s + b)`` trained by Adam on
    MSE, same initialisation) fitted on the other groups. The folds' linear layers are stacked
    into one batched tensor (padded; a padded feature is zero and a padded row is masked out of
    its fold's loss), and the loss is the sum of the folds' mean losses, so each fold receives
    exactly its own gradient and Adam, elementwise, updates it as it would alone: the same
    predictions as the loop (tested), in one training loop instead of one per fold.
    ``groups = model names`` leaves one model out."""
    import warnings

    import torch
    from sklearn.decomposition import FastICA
    from sklearn.exceptions import ConvergenceWarning

    D, y = np.asarray(D, float), np.asarray(y, float)
    y = y[:, None] if y.ndim == 1 else y
    grp = np.asarray(groups)
    folds = list(dict.fromkeys(groups))
    if D.shape != (len(y), len(y)) or len(grp) != len(y):
        raise ValueError(f"need an (M, M) distance matrix, M rows of scores and M groups; got "
                         f"{D.shape}, {y.shape} and {len(grp)}")
    if len(folds) < 2:
        raise ValueError("leaving groups out needs at least two groups")
    if n_ica < 1 or epochs < 1:
        raise ValueError(f"n_ica and epochs must be positive, got {n_ica}, {epochs}")
    k = y.shape[1]
    parts = []
    for f in folds:
        test, train = np.flatnonzero(grp == f), np.flatnonzero(grp != f)
        n_comp = max(1, min(n_ica, len(train) - 1))
        ica = FastICA(n_components=n_comp, random_state=42, max_iter=1000, tol=1e-3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=ConvergenceWarning)
            Z = ica.fit_transform(D[np.ix_(train, train)])
        mu, sd = Z.mean(0), Z.std(0) + 1e-8
        Zt = np.clip((ica.transform(D[np.ix_(test, train)]) - mu) / sd, -clip, clip)
        g = torch.Generator().manual_seed(seed)
        w0 = torch.randn((k, n_comp), generator=g) * 0.01
        p = torch.tensor(y[train], dtype=torch.float32).mean(0).clamp(1e-3, 1 - 1e-3)
        parts.append((test, train, (Z - mu) / sd, Zt, w0, torch.log(p / (1 - p))))
    F_, R = len(folds), max(len(pt[1]) for pt in parts)
    C = max(pt[2].shape[1] for pt in parts)
    X = torch.zeros((F_, R, C))
    Y = torch.zeros((F_, R, k))
    mask = torch.zeros((F_, R, 1))
    W = torch.zeros((F_, k, C))
    b = torch.zeros((F_, k))
    for i, (test, train, Xf, _, w0, b0) in enumerate(parts):
        n, c = Xf.shape
        X[i, :n, :c] = torch.tensor(Xf, dtype=torch.float32)
        Y[i, :n] = torch.tensor(y[train], dtype=torch.float32)
        mask[i, :n] = 1.0
        W[i, :, :c] = w0
        b[i] = b0
    count = mask.sum((1, 2)) * k
    W.requires_grad_(True)
    b.requires_grad_(True)
    opt = torch.optim.Adam([W, b], lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        opt.zero_grad()
        out = torch.sigmoid(torch.bmm(X, W.transpose(1, 2)) + b[:, None, :])
        loss = ((((out - Y) ** 2) * mask).sum((1, 2)) / count).sum()
        loss.backward()
        opt.step()
    pred, mean = np.zeros_like(y), np.zeros_like(y)
    with torch.no_grad():
        for i, (test, train, Xf, Zt, _, _) in enumerate(parts):
            xt = torch.tensor(Zt, dtype=torch.float32)
            pred[test] = torch.sigmoid(xt @ W[i, :, :xt.shape[1]].T + b[i]).numpy()
            mean[test] = y[train].mean(0)
    return predict.LOFOResult(y, pred, mean, list(groups))


def prediction_replicate(D: np.ndarray, y: np.ndarray, families: Sequence[str],
                         names: Sequence[str], *, n_ica: int = 15, epochs: int = 1000,
                         seed: int = 0) -> dict[str, float]:
    """One gene split's numbers for notebook 03, from its distance matrix ``D`` and the scores
    ``y`` (M, k) of the scored tasks: leave-one-family-out MSE of the paper's regressor and of
    the fold's training mean, the mean Pearson r over tasks (tasks where it is undefined are
    left out; 0 when none is defined), and leave-one-model-out MSE of the regressor, the
    training mean and 1-nearest-neighbour."""
    lofo = leave_groups_out(D, y, families, n_ica=n_ica, epochs=epochs, seed=seed)
    lomo = leave_groups_out(D, y, list(names), n_ica=n_ica, epochs=epochs, seed=seed)
    r = [v for v in lofo.pearson() if np.isfinite(v)]
    y2 = lomo.y
    nn = nearest_neighbour_predictions(D, y2)
    (lofo_mse, lofo_mean), (lomo_mse, lomo_mean) = lofo.mse(), lomo.mse()
    return {"lofo_mse": lofo_mse, "lofo_mean_mse": lofo_mean,
            "lofo_pearson": float(np.mean(r)) if r else 0.0,
            "lomo_mse": lomo_mse, "lomo_mean_mse": lomo_mean,
            "lomo_1nn_mse": float(((nn - y2) ** 2).mean())}
