"""Input-space attacks: GCG-lite (greedy coordinate gradient on a short suffix; Zou et al. 2023)
and the attack-induced shift of the last-token representation. Chapter 08 (ReFAT), notebooks
``02-rfa-approximates-attacks`` and ``03-refat-training``.

GCG-lite minimises ``L(s) = -log p(target | chat(prompt + " " + s))`` over suffix tokens ``s``:
each iteration takes the gradient of ``L`` with respect to the one-hot suffix, keeps the
``topk`` tokens with the most negative gradient per position, evaluates ``n_cand`` single-token
swaps in one batch and moves to the best (the original takes top-k 256, 512 candidates, 500
iterations and a 20-token suffix; ours is a few iterations on CPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from .. import lm
from ..progress import progress

__all__ = ["GCGResult", "gcg_lite", "allowed_tokens", "attack_shift", "random_suffixes"]

_MARK = "\u2063SUFFIX\u2063"


@dataclass
class GCGResult:
    """What :func:`gcg_lite` returns (chapter 08): the best suffix (ids and text), the attacked
    prompt, and the loss per iteration (``losses[0]`` is the initial suffix)."""

    prompt: str
    suffix_ids: list[int]
    suffix: str
    attacked: str
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def allowed_tokens(tokenizer) -> torch.Tensor:
    """Token ids a suffix may use: printable ASCII pieces, no special tokens (chapter 08)."""
    special = set(tokenizer.all_special_ids)
    keep = []
    for i in range(len(tokenizer)):
        if i in special:
            continue
        s = tokenizer.decode([i])
        if s and s.isascii() and s.isprintable() and s.strip():
            keep.append(i)
    return torch.tensor(keep)


def _pieces(tokenizer, prompt: str):
    text = lm.chat_text(tokenizer, prompt + " " + _MARK)
    before, after = text.split(_MARK)
    enc = lambda s: list(tokenizer(s, add_special_tokens=False)["input_ids"])   # noqa: E731
    return enc(before), enc(after)


def _initial_suffix(tokenizer, suffix_len: int) -> list[int]:
    """``" ! ! ! ..."``: one token per position that re-tokenizes to itself (a run of ``"!"``
    without spaces merges into fewer tokens, which would make every candidate unstable)."""
    for piece in (" !", "!", " x"):
        ids = list(tokenizer(piece, add_special_tokens=False)["input_ids"])
        if len(ids) == 1:
            cand = ids * suffix_len
            if list(tokenizer(tokenizer.decode(cand), add_special_tokens=False)["input_ids"]) == cand:
                return cand
    raise ValueError("no single-token piece among ' !', '!', ' x' re-tokenizes stably with this tokenizer")


def gcg_lite(model: nn.Module, tokenizer, prompt: str, target: str = "Sure, here is", *,
             suffix_len: int = 8, n_iter: int = 20, topk: int = 32, n_cand: int = 16,
             seed: int = 0, allowed: torch.Tensor | None = None, progress_bar: bool = True) -> GCGResult:
    """Greedy coordinate gradient search for a suffix that makes the model start with ``target``.

    Chapter 08. The suffix starts as ``" ! ! ..."``; candidates whose text does not re-tokenize
    to the same ids are dropped, so the attacked prompt (text) reproduces the optimised tokens.
    """
    import time

    if suffix_len < 1 or n_iter < 0 or topk < 1 or n_cand < 1:
        raise ValueError("suffix_len, topk and n_cand must be >= 1 and n_iter >= 0; got "
                         f"{suffix_len}, {topk}, {n_cand}, {n_iter}")
    t0 = time.perf_counter()
    gen = torch.Generator().manual_seed(seed)
    allowed = allowed_tokens(tokenizer) if allowed is None else allowed
    before, after = _pieces(tokenizer, prompt)
    tgt = list(tokenizer(target, add_special_tokens=False)["input_ids"])
    suffix = torch.tensor(_initial_suffix(tokenizer, suffix_len))
    emb = model.get_input_embeddings()
    W = emb.weight
    pre_ids, post_ids = torch.tensor(before), torch.tensor(after + tgt)
    n_pre, n_t = len(before), len(tgt)
    was = model.training
    model.eval()

    def seq(s):
        return torch.cat([pre_ids, s, post_ids])

    def losses_of(batch_suffix: torch.Tensor) -> torch.Tensor:
        ids = torch.stack([seq(s) for s in batch_suffix])
        with torch.no_grad():
            lg = model(input_ids=ids, use_cache=False).logits[:, -n_t - 1:-1].float()
        return torch.nn.functional.cross_entropy(lg.transpose(1, 2), ids[:, -n_t:],
                                                 reduction="none").mean(1)

    def stable(s: torch.Tensor) -> bool:
        text = tokenizer.decode(s.tolist())
        return list(tokenizer(text, add_special_tokens=False)["input_ids"]) == s.tolist()

    best, best_loss = suffix.clone(), float(losses_of(suffix[None])[0])
    hist = [best_loss]
    mask_allowed = torch.full((W.shape[0],), float("inf"))
    mask_allowed[allowed] = 0.0
    it = progress(range(n_iter), desc="GCG-lite") if progress_bar else range(n_iter)
    try:
        for _ in it:
            one_hot = torch.zeros(suffix_len, W.shape[0], dtype=W.dtype)
            one_hot[torch.arange(suffix_len), suffix] = 1.0
            one_hot.requires_grad_(True)
            with torch.enable_grad():
                e = torch.cat([emb(pre_ids), one_hot @ W.detach(), emb(post_ids)])[None]
                lg = model(inputs_embeds=e, use_cache=False).logits[0, -n_t - 1:-1].float()
                loss = torch.nn.functional.cross_entropy(lg, post_ids[-n_t:])
                (grad,) = torch.autograd.grad(loss, one_hot)
            top = (grad + mask_allowed).topk(topk, dim=1, largest=False).indices   # (S, topk)
            pos = torch.randint(0, suffix_len, (n_cand,), generator=gen)
            pick = top[pos, torch.randint(0, topk, (n_cand,), generator=gen)]
            cands = suffix.repeat(n_cand, 1)
            cands[torch.arange(n_cand), pos] = pick
            ok = [i for i in range(n_cand) if stable(cands[i])]
            if not ok:
                hist.append(hist[-1])
                continue
            cands = cands[ok]
            cl = losses_of(cands)
            j = int(cl.argmin())
            suffix = cands[j].clone()
            if float(cl[j]) < best_loss:
                best, best_loss = suffix.clone(), float(cl[j])
            hist.append(best_loss)
    finally:
        model.train(was)
    text = tokenizer.decode(best.tolist())
    sep = "" if text.startswith(" ") else " "
    return GCGResult(prompt, best.tolist(), text, prompt + sep + text, hist, time.perf_counter() - t0)


def random_suffixes(tokenizer, n: int, suffix_len: int, seed: int = 0,
                    allowed: torch.Tensor | None = None) -> list[str]:
    """``n`` suffixes of ``suffix_len`` random allowed tokens (the control for GCG's shift)."""
    allowed = allowed_tokens(tokenizer) if allowed is None else allowed
    rng = np.random.default_rng(seed)
    return [tokenizer.decode(allowed[rng.integers(0, len(allowed), suffix_len)].tolist())
            for _ in range(n)]


def attack_shift(acts_attacked: torch.Tensor, acts_clean: torch.Tensor) -> torch.Tensor:
    """The attack-induced shift ``r_A = mean(h(attacked) - h(clean))`` per layer: ``(L, d)``
    from paired ``(n, L, d)`` activations (chapter 08; the paper's Sec. 3.2)."""
    if acts_attacked.shape != acts_clean.shape:
        raise ValueError(f"paired activations needed, got {tuple(acts_attacked.shape)} and "
                         f"{tuple(acts_clean.shape)}")
    return (acts_attacked.double() - acts_clean.double()).mean(0)
