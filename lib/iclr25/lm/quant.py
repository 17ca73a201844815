"""Compression probes: simulated ("fake") weight quantisation and magnitude pruning.

Part of the shared core (:mod:`iclr25.lm`). Chapter 13 (systematic outliers) measures how
quantisation and pruning hurt a model with and without its outliers; both act in place on the
``nn.Linear`` layers inside the decoder layers (embeddings and the LM head are left alone unless
``modules`` names them). Keep a copy (``copy.deepcopy(model)``) when the original is needed.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from .hooks import decoder_layers

__all__ = ["fake_quant", "magnitude_prune", "GRANULARITIES"]

#: How :func:`fake_quant` groups weights under one scale.
GRANULARITIES = ("tensor", "channel", "group")


def _linears(model: nn.Module, modules: Iterable[nn.Module] | None) -> list[nn.Linear]:
    if modules is not None:
        mods = list(modules)
        for m in mods:
            if not hasattr(m, "weight") or not isinstance(getattr(m, "weight"), torch.Tensor):
                raise TypeError(f"{type(m).__name__} has no weight tensor to compress")
        return mods
    out = []
    for block in decoder_layers(model):
        out += [m for m in block.modules() if isinstance(m, nn.Linear)]
    return out


def _quantize(w: torch.Tensor, bits: int, granularity: str, group_size: int) -> torch.Tensor:
    """Symmetric round-to-nearest: ``q = clamp(round(w / s), -2^(b-1), 2^(b-1) - 1)``, ``w' = q s``,
    with ``s = max|w| / (2^(b-1) - 1)`` over the tensor, each output channel (row) or each
    group of ``group_size`` consecutive inputs of a row."""
    qmax = 2 ** (bits - 1) - 1
    x = w.detach().float()
    if granularity == "tensor":
        view = x.reshape(1, -1)
    elif granularity == "channel":
        view = x.reshape(x.shape[0], -1)
    else:
        if x.shape[-1] % group_size:
            raise ValueError(f"group_size {group_size} does not divide the input size "
                             f"{x.shape[-1]}")
        view = x.reshape(-1, group_size)
    scale = view.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / qmax
    q = torch.clamp(torch.round(view / scale), -qmax - 1, qmax)
    return (q * scale).reshape(w.shape).to(w.dtype)


@torch.no_grad()
def fake_quant(model: nn.Module, bits: int, granularity: str = "channel", *,
               group_size: int = 64, modules: Iterable[nn.Module] | None = None) -> nn.Module:
    """Round the weights of the linear layers to ``bits``-bit integers and back (in place).

    Part of the shared core (chapter 13). Symmetric round-to-nearest with one scale per
    ``granularity``: ``"tensor"``, ``"channel"`` (each output row) or ``"group"`` (each
    ``group_size`` inputs of a row). The model still runs in float; its weights take at most
    ``2^bits`` values per scale group, which is what an integer kernel would compute with.
    Returns ``model``.
    """
    if not isinstance(bits, int) or not 2 <= bits <= 16:
        raise ValueError(f"bits must be an integer in [2, 16], got {bits!r}")
    if granularity not in GRANULARITIES:
        raise ValueError(f"unknown granularity {granularity!r}; valid: {', '.join(GRANULARITIES)}")
    for m in _linears(model, modules):
        m.weight.copy_(_quantize(m.weight, bits, granularity, group_size))
    return model


@torch.no_grad()
def magnitude_prune(model: nn.Module, sparsity: float, *, scope: str = "layer",
                    modules: Iterable[nn.Module] | None = None) -> float:
    """Zero the smallest-magnitude weights of the linear layers (in place).

    Part of the shared core (chapter 13). ``scope="layer"`` prunes ``sparsity`` of each
    weight matrix; ``"global"`` one threshold over all of them. Returns the fraction of weights
    that are zero afterwards (ties at the threshold are broken by position, so the fraction is
    exact up to one weight per matrix).
    """
    if not 0 <= sparsity < 1:
        raise ValueError(f"sparsity must be in [0, 1), got {sparsity!r}")
    if scope not in ("layer", "global"):
        raise ValueError(f"unknown scope {scope!r}; valid: 'layer', 'global'")
    mods = _linears(model, modules)
    if scope == "global":
        flat = torch.cat([m.weight.detach().abs().reshape(-1).float() for m in mods])
        k = int(round(sparsity * flat.numel()))
        if k:
            order = flat.argsort()
            mask = torch.ones_like(flat, dtype=torch.bool)
            mask[order[:k]] = False
            start = 0
            for m in mods:
                n = m.weight.numel()
                m.weight.mul_(mask[start:start + n].view_as(m.weight).to(m.weight.dtype))
                start += n
    else:
        for m in mods:
            w = m.weight
            k = int(round(sparsity * w.numel()))
            if k:
                idx = w.detach().abs().reshape(-1).argsort()[:k]
                w.view(-1)[idx] = 0
    zeros = sum(int((m.weight == 0).sum()) for m in mods)
    return zeros / sum(m.weight.numel() for m in mods)
