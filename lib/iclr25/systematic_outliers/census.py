"""Where outliers sit: token classes, outlier tokens, weight outliers and alignment rates.

Chapter 13 (systematic outliers, Sec. 3 of An et al. 2025). The paper sorts the positions of
outliers into *initial* tokens, *delimiters* (".", ",", newline, ...) and *weak-semantic* tokens
("the", "and", "of", digits, ...), finds weight outliers in ``down_proj`` whose feature
dimension is the activation outliers' dimension, and finds that activation outliers sit where
attention outliers (sinks) sit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn

from .stats import ActivationStats, layer_blocks, site_module

__all__ = ["TOKEN_CLASSES", "DELIMITERS", "WEAK_SEMANTIC", "token_class", "classify_ids",
           "outlier_tokens", "max_token_census", "WeightOutliers", "weight_outliers",
           "dim_alignment", "position_alignment"]

#: The classes :func:`token_class` returns.
TOKEN_CLASSES = ("initial", "delimiter", "weak-semantic", "other")
#: Tokens that count as delimiters once stripped of spaces ("" is a pure whitespace token).
DELIMITERS = frozenset(list(".,;:!?\n") + ["", "-", "(", ")", "\"", "'", "...", "--", ".\n",
                                           ",\"", ".\"", "<|endoftext|>", "<|im_start|>",
                                           "<|im_end|>", "<bos>", "<s>", "</s>"])
#: Function words; digits count as weak-semantic too.
WEAK_SEMANTIC = frozenset("the a an and or of to in on at by for with from as is are was were be "
                          "it its this that which his her their has have had not but".split())


def token_class(text: str, position: int) -> str:
    """The paper's class of a token: ``"initial"`` at position 0, else ``"delimiter"``,
    ``"weak-semantic"`` or ``"other"`` by its text (chapter 13)."""
    if position == 0:
        return "initial"
    s = text.strip()
    if s in DELIMITERS or (s and all(not c.isalnum() for c in s)):
        return "delimiter"
    if s.lower() in WEAK_SEMANTIC or (s and s.isdigit()):
        return "weak-semantic"
    return "other"


def classify_ids(tokenizer, ids: torch.Tensor) -> list[list[str]]:
    """:func:`token_class` of every token of ``(n_seq, T)`` ids (chapter 13)."""
    if hasattr(tokenizer, "decode"):
        dec = lambda i: tokenizer.decode([int(i)])  # noqa: E731
    else:
        raise TypeError("tokenizer needs a decode method")
    cache: dict[int, str] = {}
    out = []
    for row in ids.tolist():
        out.append([token_class(cache.setdefault(t, dec(t)), p) for p, t in enumerate(row)])
    return out


def outlier_tokens(stats: ActivationStats, tokenizer, layer: int, *, tau: float = 1000.0,
                   site: str = "block_out") -> Counter:
    """Count the *activation outlier tokens* of one layer by class.

    Chapter 13. A token is an outlier when its largest magnitude over channels exceeds ``tau``
    times the mean magnitude of its sequence's layer output (the official code's test,
    ``tau = 1000``). Returns a ``Counter`` over :data:`TOKEN_CLASSES` (and ``"tokens"``: how
    many tokens were tested).
    """
    if tau <= 0:
        raise ValueError(f"tau must be positive, got {tau}")
    st = stats[site][layer]
    classes = classify_ids(tokenizer, stats.ids)
    out = Counter({c: 0 for c in TOKEN_CLASSES})
    for s in range(st.token_max.shape[0]):
        for p in np.nonzero(st.token_max[s] > tau * st.mean[s])[0]:
            out[classes[s][p]] += 1
    out["tokens"] = int(st.token_max.size)
    return out


def max_token_census(stats: ActivationStats, tokenizer, layers: Sequence[int], *,
                     site: str = "block_out") -> dict[str, float]:
    """Share of (sequence, layer) pairs whose largest activation sits on each token class.

    Chapter 13 (the "first token or delimiter" claim). Returns shares over
    :data:`TOKEN_CLASSES` that sum to 1.
    """
    classes = classify_ids(tokenizer, stats.ids)
    c = Counter()
    for layer in layers:
        st = stats[site][layer]
        for s, p in enumerate(st.top_token[:, 0]):
            c[classes[s][int(p)]] += 1
    total = sum(c.values())
    return {k: c[k] / total for k in TOKEN_CLASSES}


@dataclass
class WeightOutliers:
    """Weight outliers of each layer's ``down_proj`` (chapter 13).

    Attributes
    ----------
    feature_ratio
        ``(n_layers, d_model)``: for each output feature ``j`` (a column of the paper's
        ``x W`` layout, a row of ``nn.Linear.weight``), ``max_i |W_ji| / mean_i |W_ji|``.
    top_feature, top_neuron, top_value
        ``(n_layers,)``: the largest ``|W|`` entry of the matrix: its output feature (the
        residual dimension it writes), its input neuron and its value.
    top_over_mean
        ``(n_layers,)``: that entry over the matrix's mean ``|W|``.
    """

    feature_ratio: np.ndarray
    top_feature: np.ndarray
    top_neuron: np.ndarray
    top_value: np.ndarray
    top_over_mean: np.ndarray


@torch.no_grad()
def weight_outliers(model: nn.Module) -> WeightOutliers:
    """Column-wise (per output feature) max/mean ratios and the largest entry of every
    ``down_proj`` (chapter 13; TinyGPT: the MLP's last linear layer)."""
    ratios, feats, neurons, vals, rel = [], [], [], [], []
    for block in layer_blocks(model):
        W = site_module(block, "down_in").weight.detach().float()   # (d_model, d_ff)
        A = W.abs()
        ratios.append((A.amax(1) / A.mean(1).clamp(min=1e-30)).numpy())
        i = int(A.argmax())
        f, n = divmod(i, A.shape[1])
        feats.append(f)
        neurons.append(n)
        vals.append(float(W[f, n]))
        rel.append(float(A[f, n] / A.mean()))
    return WeightOutliers(np.stack(ratios), np.array(feats), np.array(neurons), np.array(vals),
                          np.array(rel))


def dim_alignment(weights: WeightOutliers, stats: ActivationStats, layers: Sequence[int], *,
                  site: str = "block_out") -> float:
    """Share of ``layers`` whose largest ``down_proj`` weight writes the residual dimension
    that holds the largest activation (in the majority of sequences) at that layer's output.

    Chapter 13 (the paper's weight/activation alignment in feature dimension).
    """
    hits = []
    for layer in layers:
        ch = stats[site][layer].top_channel[:, 0]
        vals, cnt = np.unique(ch, return_counts=True)
        hits.append(int(weights.top_feature[layer]) == int(vals[cnt.argmax()]))
    return float(np.mean(hits))


def position_alignment(stats: ActivationStats, attn_top_key: dict[int, np.ndarray],
                       layers: Sequence[int], *, site: str = "block_out") -> float:
    """Share of (sequence, layer) pairs whose activation-outlier position (the token of the
    largest activation at layer ``l``'s output) is the attention-outlier position of layer
    ``l + 1`` (the key that receives the most attention there; :func:`sink_stats`' ``top_key``).

    Chapter 13 (the paper's activation/attention alignment in sequence position).
    """
    hits = []
    for layer in layers:
        if layer + 1 not in attn_top_key:
            raise KeyError(f"no attention statistics for layer {layer + 1}")
        act = stats[site][layer].top_token[:, 0]
        att = np.asarray(attn_top_key[layer + 1])
        hits += list(act == att)
    return float(np.mean(hits))
