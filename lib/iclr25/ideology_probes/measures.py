"""The replicates and controls the chapter's registered claims are judged from.

Chapter 10 (issue 50: the notebooks hand measurements to :class:`iclr25.registry.Registry`;
issue 61: every probe number beside its ceiling and its lexical baseline, comparisons over >= 10
split seeds with paired intervals, the within-state test, steering judged top heads against
random heads per item). Each function returns per-replicate arrays (per split seed, per item,
per senator, per state) in the order the registry entry names, and the matching control.
Nothing here thresholds or judges: the registry (``book/claims/10-ideology-probes.yaml``) does.

Split seeds
-----------
A *split seed* ``s`` fixes the outer 2-fold split (:func:`~iclr25.ideology_probes.probe.fold_indices`
with ``seed=s``: ``KFold(2, shuffle=True, random_state=s)``, or whole states shuffled by ``s``
for the state prompts); ours and every control of one seed use the same folds, so the
replicates pair by seed. Heads are ranked *inside* each training fold (an inner 2-fold
cross-validation on the training rows, seed ``s + 1``), never on the rows that score them.

Rank products
-------------
For items with prediction ``p`` and target ``y``, ``z(rank p) * z(rank y)`` (average ranks,
z-scored with the population SD) has mean exactly Spearman's rho (:func:`rank_products`), so a
bootstrap over items of these products is a bootstrap of rho that does not re-rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from .probe import (_acts, cv_head_scores, fold_indices, lexical_cv, ridge_fit, ridge_predict,
                    spearman)
from .steering import random_heads

__all__ = ["SPLIT_SEED0", "split_seeds", "middle_layers", "NestedSplit", "nested_split",
           "nested_splits", "max_cv_rho", "label_controls", "lexical_splits", "held_out_rho",
           "rank_products", "auc_per_positive", "split_delegations", "random_head_sets",
           "steering_items",
           "item_effect", "coherence_items"]

#: The paper's split seed (``KFold(..., random_state=42)``); seed ``i`` of a run is ``42 + i``.
SPLIT_SEED0 = 42


def split_seeds(n: int, start: int = SPLIT_SEED0) -> list[int]:
    """``[start, start + 1, ..., start + n - 1]``: the split seeds of a run (chapter 10)."""
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n (the number of split seeds) must be a positive integer, got {n!r}")
    return [int(start) + i for i in range(int(n))]


def middle_layers(n_layers: int) -> range:
    """The middle half of ``n_layers`` layers, ``range(L // 4, 3 L // 4)`` (layers 7-21 of
    SmolLM2's 30; the registry's "middle half"). Chapter 10."""
    if not isinstance(n_layers, (int, np.integer)) or n_layers < 4:
        raise ValueError(f"n_layers must be an integer >= 4, got {n_layers!r}")
    return range(n_layers // 4, 3 * n_layers // 4)


@dataclass
class NestedSplit:
    """One split seed's nested probe results (:func:`nested_split`). Scores are held-out
    Spearman rhos averaged over the outer folds."""

    seed: int
    best_head: float                 # the head ranked best on the training fold, scored held out
    topk: float                      # the mean of the top-k heads ranked on the training fold
    random_k: float                  # the mean of k random heads (one draw per split seed)
    middle_share: float              # share of the top-``n_top`` heads in the middle half
    best_heads: list = field(default_factory=list)   # per outer fold, (layer, head)
    top_heads: list = field(default_factory=list)    # per outer fold, the top-n_top heads
    oof_topk: np.ndarray | None = None                # out-of-fold top-k predictions


def nested_split(acts: np.ndarray, y: np.ndarray, seed: int, *, k: int, alpha: float = 1.0,
                 folds: int = 2, groups: np.ndarray | None = None, n_top: int = 10,
                 method: str = "batched") -> NestedSplit:
    """Nested head probing on one split seed (chapter 10's ``01-head-probing``).

    For each outer fold: an inner cross-validation on the training rows
    (:func:`~iclr25.ideology_probes.probe.cv_head_scores`, seed ``seed + 1``, whole groups kept
    together) ranks all heads; every head's ridge is refitted on all training rows and predicts
    the held-out rows. From one pass: the best-ranked head's held-out rho, the top-``k``
    ensemble's (as :func:`~iclr25.ideology_probes.probe.ensemble_cv`), ``k`` random heads' (drawn
    with ``random_heads(..., seed=seed)``, the same heads in both folds), and the share of the
    top-``n_top`` ranked heads that lie in :func:`middle_layers`.
    """
    acts = _acts(acts)
    y = np.asarray(y, dtype=np.float64)
    n, L, H, d = acts.shape
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= L * H:
        raise ValueError(f"k must be an integer in [1, {L * H}], got {k!r}")
    if not 1 <= n_top <= L * H:
        raise ValueError(f"n_top must be in [1, {L * H}], got {n_top!r}")
    X = acts.reshape(n, L * H, d)
    mid = set(middle_layers(L))
    rand = [l * H + h for l, h in random_heads(L, H, k, seed=seed)]
    oof = np.zeros(n)
    best, topk, rnd, share, bests, tops = [], [], [], [], [], []
    for tr, te in fold_indices(n, folds, seed, groups):
        g_tr = None if groups is None else np.asarray(groups)[tr]
        inner = cv_head_scores(acts[tr], y[tr], alpha=alpha, folds=folds, seed=seed + 1,
                               groups=g_tr, method=method).rho.ravel()
        order = np.argsort(-np.nan_to_num(inner, nan=-np.inf), kind="stable")
        coef, icpt = ridge_fit(X[tr], y[tr], alpha, method=method)
        P = ridge_predict(X[te], coef, icpt)                     # (n_te, G)
        best.append(spearman(P[:, order[0]], y[te]))
        oof[te] = P[:, order[:k]].mean(1)
        topk.append(spearman(oof[te], y[te]))
        rnd.append(spearman(P[:, rand].mean(1), y[te]))
        top = [(int(i // H), int(i % H)) for i in order[:n_top]]
        share.append(np.mean([l in mid for l, _ in top]))
        bests.append(top[0])
        tops.append(top)
    return NestedSplit(int(seed), float(np.mean(best)), float(np.mean(topk)), float(np.mean(rnd)),
                       float(np.mean(share)), bests, tops, oof)


def nested_splits(acts: np.ndarray, y: np.ndarray, seeds: Sequence[int], **kw) -> list[NestedSplit]:
    """:func:`nested_split` for each seed of ``seeds`` (chapter 10)."""
    return [nested_split(acts, y, int(s), **kw) for s in seeds]


def max_cv_rho(acts: np.ndarray, y: np.ndarray, seed: int, *, alpha: float = 1.0, folds: int = 2,
               method: str = "batched") -> float:
    """The largest cross-validated rho over all heads on split seed ``seed`` (the paper's Fig.
    A3 statistic: heads chosen on the rows that score them, not nested). Chapter 10."""
    return float(np.nanmax(cv_head_scores(acts, y, alpha=alpha, folds=folds, seed=seed,
                                          method=method).rho))


def label_controls(acts: np.ndarray, x: np.ndarray, seeds: Sequence[int], *, alpha: float = 1.0,
                   folds: int = 2, method: str = "batched") -> pd.DataFrame:
    """Per split seed, :func:`max_cv_rho` for the target ``x``, ``x**3``, ``sin(10 x)`` and ``x``
    permuted (one permutation per seed, ``default_rng(seed)``), all on that seed's split: the
    replicates of the registered label controls (Fig. A3). Columns ``seed``, ``x``, ``x3``,
    ``sin10x``, ``permuted``. Chapter 10."""
    x = np.asarray(x, dtype=np.float64)
    rows = []
    for s in seeds:
        perm = np.random.default_rng(int(s)).permutation(x)
        rows.append({"seed": int(s)} | {
            name: max_cv_rho(acts, t, int(s), alpha=alpha, folds=folds, method=method)
            for name, t in [("x", x), ("x3", x ** 3), ("sin10x", np.sin(10 * x)),
                            ("permuted", perm)]})
    return pd.DataFrame(rows)


def lexical_splits(y: np.ndarray, seeds: Sequence[int], *, texts: Sequence[str],
                   features: np.ndarray, folds: int = 2,
                   groups: np.ndarray | None = None) -> pd.DataFrame:
    """Per split seed, the held-out rho of the TF-IDF ridge and of the mean-embedding ridge
    (:func:`~iclr25.ideology_probes.probe.lexical_cv`, penalties tuned inside each training fold)
    on that seed's folds, and ``best``, the larger of the two on that split (the registered
    lexical control: conservative, it is chosen on the held-out fold). Chapter 10."""
    rows = []
    for s in seeds:
        tf, _ = lexical_cv(y, texts=texts, folds=folds, seed=int(s), groups=groups)
        em, _ = lexical_cv(y, features=features, folds=folds, seed=int(s), groups=groups)
        rows.append({"seed": int(s), "tfidf": tf, "embedding": em, "best": max(tf, em)})
    return pd.DataFrame(rows)


def held_out_rho(pred: np.ndarray, y: np.ndarray, seeds: Sequence[int], *, folds: int = 2,
                 groups: np.ndarray | None = None) -> np.ndarray:
    """Per split seed, the mean over the held-out folds of ``spearman(pred[te], y[te])`` for a
    fixed predictor ``pred`` (e.g. the personas' ``cue_mean``, a sufficient statistic of the
    latent given the drawn cues: the labels' ceiling, shown beside the probes). Chapter 10."""
    pred = np.asarray(pred, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if pred.shape != y.shape:
        raise ValueError(f"pred and y must have the same shape, got {pred.shape} and {y.shape}")
    return np.array([np.mean([spearman(pred[te], y[te])
                              for _, te in fold_indices(len(y), folds, int(s), groups)])
                     for s in seeds])


# ------------------------------------------------------------------------------ transfer (02)


def rank_products(pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per item, ``z(rank pred) * z(rank y)`` (average ranks, z-scored with the population SD):
    the mean over items is Spearman's rho exactly. A constant input gives zeros. Chapter 10."""
    pred = np.asarray(pred, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if pred.shape != y.shape or pred.size < 2:
        raise ValueError(f"pred and y must be vectors of one length >= 2, got {pred.shape} and "
                         f"{y.shape}")

    def z(v):
        r = rankdata(v)
        sd = r.std()
        return (r - r.mean()) / sd if sd > 0 else np.zeros_like(r)

    return z(pred) * z(y)


def auc_per_positive(score: np.ndarray, label: np.ndarray) -> np.ndarray:
    """Per positive item, the fraction of negative items scored lower (ties count one half):
    the mean is the AUC (:func:`~iclr25.ideology_probes.slant.auc`). Chapter 10."""
    score = np.asarray(score, dtype=np.float64)
    label = np.asarray(label) > 0
    pos, neg = score[label], score[~label]
    if not len(pos) or not len(neg):
        raise ValueError("auc_per_positive needs both classes")
    return ((pos[:, None] > neg[None]).mean(1) + 0.5 * (pos[:, None] == neg[None]).mean(1))


def split_delegations(score: np.ndarray, rep: np.ndarray, state: Sequence[str]) -> pd.DataFrame:
    """The within-state test: per state whose two senators are one Republican and one
    non-Republican, ``hit`` = 1 if the Republican is scored strictly higher, else 0 (the
    registered replicate). Columns ``state``, ``rep_score``, ``other_score``, ``hit``. Chapter 10."""
    score = np.asarray(score, dtype=np.float64)
    rep = np.asarray(rep).astype(bool)
    state = np.asarray(list(state), dtype=object)
    if not len(score) == len(rep) == len(state):
        raise ValueError("score, rep and state must have one entry per senator")
    rows = []
    for s in pd.unique(state):
        i = np.flatnonzero(state == s)
        if len(i) == 2 and rep[i].sum() == 1:
            r, o = (i[0], i[1]) if rep[i[0]] else (i[1], i[0])
            rows.append({"state": s, "rep_score": score[r], "other_score": score[o],
                         "hit": float(score[r] > score[o])})
    return pd.DataFrame(rows, columns=["state", "rep_score", "other_score", "hit"])


# ------------------------------------------------------------------------------ steering (03)


def random_head_sets(n_layers: int, n_heads: int, k: int, n_sets: int, *, seed: int = 0,
                     exclude: Sequence[tuple[int, int]] = ()) -> list[list[tuple[int, int]]]:
    """``n_sets`` independent draws of ``k`` heads avoiding ``exclude`` (draw ``i`` is
    :func:`~iclr25.ideology_probes.steering.random_heads` seeded by ``SeedSequence([seed, i])``):
    the random-head control of the steering claims, a new draw per item. Chapter 10."""
    if not isinstance(n_sets, (int, np.integer)) or n_sets < 1:
        raise ValueError(f"n_sets must be a positive integer, got {n_sets!r}")
    return [random_heads(n_layers, n_heads, k, exclude=exclude,
                         seed=int(np.random.SeedSequence([int(seed), i]).generate_state(1)[0]))
            for i in range(int(n_sets))]


def steering_items(model, tokenizer, prefix, sets: dict, A: float, *, n_samples: int,
                   temperature: float = 0.7, seed: int = 0, max_new_tokens: int = 32,
                   batch_size: int = 256, progress_desc: str | None = "steering") -> pd.DataFrame:
    """The registered steering runs: every item (prompt ``i``, sample ``j < n_samples``) is
    generated unsteered once and, for each head set of ``sets`` (``{name: directions}``, shared
    ``{layer: (H, d)}`` or one per item ``{layer: (n_items, H, d)}``), at ``-A`` and ``+A``;
    item ``(i, j)`` draws from the same seeded generator in every run
    (:func:`~iclr25.ideology_probes.steering.sample_from_prefix`).

    Returns one row per (``config``, ``alpha``, item): ``config`` is ``"unsteered"`` for alpha
    0. Items are ordered prompt-major (``item = i * n_samples + j``). Chapter 10."""
    from ..progress import progress
    from .steering import sample_from_prefix

    if not n_samples >= 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples!r}")
    if not A > 0:
        raise ValueError(f"A (the steering strength) must be > 0, got {A!r}")
    P = len(prefix)
    rows = np.repeat(np.arange(P), n_samples)
    samples = np.tile(np.arange(n_samples), P)
    kw = dict(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
              batch_size=batch_size)
    runs = [("unsteered", 0.0, None)] + [(name, a, dirs) for name, dirs in sets.items()
                                          for a in (-float(A), float(A))]
    parts = []
    for name, a, dirs in progress(runs, desc=progress_desc):
        df = sample_from_prefix(model, tokenizer, prefix, rows, samples, directions=dirs,
                                alpha=a, **kw)
        parts.append(df.assign(config=name, alpha=a, item=np.arange(len(rows))))
    out = pd.concat(parts, ignore_index=True)
    return out[["config", "alpha", "item", "prompt", "sample", "text", "token_ids", "logprob"]]


def _per_item(gen: pd.DataFrame, config: str, alpha: float, column: str) -> pd.Series:
    g = gen[(gen["config"] == config) & (gen["alpha"] == alpha)]
    if g.empty:
        raise ValueError(f"no rows for config {config!r} at alpha {alpha}; configs: "
                         f"{sorted(gen['config'].unique())}")
    return g.set_index("item")[column].sort_index()


def item_effect(gen: pd.DataFrame, config: str, A: float, column: str = "slant") -> np.ndarray:
    """Per item, ``column(+A) - column(-A)`` with ``config``'s heads steered (the registered
    steering replicate), items in order. Chapter 10."""
    hi, lo = _per_item(gen, config, float(A), column), _per_item(gen, config, -float(A), column)
    if not hi.index.equals(lo.index):
        raise ValueError(f"{config}: the +A and -A runs hold different items")
    return (hi - lo).to_numpy(dtype=np.float64)


def coherence_items(gen: pd.DataFrame, config: str, A: float,
                    column: str = "ln_ppl") -> tuple[np.ndarray, np.ndarray]:
    """Per item, the mean over ``+A`` and ``-A`` of ``column`` (the ln perplexity of the steered
    text under the clean model) with ``config`` steered, and the same item's value unsteered:
    the registered coherence replicate and its paired control. Chapter 10."""
    hi, lo = _per_item(gen, config, float(A), column), _per_item(gen, config, -float(A), column)
    base = _per_item(gen, "unsteered", 0.0, column)
    if not (hi.index.equals(lo.index) and hi.index.equals(base.index)):
        raise ValueError(f"{config}: the steered and unsteered runs hold different items")
    return ((hi + lo) / 2).to_numpy(dtype=np.float64), base.to_numpy(dtype=np.float64)
