"""The replicates and controls the chapter's registered claims are judged from.

Chapter 13 (issue 50: the notebooks hand measurements to :class:`iclr25.registry.Registry`;
issue 64: every alignment claim against a chance level computed from the run's own marginals,
every magnitude claim against what an i.i.d. Gaussian tensor of the same shape gives). Each
function returns per-replicate arrays (per sequence, per layer, per head, per text, per seed)
in the order the registry entry names, and the matching control (a number or replicates).

Closed forms
------------
For ``N`` i.i.d. standard normal entries ``z``, ``E[max |z|] = int_0^inf 1 - (2 Phi(x) - 1)^N dx``
(computed by quadrature), ``median |z| = Phi^{-1}(3/4) = 0.6745`` and ``E|z| = sqrt(2 / pi)``;
:func:`gaussian_log10_max_over_median` and :func:`gaussian_log10_max_over_mean` are the log10 of
the two ratios (for 128 x 576 entries ~0.82: a Gaussian tensor's max is ~6.6x its median).
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterable, Sequence

import numpy as np
import torch
from torch import nn

from .census import classify_ids
from .sinks import SinkStats
from .stats import ActivationStats, layer_blocks

__all__ = ["expected_max_abs_normal", "gaussian_log10_max_over_median",
           "gaussian_log10_max_over_mean", "MASSIVE_CLASSES", "LOW_INFO_CLASSES",
           "per_seq_log10_max_over_median", "per_seq_max_on_classes", "per_seq_class_rate",
           "per_seq_outlier_tokens_on_classes", "layer_writes_dim", "per_layer_log10_weight_ratio",
           "per_seq_sink_attention", "uniform_causal_sink", "per_seq_position_alignment",
           "marginal_agreement_chance", "head_correlations", "first_token_growth",
           "first_token_last_over_peak", "per_seq_attention_change", "per_text_log_ppl",
           "sink_knockout", "KNOCKOUTS", "quantize_activations", "outlier_token_mask",
           "fake_quant_per_tensor", "steps_to_loss",
           "per_text_log_ppl_gpt"]

#: Token classes of the "initial token or delimiter" claims.
MASSIVE_CLASSES = ("initial", "delimiter")
#: Token classes of the "outlier tokens are low-information" claim.
LOW_INFO_CLASSES = ("initial", "delimiter", "weak-semantic")
#: What :func:`sink_knockout` removes.
KNOCKOUTS = ("scale", "bias")


# ------------------------------------------------------------------------------ closed forms


def expected_max_abs_normal(n: int) -> float:
    """``E[max_i |z_i|]`` over ``n`` i.i.d. standard normals (quadrature of
    ``1 - (2 Phi(x) - 1)^n``; chapter 13)."""
    from scipy import integrate, special

    n = int(n)
    if n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")

    def tail(x):
        # 1 - (1 - 2 Q(x))^n with Q the upper normal tail, computed without cancellation
        q2 = special.erfc(x / math.sqrt(2))          # 2 Q(x)
        return -math.expm1(n * math.log1p(-q2)) if q2 < 1 else 1.0

    hi = math.sqrt(2 * math.log(max(n, 2))) + 10.0
    val, _ = integrate.quad(tail, 0, hi, limit=200, points=[math.sqrt(2 * math.log(max(n, 2)))])
    return float(val)


def gaussian_log10_max_over_median(n: int) -> float:
    """``log10(E[max |z|] / median |z|)`` for ``n`` i.i.d. standard normal entries (chapter 13:
    the control of every magnitude claim)."""
    from scipy import stats

    return math.log10(expected_max_abs_normal(n) / float(stats.norm.ppf(0.75)))


def gaussian_log10_max_over_mean(n: int) -> float:
    """``log10(E[max |z|] / E|z|)`` for ``n`` i.i.d. standard normal entries (chapter 13: the
    control of the weight-outlier claim)."""
    return math.log10(expected_max_abs_normal(n) / math.sqrt(2 / math.pi))


# ------------------------------------------------------------------------------ the census


def per_seq_log10_max_over_median(stats: ActivationStats, layers: Sequence[int], *,
                                  site: str = "block_out") -> np.ndarray:
    """``(n_seq,)``: per sequence, the median over ``layers`` of ``log10(max |x| / median |x|)``."""
    if not len(layers):
        raise ValueError("layers must name at least one layer")
    m = np.stack([np.log10(stats[site][l].max_over_median) for l in layers])   # (L, n_seq)
    return np.median(m, axis=0)


def _classes(stats: ActivationStats, tokenizer, classes=None):
    return classes if classes is not None else classify_ids(tokenizer, stats.ids)


def per_seq_max_on_classes(stats: ActivationStats, tokenizer, layers: Sequence[int],
                           wanted: Sequence[str] = MASSIVE_CLASSES, *, site: str = "block_out",
                           classes=None) -> np.ndarray:
    """``(n_seq,)``: per sequence, the fraction of ``layers`` whose largest ``|x|`` sits on a token
    of a ``wanted`` class (:func:`iclr25.systematic_outliers.token_class`)."""
    cls = _classes(stats, tokenizer, classes)
    hits = np.array([[cls[s][int(p)] in wanted for s, p in enumerate(stats[site][l].top_token[:, 0])]
                     for l in layers], dtype=float)                              # (L, n_seq)
    return hits.mean(0)


def per_seq_class_rate(stats: ActivationStats, tokenizer,
                       wanted: Sequence[str] = MASSIVE_CLASSES, *, classes=None) -> np.ndarray:
    """``(n_seq,)``: the fraction of each sequence's tokens in a ``wanted`` class: the rate at
    which a position drawn from the sequence would land there (the chance control)."""
    cls = _classes(stats, tokenizer, classes)
    return np.array([np.mean([c in wanted for c in row]) for row in cls])


def per_seq_outlier_tokens_on_classes(stats: ActivationStats, tokenizer, layers: Sequence[int], *,
                                      tau: float = 1000.0, wanted: Sequence[str] = LOW_INFO_CLASSES,
                                      site: str = "block_out", classes=None):
    """Per sequence with outlier tokens (``max_j |x_tj| > tau * mean |x|``) in ``layers``: the
    fraction of its outlier occurrences ``(token, layer)`` in a ``wanted`` class, and the
    fraction of its tokens in those classes (the control). Returns ``(ours, control, kept)``,
    ``kept`` the indices of the sequences that have outlier tokens."""
    cls = _classes(stats, tokenizer, classes)
    rate = per_seq_class_rate(stats, tokenizer, wanted, classes=cls)
    n_seq = stats[site][layers[0]].token_max.shape[0]
    hit = np.zeros(n_seq)
    tot = np.zeros(n_seq)
    for l in layers:
        st = stats[site][l]
        for s in range(n_seq):
            for p in np.nonzero(st.token_max[s] > tau * st.mean[s])[0]:
                tot[s] += 1
                hit[s] += cls[s][p] in wanted
    kept = np.nonzero(tot > 0)[0]
    return hit[kept] / tot[kept], rate[kept], kept


def layer_writes_dim(top_feature: np.ndarray, dim: int) -> np.ndarray:
    """``(n_layers,)``: 1 where a layer's largest ``down_proj`` weight writes residual dimension
    ``dim`` (:attr:`WeightOutliers.top_feature`), else 0."""
    return (np.asarray(top_feature) == int(dim)).astype(float)


def per_layer_log10_weight_ratio(model: nn.Module) -> tuple[np.ndarray, tuple[int, int]]:
    """``log10(max |W| / mean |W|)`` of every layer's ``down_proj`` and the matrix shape."""
    from .stats import site_module

    out, shape = [], None
    with torch.no_grad():
        for block in layer_blocks(model):
            W = site_module(block, "down_in").weight.detach().float().abs()
            shape = tuple(W.shape)
            out.append(math.log10(float(W.max() / W.mean())))
    return np.array(out), shape


