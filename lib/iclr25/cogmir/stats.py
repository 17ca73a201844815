"""Statistics of bias rates: Wilson intervals and one-sided permutation tests.

Part of chapter 03 (CogMir). A bias rate is the fraction of trials in which the agent took the
option the social cue pointed at; it is compared with the rate of taking the *same* option in
the no-cue control (same question, same option order).

- :func:`wilson_interval` -- the Wilson score interval of a binomial proportion (closed form).
- :func:`bias_rate` -- a :class:`Rate` (k, n, rate, interval) from 0/1 outcomes.
- :func:`permutation_test` -- one-sided test that treatment > control, two-sample (labels
  permuted) or paired (signs of the within-pair differences flipped); exact by enumeration when
  the arrangements are few, Monte Carlo otherwise. On 0/1 data the exact two-sample test is
  Fisher's one-sided exact test and the exact paired test is the one-sided exact McNemar test
  (both checked in the unit tests).
- :func:`trend_test` -- one-sided test of a decreasing Spearman trend, positions permuted
  within groups (the rumour chain's stories).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Rate", "wilson_interval", "bias_rate", "PermutationResult", "permutation_test",
           "mean_difference", "TrendResult", "trend_test"]


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes in ``n`` trials (chapter 03).

    The set of ``p`` with ``|k/n - p| <= z sqrt(p (1 - p) / n)``, solved in closed form:
    ``(phat + z^2/2n +- z sqrt(phat (1 - phat)/n + z^2/4n^2)) / (1 + z^2/n)``. It stays inside
    [0, 1] and is not degenerate at ``k = 0`` or ``k = n`` (unlike the Wald interval).
    """
    if isinstance(k, bool) or isinstance(n, bool) or int(k) != k or int(n) != n:
        raise ValueError(f"k and n must be integers, got k={k!r}, n={n!r}")
    k, n = int(k), int(n)
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need n >= 1 and 0 <= k <= n, got k={k}, n={n}")
    z = _z(confidence)
    phat = k / n
    denom = 1 + z * z / n
    centre = (phat + z * z / (2 * n)) / denom
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Rate:
    """A proportion with its Wilson interval (chapter 03)."""

    k: int
    n: int
    lo: float
    hi: float

    @property
    def rate(self) -> float:
        return self.k / self.n

    def contains(self, p: float) -> bool:
        return self.lo <= p <= self.hi

    def __str__(self) -> str:
        return f"{self.rate:.2f} [{self.lo:.2f}, {self.hi:.2f}] (n={self.n})"


def _binary(x, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of 0/1 outcomes, got shape "
                         f"{a.shape}")
    if a.dtype == bool:
        return a.astype(np.int64)
    if not np.isin(a, (0, 1)).all():
        raise ValueError(f"{name} must hold 0/1 (or bool) outcomes; got values "
                         f"{sorted(set(np.unique(a).tolist()))[:5]}")
    return a.astype(np.int64)


def bias_rate(outcomes, confidence: float = 0.95) -> Rate:
    """The rate of 1s in ``outcomes`` (0/1 or bool: did the agent take the cued option) with
    its Wilson interval (chapter 03)."""
    a = _binary(outcomes, "outcomes")
    lo, hi = wilson_interval(int(a.sum()), len(a), confidence)
    return Rate(int(a.sum()), len(a), lo, hi)


def mean_difference(treatment, control) -> float:
    """``mean(treatment) - mean(control)`` (the statistic of :func:`permutation_test`)."""
    return float(np.mean(treatment) - np.mean(control))


@dataclass(frozen=True)
class PermutationResult:
    """What :func:`permutation_test` returns (chapter 03)."""

    difference: float       # observed mean(treatment) - mean(control)
    p_value: float          # one-sided: P(difference >= observed) under the null
    n_arrangements: int     # arrangements used (all of them when exact)
    exact: bool
    paired: bool


