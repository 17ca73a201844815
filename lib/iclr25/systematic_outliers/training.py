"""Training the attention variants with one budget, and measuring their outliers and compression.

Chapter 13. Every variant sees the same batches in the same order (one ``seed``), starts from the
same shared weights (:func:`~.variants.make_gpt`) and runs the same optimiser, schedule and
number of steps: only the attention differs.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import tinygpt
from ..lm import fake_quant, magnitude_prune
from .sinks import sink_stats
from .stats import activation_stats
from .variants import gpt_linears, make_gpt

__all__ = ["VariantRun", "train_variant", "outlier_summary", "gpt_perplexity", "compress",
           "COMPRESSIONS", "eval_windows"]

#: The compressions :func:`compress` applies.
COMPRESSIONS = ("w8_tensor", "prune50")


@dataclass
class VariantRun:
    """A trained variant: ``model``, the training ``history`` of :func:`iclr25.tinygpt.train`."""

    variant: str
    model: nn.Module
    history: dict[str, Any]


def train_variant(variant: str, cfg: tinygpt.TinyGPTConfig, train_data: torch.Tensor, *,
                  n_steps: int, batch_size: int, lr: float, seq_len: int, seed: int = 0,
                  warmup: int = 0, val_data: torch.Tensor | None = None,
                  eval_every: int | None = None, desc: str | None = None,
                  bias: bool = True) -> VariantRun:
    """Train :func:`make_gpt` ``(cfg, variant, seed=seed)`` on ``train_data`` with AdamW and a
    cosine schedule (GPT-2's betas, weight decay and clipping; chapter 13). ``bias=False``: no
    biases anywhere (the official configuration; :func:`~.variants.make_gpt`)."""
    model = make_gpt(cfg, variant, seed=seed, bias=bias)
    hist = tinygpt.train(model, train_data, n_steps=n_steps, batch_size=batch_size, lr=lr,
                         seq_len=seq_len, seed=seed, warmup=warmup, val_data=val_data,
                         eval_every=eval_every, desc=desc or variant)
    return VariantRun(variant, model, hist)


def eval_windows(data: torch.Tensor, seq_len: int, n: int, *, seed: int = 1) -> torch.Tensor:
    """``(n, seq_len + 1)`` windows of a token stream at seeded random offsets (chapter 13)."""
    if data.numel() < seq_len + 2:
        raise ValueError(f"a stream of {data.numel()} tokens is too short for seq_len={seq_len}")
    g = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, data.numel() - seq_len - 1, (n,), generator=g)
    return torch.stack([data[s:s + seq_len + 1] for s in starts.tolist()])


@torch.no_grad()
def gpt_perplexity(model: nn.Module, windows: torch.Tensor, *, batch_size: int = 16) -> float:
    """Perplexity of a TinyGPT on ``(n, T + 1)`` windows: ``exp`` of the mean next-token NLL
    (chapter 13)."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, windows.shape[0], batch_size):
        w = windows[start:start + batch_size]
        logits = model(w[:, :-1])
        nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                w[:, 1:].reshape(-1), reduction="sum")
        total += float(nll)
        count += w[:, 1:].numel()
    return math.exp(total / count)


@torch.no_grad()
def outlier_summary(model: nn.Module, ids: torch.Tensor, *, min_query: int = 4) -> dict[str, Any]:
    """Per layer: median over sequences of max/median |activation| at the block outputs, the
    kurtosis, and the mean attention share on position 0 (chapter 13). Also the worst layer's
    values: ``max_over_median`` (largest over layers) and ``sink_share`` (largest over layers)."""
    st = activation_stats(model, ids, sites=("block_out",), k=1)
    sk = sink_stats(model, ids, min_query=min_query)
    layers = st.layers
    mom = [float(np.median(st["block_out"][l].max_over_median)) for l in layers]
    kur = [st["block_out"][l].kurtosis for l in layers]
    share = [float(sk.share[l].mean()) for l in layers]
    return {"layers": layers, "max_over_median_per_layer": mom, "kurtosis_per_layer": kur,
            "sink_share_per_layer": share, "max_over_median": max(mom), "kurtosis": max(kur),
            "sink_share": max(share)}


def compress(model: nn.Module, how: str) -> nn.Module:
    """A compressed copy: ``"w8_tensor"`` (absmax round-to-nearest, one scale per weight matrix,
    :func:`iclr25.lm.fake_quant`) or ``"prune50"`` (half of each matrix's weights, the smallest
    in magnitude, set to zero, :func:`iclr25.lm.magnitude_prune`). Chapter 13."""
    if how not in COMPRESSIONS:
        raise ValueError(f"unknown compression {how!r}; valid: {', '.join(COMPRESSIONS)}")
    out = copy.deepcopy(model)
    mods = gpt_linears(out)
    if how == "w8_tensor":
        fake_quant(out, 8, "tensor", modules=mods)
    else:
        magnitude_prune(out, 0.5, scope="layer", modules=mods)
    return out