def per_seq_sink_attention(sinks: SinkStats, layers: Sequence[int]) -> np.ndarray:
    """``(n_seq,)``: mean over ``layers`` and heads of the attention on token 0 (queries from
    ``min_query`` on, as :func:`sink_stats` measured it)."""
    return np.mean([sinks.share[l].mean(1) for l in layers], axis=0)


def uniform_causal_sink(seq_len: int, min_query: int = 4) -> float:
    """Mean over queries ``q = min_query .. seq_len - 1`` of ``1 / (q + 1)``: the weight on
    token 0 under uniform causal attention (the chance control of the sink claim)."""
    if not 0 <= min_query < seq_len:
        raise ValueError(f"min_query must be in [0, {seq_len - 1}], got {min_query}")
    q = np.arange(min_query, seq_len)
    return float(np.mean(1.0 / (q + 1)))


def per_seq_position_alignment(stats: ActivationStats, top_key: dict, layers: Sequence[int], *,
                               site: str = "block_out") -> tuple[np.ndarray, float]:
    """Per sequence, the fraction of ``layers`` in which the largest activation's position at
    layer ``l``'s output equals the most-attended key of layer ``l + 1``; and the chance level
    :func:`marginal_agreement_chance` of the two positions' marginals over all (sequence, layer)
    pairs."""
    act = np.stack([stats[site][l].top_token[:, 0] for l in layers])          # (L, n_seq)
    att = np.stack([np.asarray(top_key[l + 1]) for l in layers])
    return (act == att).mean(0), marginal_agreement_chance(act.ravel(), att.ravel())


