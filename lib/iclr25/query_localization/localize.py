"""From attributions to knowledge-neuron sets, and the statistics of the Knowledge
Localization (KL) assumption (chapter 05).

A query's KN set :math:`\\mathcal N_i` holds the units whose attribution exceeds ``threshold``
times the query's largest attribution (Dai et al.'s adaptive threshold). KL says the paraphrases
:math:`q_1..q_k` of one fact share their KNs. The consistency score of a fact (reconstructed:
the paper's exact formula could not be checked) is

- ``"pairwise"`` (CS, the default): the mean pairwise Jaccard index
  :math:`\\frac{2}{k(k-1)}\\sum_{i<j} |\\mathcal N_i \\cap \\mathcal N_j| / |\\mathcal N_i \\cup \\mathcal N_j|`;
- ``"strict"``: :math:`|\\bigcap_i \\mathcal N_i| / |\\bigcup_i \\mathcal N_i|`.

A fact whose CS is below a threshold is *inconsistent knowledge* (the paper's :math:`K_{II}`,
called :math:`K_I` in its v2), which violates KL; the threshold is static (0.3) or Otsu's
(:func:`otsu_threshold`), as in the paper.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import torch

__all__ = ["CONSISTENCY", "kn_sets", "jaccard", "consistency", "otsu_threshold", "classify",
           "cas_scores", "cas_set", "shared_units", "layer_histogram"]

CONSISTENCY = ("pairwise", "strict")


def kn_sets(scores: torch.Tensor, threshold: float = 0.3, max_neurons: int | None = None,
            top_k: int | None = None) -> list[frozenset[int]]:
    """KN set of each prompt: flat unit ids ``layer * d_ff + unit`` whose score exceeds
    ``threshold`` x the prompt's maximum (chapter 05). ``max_neurons`` caps a set at its
    largest scores; ``top_k`` instead takes exactly the ``top_k`` largest (equal-size sets).

    ``scores``: ``(n_prompts, n_layers, d_ff)`` or ``(n_prompts, n_units)``."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1] (a fraction of the maximum), got {threshold}")
    if scores.dim() not in (2, 3):
        raise ValueError(f"scores must be (n_prompts, n_layers, d_ff) or (n_prompts, n_units), "
                         f"got shape {tuple(scores.shape)}")
    flat = scores.reshape(scores.shape[0], -1).float()
    out = []
    for row in flat:
        if top_k is not None:
            idx = torch.topk(row, top_k).indices
        else:
            mx = float(row.max())
            idx = torch.nonzero(row > threshold * mx).flatten() if mx > 0 else torch.empty(0, dtype=torch.long)
            if max_neurons is not None and len(idx) > max_neurons:
                idx = idx[torch.topk(row[idx], max_neurons).indices]
        out.append(frozenset(int(i) for i in idx))
    return out


def jaccard(a: frozenset, b: frozenset) -> float:
    """:math:`|a \\cap b| / |a \\cup b|` (1 for two empty sets)."""
    u = len(a | b)
    return 1.0 if u == 0 else len(a & b) / u


def consistency(sets: Sequence[frozenset], kind: str = "pairwise") -> float:
    """The consistency score of one fact's KN sets (chapter 05; see the module docstring)."""
    if kind not in CONSISTENCY:
        raise ValueError(f"unknown consistency {kind!r}; valid: {', '.join(CONSISTENCY)}")
    sets = list(sets)
    if len(sets) < 2:
        raise ValueError("consistency needs the KN sets of at least two queries")
    if kind == "pairwise":
        return float(np.mean([jaccard(a, b) for a, b in combinations(sets, 2)]))
    inter = frozenset.intersection(*sets)
    union = frozenset.union(*sets)
    return 1.0 if not union else len(inter) / len(union)


def otsu_threshold(values) -> float:
    """Otsu's threshold of 1-D values: the cut between two consecutive sorted distinct values
    (their midpoint) that maximises the between-class variance
    :math:`w_0 w_1 (\\mu_0 - \\mu_1)^2` (chapter 05)."""
    x = np.sort(np.asarray(values, dtype=float).ravel())
    if x.size == 0 or not np.isfinite(x).all():
        raise ValueError("otsu_threshold needs finite values")
    u = np.unique(x)
    if len(u) == 1:
        return float(u[0])
    n = len(x)
    # class 0 = values <= u[j], for each distinct value but the last
    counts = np.searchsorted(x, u[:-1], side="right")
    csum = np.cumsum(x)
    s0 = csum[counts - 1]
    w0 = counts / n
    mu0 = s0 / counts
    mu1 = (csum[-1] - s0) / (n - counts)
    between = w0 * (1 - w0) * (mu0 - mu1) ** 2
    j = int(np.argmax(between))
    return float((u[j] + u[j + 1]) / 2)


def classify(cs, threshold: float) -> np.ndarray:
    """``True`` where a fact is *inconsistent* (CS below ``threshold``: violates KL)."""
    return np.asarray(cs, dtype=float) < threshold


def cas_scores(scores: torch.Tensor, beta1: float = 1.0, beta2: float = 1.0) -> torch.Tensor:
    """Consistency-aware score of each unit over one fact's queries (the paper's Eq. 7,
    :math:`\\mathrm{CAS} = \\beta_1 \\mu - \\beta_2 \\sigma`), with each query's attributions
    first divided by its maximum so that queries weigh alike (chapter 05).

    ``scores``: ``(n_queries, ...)``; returns the shape of one query's scores."""
    if scores.shape[0] < 2:
        raise ValueError("CAS needs the attributions of at least two queries")
    flat = scores.reshape(scores.shape[0], -1).double()
    norm = flat / flat.max(1, keepdim=True).values.clamp(min=1e-30)
    cas = beta1 * norm.mean(0) - beta2 * norm.std(0, unbiased=False)
    return cas.reshape(scores.shape[1:]).float()


def cas_set(scores: torch.Tensor, threshold: float = 0.3, beta1: float = 1.0, beta2: float = 1.0,
            max_neurons: int | None = None) -> frozenset[int]:
    """The consistency-aware KN set: units whose CAS exceeds ``threshold`` x the largest
    (chapter 05)."""
    return kn_sets(cas_scores(scores, beta1, beta2)[None], threshold, max_neurons)[0]


def shared_units(sets_by_fact: Sequence[Sequence[frozenset]], max_share: float = 0.5) -> frozenset[int]:
    """Units that are KNs (of any query) of more than ``max_share`` of the facts: fact-agnostic
    neurons (e.g. ones that raise every capital's name), not knowledge of one fact (chapter 05)."""
    if not 0 < max_share <= 1:
        raise ValueError(f"max_share must be in (0, 1], got {max_share}")
    count: dict[int, int] = {}
    for sets in sets_by_fact:
        for u in frozenset().union(*sets):
            count[u] = count.get(u, 0) + 1
    n = len(sets_by_fact)
    return frozenset(u for u, c in count.items() if c > max_share * n)


def layer_histogram(sets: Sequence[frozenset], n_layers: int, d_ff: int) -> np.ndarray:
    """How many KNs each layer holds, summed over ``sets`` (chapter 05)."""
    h = np.zeros(n_layers, dtype=int)
    for s in sets:
        for u in s:
            h[u // d_ff] += 1
    return h
