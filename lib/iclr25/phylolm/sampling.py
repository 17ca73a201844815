"""Genes and alleles: prompts from the corpus, N short sampled completions per gene (chapter 12).

The paper (Sec. 3) takes G = 128 genes (text prefixes of 20-100 characters), draws N = 32
completions of 5 tokens at temperature 0.7 from each model, strips leading spaces and newlines,
and keeps the first 4 characters as the allele (so models with different tokenizers compare).

Each gene's prompt is run through the model once; its key/value cache is then expanded to N rows
and only the few new tokens are computed N times. :func:`complete` does this for a
:class:`iclr25.tinygpt.TinyGPT` (byte tokens; its own cache, since TinyGPT has none) and for a
``transformers`` causal LM (the model's cache, ``batch_repeat_interleave``); several genes share
one batch with left padding.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..progress import progress
from ..tinygpt import ByteTokenizer, TinyGPT

__all__ = ["make_genes", "to_allele", "complete", "sample_alleles"]

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def make_genes(texts: Sequence[str], G: int, *, min_chars: int = 20, max_chars: int = 100,
               seed: int = 0) -> list[str]:
    """G gene prompts: each a prefix of ``U[min_chars, max_chars)`` characters of a random
    sentence start of a random text (distinct genes). Introduced in chapter 12.

    The paper cuts prefixes of 20-100 characters from random documents; TinyGPT's context of
    64 bytes asks for shorter ones in this chapter.
    """
    texts = [t for t in texts if len(t) >= min_chars]
    if not texts:
        raise ValueError(f"no text has at least min_chars={min_chars} characters")
    if not 1 <= min_chars < max_chars:
        raise ValueError(f"need 1 <= min_chars < max_chars, got {min_chars}, {max_chars}")
    if not isinstance(G, int) or G < 1:
        raise ValueError(f"G must be a positive integer, got {G!r}")
    rng = np.random.default_rng(seed)
    genes: list[str] = []
    seen: set[str] = set()
    for _ in range(50 * G):
        t = texts[int(rng.integers(len(texts)))]
        starts = [0] + [m.end() for m in _SENT.finditer(t)]
        s = starts[int(rng.integers(len(starts)))]
        n = int(rng.integers(min_chars, max_chars))
        gene = t[s:s + n]
        if len(gene) >= min_chars and gene not in seen:
            seen.add(gene)
            genes.append(gene)
            if len(genes) == G:
                return genes
    raise ValueError(f"could not draw {G} distinct genes from {len(texts)} texts")


def to_allele(text: str, n_chars: int = 4) -> str:
    """The allele of a completion: leading spaces and newlines stripped, first ``n_chars``."""
    return text.lstrip(" \n\r\t")[:n_chars]


# ------------------------------------------------------------------ TinyGPT with a KV cache

def _tiny_forward(model: TinyGPT, x_ids: torch.Tensor, start: int, cache: list | None):
    """Run ``x_ids`` (B, T) at positions ``start ...``; extend or create the per-layer cache."""
    B, T = x_ids.shape
    pos = torch.arange(start, start + T, device=x_ids.device)
    x = model.tok_emb(x_ids) + model.pos_emb(pos)
    new_cache = []
    for li, block in enumerate(model.blocks):
        att = block.attn
        h = block.ln1(x)
        q, k, v = att.qkv(h).split(x.shape[-1], dim=-1)
        q, k, v = (t.view(B, T, att.n_heads, att.head_dim).transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            k = torch.cat([cache[li][0], k], dim=2)
            v = torch.cat([cache[li][1], v], dim=2)
        new_cache.append((k, v))
        # with a cache the new query attends to every earlier position (no mask needed, T = 1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None and T > 1)
        x = x + att.proj(y.transpose(1, 2).reshape(B, T, -1))
        x = x + block.mlp(block.ln2(x))
    return model.head(model.ln_f(x))[:, -1], new_cache


def _draw(logits: torch.Tensor, temperature: float, gen: torch.Generator) -> torch.Tensor:
    if temperature == 0:
        return logits.argmax(-1)
    return torch.multinomial(torch.softmax(logits.float() / temperature, -1), 1, generator=gen)[:, 0]


@torch.no_grad()
def _complete_tiny(model: TinyGPT, prompts: Sequence[str], n: int, max_new_tokens: int,
                   temperature: float, gen: torch.Generator) -> list[list[str]]:
    tok = ByteTokenizer()
    keep = model.cfg.max_len - max_new_tokens
    if keep < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens} leaves no room in max_len="
                         f"{model.cfg.max_len}")
    was = model.training
    model.eval()
    out = []
    try:
        for p in prompts:
            ids = tok.encode(p)[-keep:] or tok.doc_sep[-1:]
            x = torch.tensor([ids], device=model.device)
            logits, cache = _tiny_forward(model, x, 0, None)
            cache = [(k.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)) for k, v in cache]
            logits = logits.expand(n, -1)
            new = []
            for step in range(max_new_tokens):
                nxt = _draw(logits, temperature, gen)
                new.append(nxt)
                if step < max_new_tokens - 1:
                    logits, cache = _tiny_forward(model, nxt[:, None], len(ids) + step, cache)
            toks = torch.stack(new, 1).tolist()
            out.append([tok.decode(t) for t in toks])
    finally:
        model.train(was)
    return out


# ------------------------------------------------------------------ transformers models

@torch.no_grad()
def _complete_hf(model, tokenizer, prompts: Sequence[str], n: int, max_new_tokens: int,
                 temperature: float, gen: torch.Generator, gene_batch: int) -> list[list[str]]:
    from ..lm._common import cache_kwarg, new_cache, pad_batch, pad_id, position_ids

    device = next(model.parameters()).device
    pad = pad_id(tokenizer)
    eos = getattr(model.generation_config, "eos_token_id", None) if hasattr(
        model, "generation_config") else None
    eos = set(eos if isinstance(eos, (list, tuple)) else ([] if eos is None else [eos]))
    was = model.training
    model.eval()
    out: list[list[str]] = []
    try:
        for start in range(0, len(prompts), gene_batch):
            chunk = prompts[start:start + gene_batch]
            enc = [list(tokenizer(p)["input_ids"]) for p in chunk]
            ids, mask = pad_batch(enc, pad, left=True, device=device)
            pos = position_ids(mask)
            cache = new_cache(model)
            kw = {cache_kwarg(model): cache}
            # the prompts once ...
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                           logits_to_keep=1, **kw).logits[:, -1]
            # ... then their cache expanded to N rows each
            cache.batch_repeat_interleave(n)
            mask = mask.repeat_interleave(n, dim=0)
            pos = pos[:, -1:].repeat_interleave(n, dim=0)
            logits = logits.repeat_interleave(n, dim=0)
            new = []
            for step in range(max_new_tokens):
                nxt = _draw(logits, temperature, gen)
                new.append(nxt)
                if step == max_new_tokens - 1:
                    break
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
                pos = pos + 1
                logits = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=pos,
                               use_cache=True, logits_to_keep=1, **kw).logits[:, -1]
            rows = torch.stack(new, 1).tolist()
            for g in range(len(chunk)):
                texts = []
                for r in rows[g * n:(g + 1) * n]:
                    cut = next((k for k, t in enumerate(r) if t in eos), len(r))
                    texts.append(tokenizer.decode(r[:cut], skip_special_tokens=True))
                out.append(texts)
    finally:
        model.train(was)
    return out


def complete(model, prompts: Sequence[str], *, n: int, max_new_tokens: int = 5,
             temperature: float = 0.7, seed: int = 0, tokenizer=None,
             gene_batch: int = 8) -> list[list[str]]:
    """``n`` sampled completions (text) of each prompt: ``out[g][k]``. Introduced in chapter 12.

    ``model`` is a :class:`~iclr25.tinygpt.TinyGPT` (byte tokens; ``tokenizer`` unused) or a
    ``transformers`` causal LM with its ``tokenizer``. Each prompt's cache is computed once and
    expanded to ``n`` rows. ``temperature=0`` is greedy. ``seed`` fixes the draws.
    """
    if isinstance(prompts, str):
        raise TypeError("prompts must be a list of strings")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0: greedy), got {temperature!r}")
    gen = torch.Generator().manual_seed(int(seed))
    if isinstance(model, TinyGPT):
        return _complete_tiny(model, list(prompts), n, max_new_tokens, temperature, gen)
    if tokenizer is None:
        raise ValueError("a transformers model needs its tokenizer (tokenizer=...)")
    return _complete_hf(model, tokenizer, list(prompts), n, max_new_tokens, temperature, gen,
                        gene_batch)


def sample_alleles(model, genes: Sequence[str], *, N: int = 32, max_new_tokens: int = 5,
                   n_chars: int = 4, temperature: float = 0.7, seed: int = 0, tokenizer=None,
                   gene_batch: int = 8, desc: str | None = None) -> list[list[str]]:
    """The alleles of one model: ``N`` completions per gene, each cut to its first ``n_chars``
    characters after leading whitespace (paper: N = 32, 5 tokens, 4 characters, temperature
    0.7). Returns ``G`` lists of ``N`` strings. Introduced in chapter 12.
    """
    out: list[list[str]] = []
    step = max(1, gene_batch)
    for start in progress(range(0, len(genes), step), desc=desc or "alleles"):
        chunk = list(genes[start:start + step])
        texts = complete(model, chunk, n=N, max_new_tokens=max_new_tokens,
                         temperature=temperature, seed=seed * 100003 + start,
                         tokenizer=tokenizer, gene_batch=step)
        out += [[to_allele(t, n_chars) for t in row] for row in texts]
    return out
