"""Small helpers shared by the modules of :mod:`iclr25.lm` (not public)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from functools import lru_cache

import torch
from torch import nn


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@lru_cache(maxsize=None)
def _cache_kw_for(cls: type) -> str:
    """``transformers`` 5.x renamed ``past_key_values`` to ``cache``; use whichever the model takes."""
    try:
        params = inspect.signature(cls.forward).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def head_dim(model: nn.Module, attn: nn.Module) -> int:
    """The attention head size: the module's ``head_dim``, else the config's, else
    ``hidden_size // num_attention_heads``."""
    d = getattr(attn, "head_dim", None)
    if d is None:
        cfg = model.config
        d = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return int(d)


def cache_kwarg(model: nn.Module) -> str:
    return _cache_kw_for(type(model))


def output_cache(out):
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def new_cache(model: nn.Module):
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # pragma: no cover - older transformers
        return DynamicCache()


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding: ``cumsum(mask) - 1``, 0 on the padding itself."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def pad_id(tokenizer) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is None:
        pad = getattr(tokenizer, "eos_token_id", None)
    return 0 if pad is None else int(pad)


def pad_batch(seqs: Sequence[Sequence[int]], pad: int, *, left: bool,
              device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)`` of shape ``(len(seqs), max_len)``, padded on one side."""
    n = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), n), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, s in enumerate(seqs):
        if not len(s):
            continue
        t = torch.as_tensor(list(s), dtype=torch.long)
        if left:
            ids[i, n - len(s):] = t
            mask[i, n - len(s):] = 1
        else:
            ids[i, :len(s)] = t
            mask[i, :len(s)] = 1
    return ids.to(device), mask.to(device)


def check_texts(texts, what: str = "texts") -> list[str]:
    if isinstance(texts, str):
        raise TypeError(f"{what} must be a list of strings, not one string (wrap it: [{texts!r}])")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{what}[{i}] must be a string, not {type(t).__name__}")
    return texts


def check_batch_size(batch_size) -> int:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    return batch_size