def marginal_agreement_chance(a: Iterable[int], b: Iterable[int]) -> float:
    """``sum_v p_a(v) p_b(v)``: how often two independent draws from the marginals of ``a`` and
    ``b`` agree."""
    a, b = np.asarray(list(a)), np.asarray(list(b))
    if a.size == 0 or b.size == 0:
        raise ValueError("need at least one value on each side")
    va, ca = np.unique(a, return_counts=True)
    pb = {v: c / b.size for v, c in zip(*np.unique(b, return_counts=True))}
    return float(sum(c / a.size * pb.get(v, 0.0) for v, c in zip(va, ca)))


def head_correlations(sinks: SinkStats, layers: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per head of ``layers`` (flattened), the sink-mass / head-output-norm correlation and the
    previous-token control; heads where either is undefined are dropped from both (paired)."""
    if not len(layers):
        raise ValueError("layers must name at least one layer")
    a = np.concatenate([sinks.corr_sink[l] for l in layers])
    b = np.concatenate([sinks.corr_prev[l] for l in layers])
    ok = np.isfinite(a) & np.isfinite(b)
    return a[ok], b[ok]


# ------------------------------------------------------------------------------ the lifecycle


def _log10_abs(x):
    return np.log10(np.maximum(np.abs(np.asarray(x, dtype=float)), 1e-30))


def first_token_growth(x0: np.ndarray, layer: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``x0``: ``(n_layers, n_seq, D)`` residual stream of token 0 after every layer. Per
    sequence ``log10(|x_l| / |x_{l-1}|)`` of ``dim`` across ``layer``, and the median of the same
    over the other dimensions (the control)."""
    if not 1 <= layer < x0.shape[0]:
        raise ValueError(f"layer must be in [1, {x0.shape[0] - 1}], got {layer}")
    g = _log10_abs(x0[layer]) - _log10_abs(x0[layer - 1])                     # (n_seq, D)
    other = np.delete(g, dim, axis=1)
    return g[:, dim], np.median(other, axis=1)


def first_token_last_over_peak(x0: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Per sequence ``log10(|x_last| / max_l |x_l|)`` of ``dim`` at token 0, and the median of the
    same over the other dimensions (the control)."""
    a = _log10_abs(x0)                                                        # (L, n_seq, D)
    r = a[-1] - a.max(0)                                                      # (n_seq, D)
    return r[:, dim], np.median(np.delete(r, dim, axis=1), axis=1)


def per_seq_attention_change(share: dict, before: Sequence[int], after: Sequence[int]) -> np.ndarray:
    """``share[l]``: ``(n_seq, H)`` attention on one key. Per sequence, its mean over the
    ``after`` layers and heads minus its mean over the ``before`` layers and heads."""
    if not len(before) or not len(after):
        raise ValueError("before and after must each name at least one layer")
    m = lambda ls: np.mean([share[l].mean(1) for l in ls], axis=0)   # noqa: E731
    return m(after) - m(before)


@torch.no_grad()
def per_text_log_ppl(model: nn.Module, ids: torch.Tensor, *, batch_size: int = 8) -> np.ndarray:
    """``(n,)``: each row's log perplexity (mean next-token NLL over tokens 1..T-1, token 0
    context only) under a ``transformers`` causal LM; rows are unpadded (:func:`token_batch`)."""
    out = []
    for start in range(0, ids.shape[0], batch_size):
        x = ids[start:start + batch_size]
        logits = model(input_ids=x, use_cache=False).logits.float()
        nll = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), x[:, 1:],
                                                reduction="none")
        out.append(nll.mean(1))
    return torch.cat(out).double().numpy()


@torch.no_grad()
def per_text_log_ppl_gpt(model: nn.Module, windows: torch.Tensor, *, batch_size: int = 16) -> np.ndarray:
    """``(n,)``: each ``(T + 1)``-window's log perplexity under a TinyGPT."""
    model.eval()
    out = []
    for start in range(0, windows.shape[0], batch_size):
        w = windows[start:start + batch_size]
        logits = model(w[:, :-1])
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), w[:, 1:], reduction="none")
        out.append(nll.mean(1))
    return torch.cat(out).double().numpy()


