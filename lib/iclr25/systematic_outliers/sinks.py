"""Attention outliers (sinks) and the paper's reading of them as context-aware scaling.

Chapter 13. Softmax attention must put a total weight of 1 on the keys. A head that has nothing
to add for a query parks the weight on a token whose value vector is small (the *sink*: the
first token or a delimiter carrying a massive activation), which scales its output down. So,
per head, the more attention a query gives the sink, the smaller the head's output should be:
a negative correlation between the sink mass ``A[q, 0]`` and ``||o_h(q)||``. This module measures
that on a pretrained model with forward hooks and no training, and the sink shares per layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import torch
from torch import nn

from .stats import _check_ids, _resolve, decoder_body, layer_blocks

__all__ = ["SinkStats", "sink_stats", "attention_maps_stats", "key_share"]


@dataclass
class SinkStats:
    """What :func:`sink_stats` returns (chapter 13). Dicts keyed by layer.

    Attributes
    ----------
    share
        ``(n_seq, H)``: mean attention on position 0 over queries ``q >= min_query``.
    top_key
        ``(n_seq,)``: the key that receives the most attention (mean over heads and over the
        queries that can see it): the attention-outlier position.
    corr_sink, corr_prev
        ``(H,)``: per head, the Pearson correlation over all (sequence, query) pairs between the
        head's output norm ``||o_h(q)||`` and the attention on the sink (position 0), and, as a
        control, on the previous token ``q - 1``.
    share1
        ``(n_seq, H)``: mean attention on position 1 over the same queries (the control of the
        "attention follows the outlier" claim).
    """

    share: dict[int, np.ndarray]
    top_key: dict[int, np.ndarray]
    corr_sink: dict[int, np.ndarray]
    corr_prev: dict[int, np.ndarray]
    share1: dict[int, np.ndarray] | None = None   # (n_seq, H): the same as share, on position 1


class _Corr:
    """Streaming Pearson correlation per head: sums of a, b, a^2, b^2, ab."""

    def __init__(self) -> None:
        self.s = None

    def add(self, a: torch.Tensor, b: torch.Tensor) -> None:   # (N, H) each
        a, b = a.double(), b.double()
        parts = torch.stack([torch.full_like(a[0], a.shape[0]), a.sum(0), b.sum(0),
                             (a * a).sum(0), (b * b).sum(0), (a * b).sum(0)])
        self.s = parts if self.s is None else self.s + parts

    def value(self) -> np.ndarray:
        n, sa, sb, saa, sbb, sab = self.s
        cov = sab / n - sa * sb / n ** 2
        va, vb = saa / n - (sa / n) ** 2, sbb / n - (sb / n) ** 2
        return (cov / (va * vb).clamp(min=1e-300).sqrt()).numpy()


def attention_maps_stats(A: torch.Tensor, head_norm: torch.Tensor | None, min_query: int):
    """Reduce one layer's attention ``A`` ``(B, H, T, T)`` (and head output norms ``(B, T, H)``):
    returns sink share ``(B, H)``, top key ``(B,)`` and the (sink, prev, norm) samples
    ``(N, H)`` for the correlations (chapter 13). The share on position 1 is
    :func:`key_share` ``(A, 1, min_query)``."""
    B, H, T, _ = A.shape
    if not 1 <= min_query < T:
        raise ValueError(f"min_query must be in [1, {T - 1}] for sequences of {T} tokens")
    A = A.detach().float()
    share = A[:, :, min_query:, 0].mean(-1)
    # mean attention each key receives from the queries that can see it (q >= k)
    seen = torch.arange(T, 0, -1, dtype=torch.float32, device=A.device)
    received = A.sum(2).mean(1) / seen                                   # (B, T)
    top = received.argmax(-1)
    samples = None
    if head_norm is not None:
        q = torch.arange(min_query, T, device=A.device)
        sink = A[:, :, min_query:, 0].permute(0, 2, 1).reshape(-1, H)
        prev = A[:, :, q, q - 1].permute(0, 2, 1).reshape(-1, H)
        norm = head_norm[:, min_query:, :].reshape(-1, H).float()
        samples = (sink, prev, norm)
    return share, top, samples


def key_share(A: torch.Tensor, key: int, min_query: int) -> torch.Tensor:
    """``(B, H)``: mean attention on ``key`` over queries ``q >= min_query`` of ``A`` ``(B, H, T, T)``."""
    return A.detach().float()[:, :, min_query:, key].mean(-1)


def _set_attn(model: nn.Module, impl):
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:  # pragma: no cover
        model.config._attn_implementation = impl


@torch.no_grad()
def sink_stats(model: nn.Module, ids, *, layers: int | Iterable[int] | None = None,
               min_query: int = 4, batch_size: int = 4) -> SinkStats:
    """Sink shares, attention-outlier positions and the sink-mass/output-norm correlation.

    Chapter 13. For a ``transformers`` model, attention runs eagerly inside the call (fused
    kernels never form the probabilities) and each layer's map is reduced in a hook as soon as
    it is computed. For a TinyGPT (any attention from :mod:`.variants`), the maps come from
    ``model(ids, return_attn=True)`` and the head outputs from a pre-hook on ``attn.proj``.

    Parameters
    ----------
    ids
        ``(n_seq, T)`` token ids.
    min_query
        Queries before this position are left out (the first queries can only attend to the
        first tokens, which makes their sink share large by construction).
    """
    ids = _check_ids(ids)
    chosen = _resolve(model, layers)
    blocks = layer_blocks(model)
    out = {n: {layer: [] for layer in chosen} for n in ("share", "top", "share1")}
    corr = {layer: (_Corr(), _Corr()) for layer in chosen}
    norms: dict[int, torch.Tensor] = {}

    def consume(layer, A):
        share, top, samples = attention_maps_stats(A, norms.pop(layer, None), min_query)
        out["share"][layer].append(share.cpu())
        out["top"][layer].append(top.cpu())
        out["share1"][layer].append(key_share(A, 1, min_query).cpu())
        if samples is not None:
            sink, prev, norm = samples
            corr[layer][0].add(sink, norm)
            corr[layer][1].add(prev, norm)

    tiny = hasattr(model, "blocks")
    handles = []
    config = getattr(model, "config", None)
    previous = getattr(config, "_attn_implementation", None) if not tiny else None
    device = next(model.parameters()).device
    try:
        for layer in chosen:
            attn = blocks[layer].attn if tiny else blocks[layer].self_attn
            o_proj = attn.proj if tiny else attn.o_proj
            n_heads = attn.n_heads if tiny else model.config.num_attention_heads

            def pre(mod, args, layer=layer, H=n_heads):
                x = args[0]
                norms[layer] = x.reshape(*x.shape[:-1], H, -1).norm(dim=-1)   # (B, T, H)
            handles.append(o_proj.register_forward_pre_hook(pre))
            if not tiny:
                handles.append(attn.register_forward_hook(
                    lambda mod, args, o, layer=layer: consume(layer, o[1])))
        if not tiny and previous not in (None, "eager"):
            _set_attn(model, "eager")
        for start in range(0, ids.shape[0], batch_size):
            x = ids[start:start + batch_size].to(device)
            if tiny:
                _, maps = model(x, return_attn=True)
                for layer in chosen:
                    consume(layer, maps[layer])
            else:
                decoder_body(model)(input_ids=x, use_cache=False, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
        if not tiny and previous not in (None, "eager"):
            _set_attn(model, previous)
    return SinkStats(share={k: torch.cat(v).numpy() for k, v in out["share"].items()},
                     top_key={k: torch.cat(v).numpy() for k, v in out["top"].items()},
                     corr_sink={k: c[0].value() for k, c in corr.items()},
                     corr_prev={k: c[1].value() for k, c in corr.items()},
                     share1={k: torch.cat(v).numpy() for k, v in out["share1"].items()})
