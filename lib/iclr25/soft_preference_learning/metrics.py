"""Diversity, calibration and best-of-N metrics (chapter 17, notebook 03)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

__all__ = ["distinct_n", "attribute_entropy", "embedding_spread", "ece", "pass_at_n",
           "words"]

_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, apostrophes)."""
    return _WORD.findall(text.lower())


def distinct_n(texts: Sequence[str], n: int = 2) -> float:
    """Distinct-n (Li et al., 2016): distinct word n-grams over all n-grams of ``texts``
    (chapter 17). 0 when the texts have no n-gram."""
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, not one string")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    grams = []
    for t in texts:
        w = words(t)
        grams += [tuple(w[i:i + n]) for i in range(len(w) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def attribute_entropy(values: Sequence, *, base: float = math.e) -> float:
    """Entropy of the empirical distribution of an attribute (e.g. the name or the gender each
    sample gives; ``None`` counts as its own value). Chapter 17."""
    counts = np.array(list(Counter(values).values()), dtype=np.float64)
    if counts.size == 0:
        raise ValueError("no values")
    q = counts / counts.sum()
    return float(-(q * np.log(q)).sum() / math.log(base))


def embedding_spread(emb: np.ndarray) -> float:
    """Mean pairwise cosine distance ``1 - cos`` over distinct pairs of rows (chapter 17; with
    MiniLM embeddings, the semantic diversity of a set of samples)."""
    X = np.asarray(emb, dtype=np.float64)
    if X.ndim != 2 or len(X) < 2:
        raise ValueError(f"emb must be (n >= 2, dim), got shape {X.shape}")
    X = X / np.linalg.norm(X, axis=1, keepdims=True).clip(1e-12)
    S = X @ X.T
    n = len(X)
    return float(1.0 - (S.sum() - np.trace(S)) / (n * (n - 1)))


def ece(confidence, correct, n_bins: int = 10) -> float:
    """Expected calibration error with ``n_bins`` equal-width bins (Guo et al., 2017): the
    ``|accuracy - confidence|`` gap of each bin weighted by its share of the predictions.
    ``correct`` may be 0/1 or an expected accuracy in [0, 1]. Chapter 17."""
    conf = np.asarray(confidence, dtype=np.float64)
    acc = np.asarray(correct, dtype=np.float64)
    if conf.shape != acc.shape or conf.ndim != 1:
        raise ValueError(f"confidence and correct must be 1-D of one length, got {conf.shape}, {acc.shape}")
    if np.any((conf < 0) | (conf > 1)):
        raise ValueError("confidence must lie in [0, 1]")
    if not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    idx = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        m = idx == b
        if m.any():
            total += m.mean() * abs(acc[m].mean() - conf[m].mean())
    return float(total)


def pass_at_n(n_samples: int, n_correct: int, N: int) -> float:
    """The unbiased pass@N estimate from ``n_samples`` draws of which ``n_correct`` are right
    (Chen et al., 2021): ``1 - C(n - c, N) / C(n, N)``. Chapter 17."""
    if not 1 <= N <= n_samples:
        raise ValueError(f"N must be in [1, n_samples={n_samples}], got {N}")
    if not 0 <= n_correct <= n_samples:
        raise ValueError(f"n_correct must be in [0, {n_samples}], got {n_correct}")
    if n_samples - n_correct < N:
        return 1.0
    return float(1.0 - np.prod(1.0 - N / np.arange(n_samples - n_correct + 1, n_samples + 1)))
