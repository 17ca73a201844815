"""The measurements the chapter's registered claims are judged from (chapter 17).

A notebook hands the registry replicates of a statistic (one per seed, or one per held-out item)
and of its control; the functions here compute them, each against a brute-force or closed-form
reference in ``tests/soft_preference_learning``:

- :func:`matched_control` -- a baseline's value at *our* operating point on a trade-off curve
  (DPO + token temperature at SPL's representativeness, or at SPL's quality), interpolated
  linearly along the temperature grid, clamped to the nearest end of the curve;
- :func:`slope` -- the least-squares slope of ``y`` on ``x`` (valid mass on ``log(beta/alpha)``);
- :func:`pass_at_k` -- the exact pass@k ``1 - (1 - q)^k`` of a model whose probability of the
  exact right answer is ``q``;
- :func:`hard_items` -- the held-out problems the reference finds hard (``0 < q_ref <`` median);
- :func:`best_on_half` -- the column with the best mean on the tuning half (the temperature a
  practitioner would tune), judged on the other half;
- :func:`option_calibration` -- per multiple-choice item: the top option's confidence, whether it
  is right, the overconfidence ``conf - 1[right]`` and the Brier score.
"""

from __future__ import annotations

import numpy as np

__all__ = ["matched_control", "slope", "pass_at_k", "hard_items", "split_halves", "best_on_half",
           "option_calibration", "top_gap"]


def matched_control(x, y, x0: float) -> float:
    """The baseline's ``y`` at ``x = x0`` on the curve ``(x[i], y[i])`` (chapter 17).

    The curve is walked in the given order (the temperature grid, low to high); the first
    segment whose ends straddle ``x0`` is interpolated linearly. When ``x0`` lies beyond every
    point, the point nearest in ``x`` stands in (e.g. "when no temperature is as representative
    as SPL, the most representative temperature's valid mass").

    >>> matched_control([0.7, 0.5, 0.3], [0.9, 0.5, 0.1], 0.4)
    0.3
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or len(x) < 1:
        raise ValueError(f"x and y must be 1-D of one length >= 1, got {x.shape} and {y.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.isfinite(x0)):
        raise ValueError("x, y and x0 must be finite")
    for i in range(len(x) - 1):
        a, b = x[i], x[i + 1]
        if min(a, b) <= x0 <= max(a, b):
            if a == b:
                return float(max(y[i], y[i + 1]))
            w = (x0 - a) / (b - a)
            return float(y[i] + w * (y[i + 1] - y[i]))
    return float(y[np.argmin(np.abs(x - x0))])   # beyond the curve (or a single point)


def slope(x, y) -> float:
    """Least-squares slope of ``y`` on ``x`` (chapter 17: valid mass on ``log(beta/alpha)``)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or len(x) < 2:
        raise ValueError(f"x and y must be 1-D of one length >= 2, got {x.shape} and {y.shape}")
    xc = x - x.mean()
    if not np.any(xc):
        raise ValueError("x must not be constant")
    return float((xc * (y - y.mean())).sum() / (xc ** 2).sum())


def pass_at_k(q, k: int) -> np.ndarray:
    """Exact pass@k ``1 - (1 - q)^k`` (chapter 17): the chance that at least one of ``k``
    independent samples is the exact right answer, ``q`` the model's probability of it."""
    q = np.asarray(q, dtype=np.float64)
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if np.any((q < 0) | (q > 1)) or not np.all(np.isfinite(q)):
        raise ValueError("q must be probabilities in [0, 1]")
    with np.errstate(divide="ignore"):
        return np.where(q >= 1.0, 1.0, -np.expm1(k * np.log1p(-q)))


def hard_items(q_ref) -> np.ndarray:
    """Indices of the held-out problems the reference finds hard (chapter 17): its probability
    of the exact right answer is above 0 and below the median over the held-out problems."""
    q_ref = np.asarray(q_ref, dtype=np.float64)
    if q_ref.ndim != 1 or len(q_ref) < 2:
        raise ValueError(f"q_ref must be 1-D with >= 2 problems, got shape {q_ref.shape}")
    return np.flatnonzero((q_ref > 0) & (q_ref < np.median(q_ref)))


def split_halves(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random split of ``range(n)`` into a tuning half and a test half (the test half
    takes the odd item out)."""
    if not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[:n // 2]), np.sort(perm[n // 2:])


def best_on_half(scores, tune, *, higher: bool = True) -> int:
    """The column of ``scores`` ``(n_items, n_settings)`` with the best mean over the rows
    ``tune`` (chapter 17: the temperature a practitioner would pick on held-out problems).
    Ties go to the first column."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError(f"scores must be (n_items, n_settings), got shape {s.shape}")
    m = s[np.asarray(tune)].mean(0)
    return int(np.argmax(m) if higher else np.argmin(m))


def option_calibration(probs, correct) -> dict[str, np.ndarray]:
    """Per multiple-choice item (chapter 17): ``probs`` ``(n_items, n_options)`` the model's
    distribution over the options, ``correct`` the right option's index. Returns arrays
    ``confidence`` (top option's probability), ``right`` (1 if the top option is the right
    one), ``overconfidence`` (``confidence - right``; its mean is confidence minus accuracy)
    and ``brier`` (``sum_o (p_o - 1[o right])^2``)."""
    P = np.asarray(probs, dtype=np.float64)
    c = np.asarray(correct)
    if P.ndim != 2 or c.shape != (len(P),):
        raise ValueError(f"probs must be (n, K) and correct (n,), got {P.shape} and {c.shape}")
    if not np.allclose(P.sum(1), 1.0, atol=1e-6) or np.any(P < 0):
        raise ValueError("each row of probs must be a distribution")
    if np.any((c < 0) | (c >= P.shape[1])):
        raise ValueError("correct must index an option")
    top = P.argmax(1)
    conf = P[np.arange(len(P)), top]
    right = (top == c).astype(np.float64)
    onehot = np.zeros_like(P)
    onehot[np.arange(len(P)), c] = 1.0
    return {"confidence": conf, "right": right, "overconfidence": conf - right,
            "brier": ((P - onehot) ** 2).sum(1)}


def top_gap(pi, freq) -> np.ndarray:
    """Per question (chapter 17, the tabular calibration bandit): ``|confidence of the top
    answer - its true frequency|`` for policies ``pi`` ``(M, K)`` and true answer frequencies
    ``freq`` ``(M, K)``."""
    pi = np.asarray(pi, dtype=np.float64)
    freq = np.asarray(freq, dtype=np.float64)
    if pi.shape != freq.shape or pi.ndim != 2:
        raise ValueError(f"pi and freq must both be (M, K), got {pi.shape} and {freq.shape}")
    top = pi.argmax(1)
    rows = np.arange(len(pi))
    return np.abs(pi[rows, top] - freq[rows, top])

