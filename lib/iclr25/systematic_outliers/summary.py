"""One model's outlier census in one call: the numbers the chapter's claims read.

Chapter 13. ``01-outlier-census`` walks through the census of SmolLM2 step by step; to repeat it
on a second model (Gemma-3-270M base, book profile) :func:`model_census` runs the same steps and
returns the same quantities, plus what a second architecture needs: Gemma 3 normalises the MLP
output again before it enters the residual stream (``post_feedforward_layernorm``), so a
dimension can be written by that norm's gain rather than by a large ``down_proj`` weight.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields

import pandas as pd

import numpy as np
import torch
from torch import nn

from .census import (TOKEN_CLASSES, dim_alignment, max_token_census, outlier_tokens,
                     position_alignment, weight_outliers)
from .sinks import sink_stats
from .stats import activation_stats, layer_blocks

__all__ = ["ModelCensus", "spike_layer", "middle_layers", "post_mlp_gain", "model_census"]


@dataclass
class ModelCensus:
    """What :func:`model_census` returns (chapter 13). Shares are in [0, 1]."""

    n_layers: int
    emerge: int                    # the layer whose output first carries the spike
    outlier_dim: int               # the residual dimension of the largest middle-layer value
    max_over_median_mid: float     # median over middle layers and sequences of max/median
    at_max: dict                   # class of the token holding each (sequence, layer) maximum
    n_outlier_tokens: int          # tokens above tau x mean in the middle layers
    outlier_token_other: float     # share of those tokens that are not initial/delim/weak
    top_weight_feature: int        # the dimension the emerge layer's largest down_proj weight writes
    dim_alignment: float           # over the layers that at least double the top-1 value
    jumps: list
    gain_ratio: float | None       # post-MLP norm gain of outlier_dim over the median gain
    position_alignment: float
    sink_share_mid: float          # attention on token 0 in the middle layers
    median_corr_sink: float        # per head: sink mass vs head-output norm (layers after emerge)
    median_corr_prev: float        # the control: previous-token mass vs head-output norm
    neg_share: float
    n_heads: int
    table: pd.DataFrame = field(repr=False, default=None)   # ActivationStats.table("block_out")
    stats: object = field(repr=False, default=None)         # the ActivationStats (block_out)
    sinks: object = field(repr=False, default=None)         # the SinkStats
    weights: object = field(repr=False, default=None)       # the WeightOutliers

    def as_dict(self) -> dict:
        """The scalar fields as a plain dict (for a table); ``table``, ``stats``, ``sinks`` and
        ``weights`` left out (:mod:`.measures` reads the replicates from them)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("table", "stats", "sinks", "weights")}


def spike_layer(top1: np.ndarray) -> int:
    """The layer whose output's top-1 magnitude jumps most over the previous layer's (>= 1)."""
    top1 = np.asarray(top1, dtype=float)
    if top1.ndim != 1 or len(top1) < 2:
        raise ValueError("need the top-1 value of at least two layers")
    return int(np.argmax(top1[1:] / np.maximum(top1[:-1], 1e-30))) + 1


def middle_layers(n_layers: int) -> list[int]:
    """The middle third of ``n_layers`` layers (the chapter's "middle layers")."""
    if n_layers < 3:
        raise ValueError(f"need at least 3 layers, got {n_layers}")
    return list(range(n_layers // 3, 2 * n_layers // 3))


@torch.no_grad()
def post_mlp_gain(model: nn.Module, layer: int, dim: int) -> float | None:
    """Gain of residual dimension ``dim`` in the norm applied to layer ``layer``'s MLP output,
    over that norm's median gain; ``None`` when the MLP output enters the residual stream
    directly (Llama, SmolLM2, TinyGPT). Gemma's RMSNorm scales by ``1 + weight``."""
    block = layer_blocks(model)[layer]
    norm = getattr(block, "post_feedforward_layernorm", None)
    if norm is None:
        return None
    w = norm.weight.detach().float()
    gain = (1 + w) if "gemma" in type(norm).__name__.lower() else w
    gain = gain.abs()
    return float(gain[dim] / gain.median().clamp(min=1e-30))


def model_census(model: nn.Module, tokenizer, ids, *, k: int = 3, tau: float = 1000.0,
                 min_query: int = 4) -> ModelCensus:
    """Run the census of ``01-outlier-census`` on one model and token batch (chapter 13).

    Activation statistics of the residual stream, the token census of the middle layers, the
    largest ``down_proj`` weights and their alignment with the outlier dimension, attention
    sinks and the per-head sink-mass / output-norm correlation in the layers after the spike.
    """
    stats = activation_stats(model, ids, sites=("block_out",), k=k)
    table = stats.table("block_out")
    n_layers = len(layer_blocks(model))
    top1 = table["top1"].to_numpy()
    emerge, mid = spike_layer(top1), middle_layers(n_layers)
    outlier_dim = int(table.loc[mid, "max_channel"].mode()[0])
    mom = float(np.median([np.median(stats["block_out"][l].max_over_median) for l in mid]))
    counts = sum((outlier_tokens(stats, tokenizer, l, tau=tau) for l in mid), start=Counter())
    n_out = sum(counts[c] for c in TOKEN_CLASSES)
    w = weight_outliers(model)
    jumps = [l for l in range(1, n_layers) if top1[l] > 2 * top1[l - 1]]
    sinks = sink_stats(model, ids, min_query=min_query)
    after = range(emerge + 1, n_layers)
    c_sink = np.concatenate([sinks.corr_sink[l] for l in after]) if emerge + 1 < n_layers else np.array([])
    c_prev = np.concatenate([sinks.corr_prev[l] for l in after]) if emerge + 1 < n_layers else np.array([])
    c_sink, c_prev = c_sink[np.isfinite(c_sink)], c_prev[np.isfinite(c_prev)]
    med = lambda a: float(np.median(a)) if len(a) else float("nan")  # noqa: E731
    return ModelCensus(
        n_layers=n_layers, emerge=emerge, outlier_dim=outlier_dim, max_over_median_mid=mom,
        at_max=max_token_census(stats, tokenizer, mid), n_outlier_tokens=int(n_out),
        outlier_token_other=counts["other"] / n_out if n_out else float("nan"),
        top_weight_feature=int(w.top_feature[emerge]),
        dim_alignment=dim_alignment(w, stats, jumps) if jumps else float("nan"), jumps=jumps,
        gain_ratio=post_mlp_gain(model, emerge, outlier_dim),
        position_alignment=position_alignment(stats, sinks.top_key, mid),
        sink_share_mid=float(np.mean([sinks.share[l].mean() for l in mid])),
        median_corr_sink=med(c_sink), median_corr_prev=med(c_prev),
        neg_share=float((c_sink < 0).mean()) if len(c_sink) else float("nan"),
        n_heads=int(len(c_sink)), table=table, stats=stats, sinks=sinks, weights=w)