# ------------------------------------------------------------------------------ sink knockout

_KNOCKOUT_NAME = "iclr25_sink_knockout"
_KNOCKOUT_STATE: dict = {"mode": None, "layers": frozenset()}


def _knockout_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kw):
    """Causal softmax attention (no padding), with token 0's role removed in the chosen layers:
    ``scale``: ``y = a_0 v_0 + sum_{j>0} a_j v_j / (1 - a_0)`` (the others renormalised to 1,
    the sink's value term kept); ``bias``: ``y = sum_{j>0} a_j v_j`` (``v_0`` zeroed)."""
    from transformers.models.llama.modeling_llama import repeat_kv

    k = repeat_kv(key, module.num_key_value_groups)
    v = repeat_kv(value, module.num_key_value_groups)
    T, S = query.shape[-2], k.shape[-2]
    s = torch.matmul(query, k.transpose(2, 3)) * scaling
    future = torch.ones(T, S, dtype=torch.bool, device=s.device).triu(S - T + 1)
    s = s.masked_fill(future, float("-inf"))
    w = torch.softmax(s.float(), dim=-1).to(query.dtype)
    mode = _KNOCKOUT_STATE["mode"] if module.layer_idx in _KNOCKOUT_STATE["layers"] else None
    if mode is None:
        y = torch.matmul(w, v)
    elif mode == "bias":
        y = torch.matmul(w[..., 1:], v[..., 1:, :])
    else:
        a0 = w[..., :1]
        rest = torch.matmul(w[..., 1:], v[..., 1:, :]) / (1 - a0).clamp(min=1e-6)
        # query 0 sees only token 0: nothing to renormalise, keep it as it is
        y = a0 * v[..., :1, :] + rest
        y[..., 0, :] = torch.matmul(w, v)[..., 0, :]
    return y.transpose(1, 2).contiguous(), w


@contextlib.contextmanager
def sink_knockout(model: nn.Module, mode: str | None, layers: Iterable[int]):
    """Inside the block, every head of ``layers`` of a Llama-style ``transformers`` model runs
    :func:`_knockout_attention` with ``mode`` (``"scale"``, ``"bias"`` or ``None``: plain
    attention, for checks). Inputs must be unpadded."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    if mode not in (None, *KNOCKOUTS):
        raise ValueError(f"unknown knockout {mode!r}; valid: {', '.join(KNOCKOUTS)} or None")
    AttentionInterface.register(_KNOCKOUT_NAME, _knockout_attention)
    if _KNOCKOUT_NAME not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping:
        ALL_MASK_ATTENTION_FUNCTIONS.register(_KNOCKOUT_NAME,
                                              ALL_MASK_ATTENTION_FUNCTIONS._global_mapping["sdpa"])
    config = model.config
    previous = config._attn_implementation
    _KNOCKOUT_STATE.update(mode=mode, layers=frozenset(int(l) for l in layers))
    config._attn_implementation = _KNOCKOUT_NAME
    for m in model.modules():
        if getattr(m, "config", None) is not None and m.config is not config:
            m.config._attn_implementation = _KNOCKOUT_NAME
    try:
        yield
    finally:
        config._attn_implementation = previous
        for m in model.modules():
            if getattr(m, "config", None) is not None and m.config is not config:
                m.config._attn_implementation = previous
        _KNOCKOUT_STATE.update(mode=None, layers=frozenset())


# ------------------------------------------------------------------------------ A8 quantization


def outlier_token_mask(x: torch.Tensor, tau: float = 1000.0) -> torch.Tensor:
    """``(B, T)``: the outlier tokens of ``x`` ``(B, T, D)``, per sequence: largest ``|x|`` over
    channels above ``tau`` times the mean ``|x|`` of the sequence's ``T x D`` slice."""
    a = x.abs()
    return a.amax(-1) > tau * a.mean((1, 2))[:, None]


