"""Streaming activation statistics: per layer and per sequence, computed inside forward hooks.

Chapter 13 (systematic outliers). The official analysis keeps every layer's output
(``output_hidden_states=True``) and sorts the whole flattened tensor of each layer to read its
top values and its median. Here each hook reduces the activation it sees at once and keeps only

- the top-``k`` magnitudes of each sequence with their token position and channel
  (``torch.topk`` over the flattened ``(T, D)`` slice),
- the median magnitude (``torch.median``, selection, not a sort) and the mean magnitude,
- each token's largest magnitude over channels (``T`` numbers, for the census),
- each channel's running sum of squares (for the kurtosis of He et al. 2024),

so memory is ``O(k + T + D)`` per layer instead of ``O(T D)``, and nothing is sorted.
:func:`activation_stats_reference` computes the same numbers the official way (hidden states, then
``torch.sort``); the tests and ``benchmarks/bench_systematic_outliers.py`` check that both agree.

Sites
-----
``"block_out"``
    the residual stream leaving decoder layer ``l`` (``hidden_states[l + 1]``).
``"down_in"``
    the MLP's hidden units, the input of ``down_proj`` (where the paper finds the activation
    that a weight outlier turns into the massive residual activation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import torch
from torch import nn

__all__ = ["SITES", "LayerStats", "ActivationStats", "activation_stats", "activation_stats_reference",
           "layer_blocks", "site_module", "kurtosis", "token_batch"]

SITES = ("block_out", "down_in")


def layer_blocks(model: nn.Module) -> nn.ModuleList:
    """The decoder layers of a ``transformers`` causal LM or the blocks of a :class:`TinyGPT`.

    Chapter 13. ``transformers`` models: ``model.model.layers`` (see
    :func:`iclr25.lm.decoder_layers`); TinyGPT: ``model.blocks``.
    """
    blocks = getattr(model, "blocks", None)
    if isinstance(blocks, nn.ModuleList):
        return blocks
    from ..lm import decoder_layers

    return decoder_layers(model)


def site_module(block: nn.Module, site: str) -> nn.Module:
    """The module whose output (``block_out``) or input (``down_in``) a site reads.

    Chapter 13. ``down_in`` is the input of ``mlp.down_proj`` (Llama/Gemma) or of the MLP's
    last linear layer (TinyGPT's ``mlp[2]``).
    """
    if site not in SITES:
        raise ValueError(f"unknown site {site!r}; valid sites: {', '.join(SITES)}")
    if site == "block_out":
        return block
    mlp = getattr(block, "mlp", None)
    down = getattr(mlp, "down_proj", None)
    if down is None and isinstance(mlp, nn.Sequential):
        linears = [m for m in mlp if isinstance(m, nn.Linear)]
        down = linears[-1] if linears else None
    if down is None:
        raise TypeError(f"{type(block).__name__} has no mlp.down_proj (nor an nn.Sequential MLP)")
    return down


def kurtosis(channel_sumsq: np.ndarray, n_tokens: int) -> float:
    """Kurtosis of the channels' RMS, ``mean(s^4) / mean(s^2)^2`` with ``s_j = sqrt(mean_t x_tj^2)``.

    Chapter 13; the outlier-feature metric of He et al. (2024, "Understanding and minimising
    outlier features"). It is 1 when every channel has the same RMS and grows with a few loud
    channels (``D`` when one channel carries everything).
    """
    s2 = np.asarray(channel_sumsq, dtype=np.float64) / max(int(n_tokens), 1)
    m2 = s2.mean()
    return float((s2 ** 2).mean() / m2 ** 2) if m2 > 0 else float("nan")


@dataclass
class LayerStats:
    """One layer's statistics at one site, one row per sequence (chapter 13).

    Attributes
    ----------
    topk
        ``(n_seq, k)`` largest magnitudes, descending.
    top_token, top_channel
        ``(n_seq, k)`` position and channel of each of them.
    median, mean
        ``(n_seq,)`` median and mean magnitude over the sequence's ``T x D`` values
        (``torch.median``: the lower median, the ``(n - 1) // 2``-th smallest).
    token_max
        ``(n_seq, T)`` each token's largest magnitude over channels.
    channel_sumsq, n_tokens
        Each channel's sum of squares over all tokens seen and how many tokens that was.
    """

    topk: np.ndarray
    top_token: np.ndarray
    top_channel: np.ndarray
    median: np.ndarray
    mean: np.ndarray
    token_max: np.ndarray
    channel_sumsq: np.ndarray
    n_tokens: int

    @property
    def max_over_median(self) -> np.ndarray:
        """``(n_seq,)`` largest magnitude over the median magnitude."""
        return self.topk[:, 0] / np.maximum(self.median, 1e-30)

    @property
    def max_over_mean(self) -> np.ndarray:
        """``(n_seq,)`` largest magnitude over the mean magnitude (the paper's outlier test uses
        1000 x mean)."""
        return self.topk[:, 0] / np.maximum(self.mean, 1e-30)

    @property
    def kurtosis(self) -> float:
        """See :func:`kurtosis`."""
        return kurtosis(self.channel_sumsq, self.n_tokens)


@dataclass
class ActivationStats:
    """What :func:`activation_stats` returns: ``stats[site][layer]`` is a :class:`LayerStats`.

    Chapter 13. ``ids`` are the token ids the statistics were computed on.
    """

    sites: dict[str, dict[int, LayerStats]]
    ids: torch.Tensor
    k: int
    layers: list[int] = field(default_factory=list)

    def __getitem__(self, site: str) -> dict[int, LayerStats]:
        if site not in self.sites:
            raise KeyError(f"site {site!r} was not recorded; recorded: {', '.join(self.sites)}")
        return self.sites[site]

    def table(self, site: str = "block_out"):
        """A per-layer ``pandas.DataFrame``: top-1/2/3 and median magnitudes averaged over
        sequences (the paper's Fig. 10/23 quantities), max/median, kurtosis, and the most
        frequent token position and channel of the maximum."""
        import pandas as pd

        rows = []
        for layer, st in sorted(self[site].items()):
            row = {"layer": layer}
            for j in range(min(3, st.topk.shape[1])):
                row[f"top{j + 1}"] = float(st.topk[:, j].mean())
            pos, cnt = np.unique(st.top_token[:, 0], return_counts=True)
            ch, chc = np.unique(st.top_channel[:, 0], return_counts=True)
            row.update(median=float(st.median.mean()),
                       max_over_median=float(np.median(st.max_over_median)),
                       kurtosis=st.kurtosis, max_token=int(pos[cnt.argmax()]),
                       max_channel=int(ch[chc.argmax()]))
            rows.append(row)
        return pd.DataFrame(rows).set_index("layer")


class _Accumulator:
    def __init__(self, k: int) -> None:
        self.k = k
        self.parts: dict[str, list] = {n: [] for n in ("topk", "tok", "ch", "median", "mean", "tmax")}
        self.sumsq: torch.Tensor | None = None
        self.n_tokens = 0

    @torch.no_grad()
    def add(self, x: torch.Tensor) -> None:
        x = x.detach()
        B, T, D = x.shape
        a = x.abs().float().reshape(B, T * D)
        k = min(self.k, T * D)
        vals, idx = a.topk(k, dim=1)                       # the top-k without a full sort
        self.parts["topk"].append(vals.cpu())
        self.parts["tok"].append((idx // D).cpu())
        self.parts["ch"].append((idx % D).cpu())
        self.parts["median"].append(a.median(dim=1).values.cpu())   # selection, O(T D)
        self.parts["mean"].append(a.mean(dim=1).cpu())
        self.parts["tmax"].append(a.view(B, T, D).amax(-1).cpu())
        sq = x.double().pow(2).sum((0, 1)).cpu()
        self.sumsq = sq if self.sumsq is None else self.sumsq + sq
        self.n_tokens += B * T

    def result(self) -> LayerStats:
        cat = {n: torch.cat(v).numpy() for n, v in self.parts.items()}
        return LayerStats(topk=cat["topk"], top_token=cat["tok"], top_channel=cat["ch"],
                          median=cat["median"], mean=cat["mean"], token_max=cat["tmax"],
                          channel_sumsq=self.sumsq.numpy(), n_tokens=self.n_tokens)


def _check_ids(ids) -> torch.Tensor:
    if not isinstance(ids, torch.Tensor):
        ids = torch.as_tensor(ids)
    if ids.dim() == 1:
        ids = ids[None]
    if ids.dim() != 2 or ids.dtype not in (torch.int64, torch.int32) or ids.numel() == 0:
        raise ValueError("ids must be a non-empty (n_seq, T) integer tensor of token ids of equal "
                         "length (see token_batch)")
    return ids.long()


def _resolve_sites(sites) -> list[str]:
    sites = [sites] if isinstance(sites, str) else list(sites)
    bad = [s for s in sites if s not in SITES]
    if bad or not sites:
        raise ValueError(f"unknown site(s) {bad}; valid sites: {', '.join(SITES)}")
    return sites


def _resolve(model, layers) -> list[int]:
    n = len(layer_blocks(model))
    chosen = list(range(n)) if layers is None else [layers] if isinstance(layers, int) else list(layers)
    for layer in chosen:
        if not isinstance(layer, (int, np.integer)) or not -n <= layer < n:
            raise IndexError(f"layer {layer!r} out of range for a model with {n} layers")
    return sorted({int(layer) % n for layer in chosen})


def decoder_body(model: nn.Module) -> nn.Module:
    """The decoder stack of a ``transformers`` causal LM without its LM head (``base_model``);
    hooks on the decoder layers fire the same, and the statistics passes skip the head's
    ``T x vocab`` matrix product (262k columns for Gemma 3)."""
    body = getattr(model, "base_model", model)
    return body if isinstance(body, nn.Module) and body is not model and \
        hasattr(body, "layers") else model


def _forward(model: nn.Module, ids: torch.Tensor, *, body: bool = False, **kw):
    if hasattr(model, "config") and not hasattr(model, "blocks"):
        return (decoder_body(model) if body else model)(input_ids=ids, use_cache=False, **kw)
    return model(ids)


@torch.no_grad()
def activation_stats(model: nn.Module, ids, *, sites: str | Sequence[str] = ("block_out",),
                     layers: int | Iterable[int] | None = None, k: int = 3,
                     batch_size: int = 4) -> ActivationStats:
    """Per-layer outlier statistics of ``model`` on ``ids``, reduced inside forward hooks.

    Chapter 13 (the fast path; :func:`activation_stats_reference` is the official route).

    Parameters
    ----------
    model
        A ``transformers`` causal LM or a :class:`iclr25.tinygpt.TinyGPT` (with any attention).
    ids
        ``(n_seq, T)`` token ids (:func:`token_batch` builds them from texts).
    sites
        Any of :data:`SITES`.
    layers
        Layer numbers (``None``: all).
    k
        How many of the largest magnitudes to keep per sequence.
    batch_size
        Sequences per forward pass.
    """
    ids = _check_ids(ids)
    sites = _resolve_sites(sites)
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    chosen = _resolve(model, layers)
    blocks = layer_blocks(model)
    acc = {s: {layer: _Accumulator(k) for layer in chosen} for s in sites}
    handles = []
    try:
        for s in sites:
            for layer in chosen:
                mod = site_module(blocks[layer], s)
                a = acc[s][layer]
                if s == "block_out":
                    handles.append(mod.register_forward_hook(
                        lambda m, args, out, a=a: a.add(out[0] if isinstance(out, (tuple, list)) else out)))
                else:
                    handles.append(mod.register_forward_pre_hook(lambda m, args, a=a: a.add(args[0])))
        device = next(model.parameters()).device
        for start in range(0, ids.shape[0], batch_size):
            _forward(model, ids[start:start + batch_size].to(device), body=True)
    finally:
        for h in handles:
            h.remove()
    return ActivationStats({s: {layer: acc[s][layer].result() for layer in chosen} for s in sites},
                           ids=ids, k=k, layers=chosen)


@torch.no_grad()
def activation_stats_reference(model: nn.Module, ids, *, layers: Iterable[int] | None = None,
                               k: int = 3, batch_size: int = 4) -> ActivationStats:
    """The same statistics the official way: keep every hidden state, sort each layer's tensor.

    Chapter 13 (the reference path). ``transformers`` models only, site ``block_out`` only;
    the last decoder layer is left out, because ``hidden_states[-1]`` is taken *after* the
    final norm (see :mod:`iclr25.lm`), so its default layers are ``0 .. n_layers - 2``.
    Ties among equal magnitudes may be ordered differently from :func:`activation_stats`.
    """
    ids = _check_ids(ids)
    n = len(layer_blocks(model))
    chosen = list(range(n - 1)) if layers is None else _resolve(model, layers)
    if n - 1 in chosen:
        raise ValueError(f"the reference path cannot read layer {n - 1}: hidden_states[-1] is "
                         "after the final norm; use layers < n_layers - 1")
    acc = {layer: _Accumulator(k) for layer in chosen}
    device = next(model.parameters()).device
    for start in range(0, ids.shape[0], batch_size):
        hs = _forward(model, ids[start:start + batch_size].to(device),
                      output_hidden_states=True).hidden_states
        for layer in chosen:
            x = hs[layer + 1].cpu()                        # the official code copies to CPU
            B, T, D = x.shape
            a = x.abs().float().reshape(B, T * D)
            srt, order = torch.sort(a, dim=1, descending=True)
            st = acc[layer]
            st.parts["topk"].append(srt[:, :k])
            st.parts["tok"].append(order[:, :k] // D)
            st.parts["ch"].append(order[:, :k] % D)
            # torch.median's lower median is the ((n - 1) // 2)-th smallest
            st.parts["median"].append(srt[:, T * D - 1 - (T * D - 1) // 2])
            st.parts["mean"].append(a.mean(dim=1))
            st.parts["tmax"].append(a.view(B, T, D).amax(-1))
            sq = x.double().pow(2).sum((0, 1))
            st.sumsq = sq if st.sumsq is None else st.sumsq + sq
            st.n_tokens += B * T
    return ActivationStats({"block_out": {layer: acc[layer].result() for layer in chosen}},
                           ids=ids, k=k, layers=chosen)


def token_batch(tokenizer, texts: Sequence[str], seq_len: int, n_seq: int | None = None,
                *, add_special_tokens: bool = True) -> torch.Tensor:
    """``(n_seq, seq_len)`` token ids: the first ``seq_len`` tokens of each text long enough.

    Chapter 13. Texts shorter than ``seq_len`` tokens are skipped, so every row is a real
    text start (no padding to mask). Raises when fewer than ``n_seq`` texts are long enough.
    """
    if not isinstance(seq_len, int) or seq_len < 2:
        raise ValueError(f"seq_len must be an integer >= 2, got {seq_len!r}")
    rows = []
    for t in texts:
        ids = tokenizer(t, add_special_tokens=add_special_tokens)["input_ids"]
        if len(ids) >= seq_len:
            rows.append(list(ids[:seq_len]))
            if n_seq is not None and len(rows) == n_seq:
                break
    if not rows or (n_seq is not None and len(rows) < n_seq):
        raise ValueError(f"only {len(rows)} of {len(texts)} texts have at least {seq_len} tokens "
                         f"(wanted {n_seq}); pass more or longer texts or a smaller seq_len")
    return torch.tensor(rows, dtype=torch.long)