def permutation_test(treatment, control, *, paired: bool = False, n_perm: int = 20000,
                     seed: int = 0, exact_max: int = 200000) -> PermutationResult:
    """One-sided permutation test of ``mean(treatment) > mean(control)`` (chapter 03).

    ``paired=False``: the pooled outcomes are split into groups of the original sizes in every
    way (exact) or ``n_perm`` random ways. ``paired=True`` (``treatment[i]`` and ``control[i]``
    are one question in one option order, with and without the cue): the sign of each pair's
    difference is flipped in every way (``2^m`` over the ``m`` non-zero differences) or at
    random. Exact when the arrangements number at most ``exact_max``. The Monte Carlo p-value
    counts the observed arrangement, ``(1 + #{T* >= T}) / (1 + n_perm)``, so it is never 0.
    Works on any real outcomes (0/1 bias indicators, probabilities, ratings).
    """
    t = np.asarray(treatment, dtype=np.float64)
    c = np.asarray(control, dtype=np.float64)
    for name, a in (("treatment", t), ("control", c)):
        if a.ndim != 1 or a.size == 0 or not np.isfinite(a).all():
            raise ValueError(f"{name} must be a non-empty 1-D sequence of finite numbers, got "
                             f"shape {a.shape}")
    if not isinstance(n_perm, int) or n_perm < 1:
        raise ValueError(f"n_perm must be a positive integer, got {n_perm!r}")
    obs = mean_difference(t, c)
    eps = 1e-12 * max(1.0, abs(obs))
    rng = np.random.default_rng(seed)
    if paired:
        if t.shape != c.shape:
            raise ValueError(f"paired=True needs treatment and control of the same length, got "
                             f"{len(t)} and {len(c)}")
        d = t - c
        nz = d[d != 0]
        m = len(nz)
        total = len(d)
        if m == 0:
            return PermutationResult(obs, 1.0, 1, True, True)
        if 2 ** m <= exact_max:
            signs = np.array(list(itertools.product((1.0, -1.0), repeat=m)))
            stats = signs @ nz / total
            return PermutationResult(obs, float(np.mean(stats >= obs - eps)), len(stats), True,
                                     True)
        signs = rng.choice((1.0, -1.0), size=(n_perm, m))
        stats = signs @ nz / total
        p = (1 + int(np.sum(stats >= obs - eps))) / (1 + n_perm)
        return PermutationResult(obs, p, n_perm, False, True)
    pooled = np.concatenate([t, c])
    nt, n = len(t), len(t) + len(c)
    if math.comb(n, nt) <= exact_max:
        total_sum = pooled.sum()
        stats = []
        for idx in itertools.combinations(range(n), nt):
            s = pooled[list(idx)].sum()
            stats.append(s / nt - (total_sum - s) / (n - nt))
        stats = np.asarray(stats)
        return PermutationResult(obs, float(np.mean(stats >= obs - eps)), len(stats), True, False)
    stats = np.empty(n_perm)
    for i in range(n_perm):
        perm = rng.permutation(pooled)
        stats[i] = perm[:nt].mean() - perm[nt:].mean()
    p = (1 + int(np.sum(stats >= obs - eps))) / (1 + n_perm)
    return PermutationResult(obs, p, n_perm, False, False)


@dataclass(frozen=True)
class TrendResult:
    """What :func:`trend_test` returns: Spearman's rho of (position, value) pooled over groups,
    and the one-sided p-value of a *decreasing* trend under within-group permutation."""

    rho: float
    p_value: float
    n_arrangements: int
    exact: bool


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import rankdata

    rx, ry = rankdata(x), rankdata(y)
    sx, sy = rx - rx.mean(), ry - ry.mean()
    den = math.sqrt(float((sx * sx).sum() * (sy * sy).sum()))
    return float((sx * sy).sum() / den) if den > 0 else 0.0


def trend_test(position, value, group, *, n_perm: int = 20000, seed: int = 0,
               exact_max: int = 50000) -> TrendResult:
    """One-sided permutation test that ``value`` falls with ``position`` (chapter 03, rumour chain).

    The statistic is Spearman's rho of (position, value) pooled over all rows; under the null
    the positions are exchangeable *within* each group (one story's chain), so each group's
    values are permuted among its positions. Exact by enumeration when the arrangements number
    at most ``exact_max``, else ``n_perm`` random ones with ``p = (1 + #{rho* <= rho}) /
    (1 + n_perm)``. A small p says the decline is more than what reshuffling one chain's
    retellings gives.
    """
    pos = np.asarray(position, dtype=np.float64)
    val = np.asarray(value, dtype=np.float64)
    grp = np.asarray(group)
    if not (pos.ndim == val.ndim == grp.ndim == 1) or not len(pos) == len(val) == len(grp):
        raise ValueError(f"position, value and group must be 1-D of one length, got "
                         f"{pos.shape}, {val.shape}, {grp.shape}")
    if len(pos) < 3 or not (np.isfinite(pos).all() and np.isfinite(val).all()):
        raise ValueError("need at least 3 finite (position, value) pairs")
    if not isinstance(n_perm, int) or n_perm < 1:
        raise ValueError(f"n_perm must be a positive integer, got {n_perm!r}")
    obs = _spearman(pos, val)
    eps = 1e-12
    idx = [np.flatnonzero(grp == g) for g in np.unique(grp)]
    count = math.prod(math.factorial(len(i)) for i in idx)
    if count <= exact_max:
        stats = []
        for perms in itertools.product(*(itertools.permutations(i) for i in idx)):
            v = val.copy()
            for i, p in zip(idx, perms):
                v[i] = val[list(p)]
            stats.append(_spearman(pos, v))
        stats = np.array(stats)
        return TrendResult(obs, float(np.mean(stats <= obs + eps)), count, True)
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(n_perm):
        v = val.copy()
        for i in idx:
            v[i] = val[rng.permutation(i)]
        hits += _spearman(pos, v) <= obs + eps
    return TrendResult(obs, (1 + hits) / (1 + n_perm), n_perm, False)
