"""Attention variants for the small GPT: is softmax the cause of systematic outliers?

Chapter 13 (Sec. 5 and Fig. 10 of An et al. 2025). Every module here has the interface of
:class:`iclr25.tinygpt.CausalSelfAttention` (``forward(x, return_attn=False) -> (y, attn)``,
attributes ``qkv``, ``proj``, ``n_heads``, ``head_dim``), so it replaces ``block.attn`` of a
:class:`~iclr25.tinygpt.TinyGPT` from outside (:func:`make_gpt`). With per-head ``q, k, v`` of
shape ``(B, H, T, d_h)`` and ``P = softmax(q k^T / sqrt(d_h))`` (causal):

``default``      ``y = P v``
``vbias``        ``y = P v + v'``; a learned ``v'`` in R^{d_model} after the heads are joined
``attn_bias``    a learned key/value slot per head visible to every query:
                 ``y = softmax(q [k'; k]^T / sqrt(d_h)) [v'; v]`` (Sun et al. 2024)
``cabias``       ``y = P v + p_0(q) v'`` with ``p_0(q)`` the softmax mass that a second
                 attention over ``[k'; k]`` puts on the slot (a context-aware *bias*)
``ca_scale``     ``y_h = S_h(x) P v`` with ``S(x) = 2 sigmoid(W_s x)``, ``W_s: d_model -> H``
                 (the paper's context-aware *scaling factor*, its proposed fix)
``sigmoid``      ``y = sigmoid(q k^T / sqrt(d_h) - log T) v`` (Ramapuram et al. 2024), no
                 normalisation

The returned attention map ``attn`` is ``(B, H, T, T)`` over the real keys only (for
``attn_bias`` its rows sum to ``1 - p_0``; for ``sigmoid`` they are not normalised).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..tinygpt import TinyGPT, TinyGPTConfig

__all__ = ["VARIANTS", "OutlierAttention", "make_attention", "make_gpt", "gpt_linears", "strip_biases"]

#: The attention variants :func:`make_gpt` builds, with a one-line description each.
VARIANTS: dict[str, str] = {
    "default": "softmax attention",
    "vbias": "softmax + a fixed value bias v'",
    "attn_bias": "softmax over a learned key/value slot [k'; k], [v'; v]",
    "cabias": "softmax + a context-aware bias p0(q) v'",
    "ca_scale": "softmax x a context-aware scaling factor 2 sigmoid(W_s x)",
    "sigmoid": "sigmoid attention with bias -log T",
}


class OutlierAttention(nn.Module):
    """Causal self-attention with one of the :data:`VARIANTS` (chapter 13).

    Same interface and parameter names as :class:`iclr25.tinygpt.CausalSelfAttention`
    (``qkv``, ``proj``); the variants add ``v_bias`` (vbias), ``k_slot``/``v_slot``
    (attn_bias, cabias) or ``scale_proj`` (ca_scale). ``fast=True`` runs softmax attention
    through ``scaled_dot_product_attention`` when no map is asked for.
    """

    def __init__(self, cfg: TinyGPTConfig, variant: str = "default", *, fast: bool = True) -> None:
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"unknown attention variant {variant!r}; valid: {', '.join(VARIANTS)}")
        self.variant = variant
        self.fast = fast
        self.n_heads, self.head_dim, d = cfg.n_heads, cfg.head_dim, cfg.d_model
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.resid_drop = nn.Dropout(cfg.dropout)
        self.register_buffer("future", torch.ones(cfg.max_len, cfg.max_len, dtype=torch.bool).triu(1),
                             persistent=False)
        if variant == "vbias":
            self.v_bias = nn.Parameter(torch.zeros(d))
        if variant in ("attn_bias", "cabias"):
            self.k_slot = nn.Parameter(torch.randn(1, self.n_heads, 1, self.head_dim) * 0.02)
            self.v_slot = nn.Parameter(torch.randn(1, self.n_heads, 1, self.head_dim) * 0.02)
        if variant == "ca_scale":
            self.scale_proj = nn.Linear(d, self.n_heads)
            nn.init.zeros_(self.scale_proj.weight)          # S = 1 at initialisation: the
            nn.init.zeros_(self.scale_proj.bias)            # variant starts as the default model

    def _softmax(self, q, k, v, return_attn):
        T = q.shape[2]
        if self.fast and not return_attn:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=self.attn_drop.p if self.training else 0.0)
            return y, None
        s = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        P = s.masked_fill(self.future[:T, :T], float("-inf")).softmax(-1)
        return self.attn_drop(P) @ v, P

    def forward(self, x: torch.Tensor, return_attn: bool = False):
        B, T, D = x.shape
        H, dh = self.n_heads, self.head_dim
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(B, T, H, dh).transpose(1, 2) for t in (q, k, v))
        attn = None
        if self.variant in ("default", "vbias", "cabias", "ca_scale"):
            y, attn = self._softmax(q, k, v, return_attn)
            if self.variant == "cabias":
                # p_0(q): the mass a softmax over [k'; k] puts on the slot (Eq. of the cabias diff)
                s = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
                s = s.masked_fill(self.future[:T, :T], float("-inf"))
                s0 = (q @ self.k_slot.transpose(-2, -1)) / math.sqrt(dh)           # (B, H, T, 1)
                p0 = torch.sigmoid(s0[..., 0] - torch.logsumexp(s, -1))           # = e^s0 / (e^s0 + sum e^s)
                y = y + p0[..., None] * self.v_slot
            if self.variant == "ca_scale":
                S = 2 * torch.sigmoid(self.scale_proj(x))                          # (B, T, H)
                y = y * S.transpose(1, 2)[..., None]
        elif self.variant == "attn_bias":
            kk = torch.cat([self.k_slot.expand(B, -1, -1, -1), k], 2)
            vv = torch.cat([self.v_slot.expand(B, -1, -1, -1), v], 2)
            mask = torch.cat([torch.zeros(T, 1, dtype=torch.bool, device=x.device),
                              self.future[:T, :T]], 1)
            if self.fast and not return_attn:
                y = F.scaled_dot_product_attention(q, kk, vv, attn_mask=~mask,
                                                   dropout_p=self.attn_drop.p if self.training else 0.0)
            else:
                s = (q @ kk.transpose(-2, -1)) / math.sqrt(dh)
                P = s.masked_fill(mask, float("-inf")).softmax(-1)
                y = self.attn_drop(P) @ vv
                attn = P[..., 1:]
        else:  # sigmoid
            s = (q @ k.transpose(-2, -1)) / math.sqrt(dh) - math.log(T)
            P = torch.sigmoid(s).masked_fill(self.future[:T, :T], 0.0)
            y = self.attn_drop(P) @ v
            attn = P if return_attn else None
        y = y.transpose(1, 2).reshape(B, T, D)
        if self.variant == "vbias":
            y = y + self.v_bias
        return self.resid_drop(self.proj(y)), attn


def make_attention(cfg: TinyGPTConfig, variant: str, like: nn.Module | None = None, *,
                   fast: bool = True) -> OutlierAttention:
    """An :class:`OutlierAttention`; with ``like`` (a TinyGPT attention), its ``qkv`` and
    ``proj`` weights are copied, so variants start from the same shared weights (chapter 13)."""
    attn = OutlierAttention(cfg, variant, fast=fast)
    if like is not None:
        attn.qkv.load_state_dict(like.qkv.state_dict())
        attn.proj.load_state_dict(like.proj.state_dict())
    return attn


def make_gpt(cfg: TinyGPTConfig, variant: str = "default", *, seed: int = 0,
             fast: bool = True, bias: bool = True) -> TinyGPT:
    """A :class:`~iclr25.tinygpt.TinyGPT` whose every ``block.attn`` is the ``variant``.

    Chapter 13. The shared weights (embeddings, MLPs, ``qkv``, ``proj``) are those of
    ``TinyGPT(cfg)`` under ``torch.manual_seed(seed)``, the same for every variant; a variant's
    own parameters are drawn from a generator seeded by ``seed`` afterwards. The global RNG is
    left as it was. ``bias=False`` removes every bias of the linear layers and LayerNorms (the
    official GPT-2 configuration of the paper's code; with a value bias, "default" would be the
    paper's fixed-bias variant), the weights staying those of the biased model.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown attention variant {variant!r}; valid: {', '.join(VARIANTS)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyGPT(cfg)
        torch.manual_seed(seed + 10_000)
        for block in model.blocks:
            block.attn = make_attention(cfg, variant, like=block.attn, fast=fast)
    if not bias:
        strip_biases(model)
    return model


def strip_biases(model: nn.Module) -> nn.Module:
    """Remove (in place) the bias of every ``nn.Linear`` and ``nn.LayerNorm`` of ``model``
    (chapter 13: the official configuration has ``bias=False``); returns ``model``."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.LayerNorm)) and getattr(m, "bias", None) is not None:
            m.bias = None
    return model


def gpt_linears(model: nn.Module) -> list[nn.Linear]:
    """The linear layers of a TinyGPT's blocks (what W8 quantisation and pruning act on;
    chapter 13). The context-aware scale's own ``scale_proj`` is included."""
    return [m for block in model.blocks for m in block.modules() if isinstance(m, nn.Linear)]
