"""Resetting activation outliers (to their mean or to zero) and what it costs in perplexity.

Chapter 13 (the official ``lib/hook.py`` experiment; Sun et al. 2024 first ran it): the massive
activations are nearly constant. Setting them to their mean leaves the model as it was; setting
them to zero breaks it, so they act as fixed biases (the paper reads them as the scale knobs of
attention).
"""

from __future__ import annotations

import contextlib
from typing import Sequence

import torch
from torch import nn

from .stats import _check_ids

__all__ = ["MODES", "outlier_means", "reset_outliers"]

#: What :func:`reset_outliers` writes into the outlier entries.
MODES = ("mean", "zero")


def _dims(dims) -> list[int]:
    dims = [dims] if isinstance(dims, int) else [int(d) for d in dims]
    if not dims:
        raise ValueError("dims must name at least one channel")
    return dims


@torch.no_grad()
def outlier_means(model: nn.Module, ids, layer: int, dims: int | Sequence[int], threshold: float,
                  *, batch_size: int = 4) -> torch.Tensor:
    """Mean value of each of ``dims`` over the tokens where its magnitude exceeds ``threshold``
    at the output of decoder layer ``layer`` (chapter 13). ``(len(dims),)``; raises when a
    dim never exceeds the threshold."""
    from ..lm import capture_residual

    ids = _check_ids(ids)
    dims = _dims(dims)
    total = torch.zeros(len(dims), dtype=torch.float64)
    count = torch.zeros(len(dims), dtype=torch.float64)
    with capture_residual(model, layers=[layer]) as rec:
        for start in range(0, ids.shape[0], batch_size):
            model(input_ids=ids[start:start + batch_size], use_cache=False)
            x = rec[layer][..., dims].double().reshape(-1, len(dims))
            hit = x.abs() > threshold
            total += (x * hit).sum(0)
            count += hit.sum(0)
    if (count == 0).any():
        missing = [d for d, c in zip(dims, count.tolist()) if c == 0]
        raise ValueError(f"dims {missing} never exceed {threshold} at layer {layer}'s output; "
                         "lower the threshold or pick the outlier dims from activation_stats")
    return (total / count).float()


@contextlib.contextmanager
def reset_outliers(model: nn.Module, layer: int, dims: int | Sequence[int], mode: str,
                   threshold: float, *, means: torch.Tensor | None = None):
    """Inside the block, entries of ``dims`` whose magnitude exceeds ``threshold`` at the output of
    decoder layer ``layer`` are set to ``means`` (``mode="mean"``) or to 0 (``"zero"``).

    Chapter 13. The entries are found anew in every forward pass (whatever token holds the
    outlier), so the same edit applies to any text. Yields the
    :class:`iclr25.lm.Intervention` (``.calls`` counts the edited passes) with an extra
    attribute ``n_reset``: how many entries were overwritten.
    """
    from ..lm import intervene

    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; valid: {', '.join(MODES)}")
    dims = _dims(dims)
    if mode == "mean":
        if means is None:
            raise ValueError("mode='mean' needs means= (see outlier_means)")
        means = torch.as_tensor(means, dtype=torch.float32).reshape(-1)
        if means.numel() != len(dims):
            raise ValueError(f"means has {means.numel()} values for {len(dims)} dims")
    counter = {"n": 0}

    def edit(x):
        out = x.clone()
        sub = out[..., dims]
        hit = sub.abs() > threshold
        counter["n"] += int(hit.sum())
        new = torch.zeros_like(sub) if mode == "zero" else means.to(sub).expand_as(sub)
        out[..., dims] = torch.where(hit, new, sub)
        return out

    with intervene(model, "resid_post", edit, layers=[layer]) as iv:
        iv.counter = counter
        yield iv