def fake_quant_per_tensor(x: torch.Tensor, keep: torch.Tensor | None = None, *,
                          bits: int = 8) -> torch.Tensor:
    """Absmax round-to-nearest fake quantization of ``x`` ``(B, T, D)`` with one scale per
    sequence (its ``T x D`` slice), ``2^(bits-1) - 1`` levels a side; entries where ``keep`` is
    true stay as they are and do not enter the scale."""
    levels = 2 ** (bits - 1) - 1
    keep = torch.zeros_like(x, dtype=torch.bool) if keep is None else keep
    scale = x.abs().masked_fill(keep, 0).amax((1, 2), keepdim=True).clamp(min=1e-12) / levels
    q = (x / scale).round().clamp(-levels, levels) * scale
    return torch.where(keep, x, q)


@contextlib.contextmanager
def quantize_activations(model: nn.Module, *, bits: int = 8, keep: str = "none", dim: int = 0,
                         tau: float = 1000.0, seed: int = 0):
    """Inside the block, every decoder layer's output is fake-quantized per tensor
    (:func:`fake_quant_per_tensor`: one absmax scale per sequence's ``T x D`` slice).

    ``keep``: which entries stay in full precision (and out of the scale): ``"none"``;
    ``"outliers"``: dimension ``dim`` at the outlier tokens of that tensor
    (:func:`outlier_token_mask`, the census's test); ``"random"``: as many (token, dimension)
    sites drawn uniformly from the same tensor (a generator seeded by ``seed``, advanced per
    tensor). Yields a dict counting the kept sites."""
    if keep not in ("none", "outliers", "random"):
        raise ValueError(f"keep must be none, outliers or random, got {keep!r}")
    gen = torch.Generator().manual_seed(seed)
    count = {"kept": 0}

    def fq(x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        mask = torch.zeros_like(x, dtype=torch.bool)
        if keep != "none":
            tok = outlier_token_mask(x, tau)
            if keep == "outliers":
                mask[..., dim] = tok
            else:
                for b, n in enumerate(tok.sum(1).tolist()):
                    if n:
                        mask[b].view(-1)[torch.randperm(T * D, generator=gen)[:n]] = True
        count["kept"] += int(mask.sum())
        return fake_quant_per_tensor(x, mask, bits=bits)

    def hook(mod, args, out):
        if isinstance(out, (tuple, list)):
            return (fq(out[0]), *out[1:])
        return fq(out)

    handles = [b.register_forward_hook(hook) for b in layer_blocks(model)]
    try:
        yield count
    finally:
        for h in handles:
            h.remove()


# ------------------------------------------------------------------------------ training


def steps_to_loss(history: dict, target: float, *, window: int = 10) -> int:
    """The first logged step at which the ``window``-step running mean of the training loss is
    at most ``target``; ``n_steps + 1`` (censored; steps count from 0, so the last logged step
    plus 2) if it never is."""
    loss = np.asarray(history["loss"], dtype=float)
    steps = np.asarray(history["step"])
    if loss.size < window:
        raise ValueError(f"need at least {window} logged losses, got {loss.size}")
    smooth = np.convolve(loss, np.ones(window) / window, mode="valid")
    hit = np.nonzero(smooth <= target + 1e-9)[0]
    return int(steps[hit[0] + window - 1]) if len(hit) else int(steps[-1]) + 2
