"""The five debiasing families of the paper on the toy VLA (chapter 19, notebook 03).

- prompt engineering: a mitigation sentence in the prompt (no training);
- prompt tuning: trainable vectors in the model's prompt slots, everything else frozen;
- LoRA: low-rank adapters (:class:`iclr25.lm.lora.LoRALinear`) on every linear layer of the top
  ``k`` blocks of the language model;
- fine-tuning: all weights of the last blocks of the language model;
- head pruning: importance of attention head ``h`` = |grad . w| of the capability loss minus
  |grad . w| of the bias loss, summed over the head's slice of the output projection; the
  lowest-scoring heads are removed (their output columns masked to zero).

The trained methods minimise the paper's alternative debiasing loss, mean |p_yes - 0.5| over
the training templates and training images (the vision encoder stays frozen, as in the paper).
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
from torch import nn

from ..lm.lora import LoRALinear
from ..progress import progress
from .protocol import option_probs
from .toy_vla import ToyVLA, WordTokenizer, example_loss, score_images

__all__ = ["METHODS", "bias_loss", "prompt_tuning", "lora", "finetune_last", "head_importance",
           "validation_bias", "tune_and_train",
           "prune_heads", "train_debias"]

METHODS = ("none", "prompt engineering", "prompt tuning", "LoRA", "fine-tuning", "head pruning")


def bias_loss(vla: ToyVLA, tok: WordTokenizer, bodies, orders, images: torch.Tensor) -> torch.Tensor:
    """Mean |p_yes - 0.5| over (prompt, image) pairs, p_yes renormalised over the two option
    words (differentiable). ``orders`` is accepted for symmetry with the prompt tables."""
    lp = score_images(vla, tok, bodies, images, ("Yes", "No"), grad=True)   # (n_t, n_i, 2)
    p_yes = torch.softmax(lp, -1)[..., 0]
    return (p_yes - 0.5).abs().mean()


def _freeze(vla: ToyVLA) -> ToyVLA:
    for p in vla.parameters():
        p.requires_grad_(False)
    return vla


def prompt_tuning(vla: ToyVLA, *, seed: int = 0) -> ToyVLA:
    """A copy with trainable prompt vectors (init N(0, 0.02)) and everything else frozen."""
    v = _freeze(copy.deepcopy(vla))
    g = torch.Generator().manual_seed(seed)
    v.prompt_vectors = nn.Parameter(0.02 * torch.randn(v.p, v.d, generator=g))
    return v


def lora(vla: ToyVLA, *, r: int = 4, alpha: float | None = None, top_k: int = 1, seed: int = 0) -> ToyVLA:
    """A copy with LoRA adapters on every linear layer of the top ``top_k`` blocks."""
    v = _freeze(copy.deepcopy(vla))
    g = torch.Generator().manual_seed(seed)
    alpha = float(r) if alpha is None else alpha                          # paper: alpha = r
    blocks = v.gpt.blocks
    if not 1 <= top_k <= len(blocks):
        raise ValueError(f"top_k must be in [1, {len(blocks)}], got {top_k!r}")
    for b in list(blocks)[-top_k:]:
        b.attn.qkv = LoRALinear(b.attn.qkv, r, alpha, 0.0, generator=g)
        b.attn.proj = LoRALinear(b.attn.proj, r, alpha, 0.0, generator=g)
        b.mlp[0] = LoRALinear(b.mlp[0], r, alpha, 0.0, generator=g)
        b.mlp[2] = LoRALinear(b.mlp[2], r, alpha, 0.0, generator=g)
    return v


def finetune_last(vla: ToyVLA, *, n_blocks: int = 1) -> ToyVLA:
    """A copy whose last ``n_blocks`` language-model blocks, final norm and head train."""
    v = _freeze(copy.deepcopy(vla))
    if not 1 <= n_blocks <= len(v.gpt.blocks):
        raise ValueError(f"n_blocks must be in [1, {len(v.gpt.blocks)}], got {n_blocks!r}")
    for b in list(v.gpt.blocks)[-n_blocks:]:
        for p in b.parameters():
            p.requires_grad_(True)
    for p in v.gpt.ln_f.parameters():
        p.requires_grad_(True)
    return v


def _head_grad_w(vla: ToyVLA, loss: torch.Tensor) -> torch.Tensor:
    """|grad . w| summed per head of each block's output projection: ``(n_layers, n_heads)``."""
    ws = [b.attn.proj.weight for b in vla.gpt.blocks]
    grads = torch.autograd.grad(loss, ws)
    H = vla.gpt.cfg.n_heads
    return torch.stack([(g * w).abs().view(w.shape[0], H, -1).sum((0, 2)) for g, w in zip(grads, ws)])


def head_importance(vla: ToyVLA, tok: WordTokenizer, cap_examples, images: torch.Tensor,
                    bodies, orders, bias_images: torch.Tensor) -> torch.Tensor:
    """Importance per head (paper's structured pruning): |grad . w| of the capability loss
    minus |grad . w| of the bias loss. Low scores are pruned first."""
    v = copy.deepcopy(vla)
    for b in v.gpt.blocks:
        b.attn.proj.weight.requires_grad_(True)
    cap = _head_grad_w(v, example_loss(v, cap_examples, images))
    bias = _head_grad_w(v, bias_loss(v, tok, bodies, orders, bias_images))
    return cap - bias


def prune_heads(vla: ToyVLA, scores: torch.Tensor, n_heads: int) -> tuple[ToyVLA, list]:
    """A copy with the ``n_heads`` lowest-scoring heads removed (their columns of the output
    projection set to zero). Returns the copy and the pruned (layer, head) pairs."""
    L, H = scores.shape
    if not 0 <= n_heads < L * H:
        raise ValueError(f"n_heads must be in [0, {L * H - 1}], got {n_heads!r}")
    v = _freeze(copy.deepcopy(vla))
    flat = torch.argsort(scores.flatten())[:n_heads].tolist()
    pruned = [(i // H, i % H) for i in flat]
    hd = v.gpt.cfg.d_model // H
    with torch.no_grad():
        for l, h in pruned:
            v.gpt.blocks[l].attn.proj.weight[:, h * hd:(h + 1) * hd] = 0.0
    return v, pruned


def train_debias(vla: ToyVLA, tok: WordTokenizer, bodies, orders, images: torch.Tensor, *,
                 n_steps: int, lr: float = 1e-3, n_images: int = 16, seed: int = 0,
                 desc: str = "debiasing") -> dict:
    """Minimise :func:`bias_loss` over random batches of ``n_images`` training images with Adam
    (every training prompt each step). Returns ``loss`` per step and ``seconds``."""
    params = [p for p in vla.parameters() if p.requires_grad]
    if not params:
        raise ValueError("nothing to train: use prompt_tuning, lora or finetune_last first")
    opt = torch.optim.Adam(params, lr=lr)
    g = torch.Generator().manual_seed(seed)
    hist, t0 = [], time.time()
    vla.train()
    for _ in progress(range(n_steps), desc=desc):
        idx = torch.randint(0, len(images), (n_images,), generator=g)
        loss = bias_loss(vla, tok, bodies, orders, images[idx])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        hist.append(float(loss.detach()))
    vla.eval()
    return {"loss": hist, "seconds": time.time() - t0}


def validation_bias(vla: ToyVLA, tok: WordTokenizer, meta, portraits) -> float:
    """Mean |Delta| of ``vla`` on the prompts of ``meta`` (training templates) and held-out
    validation ``portraits``: the quantity that selects a method's learning rate."""
    from .toy_vla import measure_bias
    return float(measure_bias(vla, tok, meta, portraits)["delta"].abs().mean())


def tune_and_train(make, vla: ToyVLA, tok: WordTokenizer, meta, images: torch.Tensor, val,
                   capability_metas, *, lrs, n_steps: int, n_images: int = 8, seed: int = 0,
                   keep: float = 0.9, desc: str = "debiasing") -> tuple[ToyVLA, dict]:
    """Train ``make(vla)`` (a debiasing family: :func:`prompt_tuning`, :func:`lora`,
    :func:`finetune_last`) with :func:`train_debias` once per learning rate in ``lrs`` and keep
    the copy with the lowest validation bias among those that keep >= ``keep`` x the undebiased
    model's colour multiple-choice and yes/no colour accuracy on the validation portraits
    ``val`` (if none does, the one with the highest summed accuracy). ``capability_metas`` =
    (colour multiple-choice prompts, yes/no colour prompts), *training* templates: nothing of
    the evaluation is used to select. The same grid, steps and rule for every family: the fair
    tuning budget. Returns the chosen model and ``{"lr", "val_bias", "val_mcq", "val_yesno",
    "grid", "models", "seconds"}`` (``models``: every trained copy, by learning rate)."""
    from .toy_vla import color_accuracy, yesno_color_accuracy
    if not lrs:
        raise ValueError("lrs must name at least one learning rate")
    mcq_meta, yn_meta = capability_metas
    bodies, orders = meta["body"].tolist(), meta["order"].tolist()
    cap = lambda v: (color_accuracy(v, tok, mcq_meta, val), yesno_color_accuracy(v, tok, yn_meta, val))
    base = cap(vla)
    grid, t0 = [], time.time()
    for lr in lrs:
        v = make(vla)
        train_debias(v, tok, bodies, orders, images, n_steps=n_steps, lr=lr, n_images=n_images,
                     seed=seed, desc=f"{desc}, lr {lr:g}")
        mcq, yn = cap(v)
        grid.append(dict(lr=lr, model=v, val_bias=validation_bias(v, tok, meta, val), val_mcq=mcq,
                         val_yesno=yn))
    ok = [r for r in grid if r["val_mcq"] >= keep * base[0] and r["val_yesno"] >= keep * base[1]]
    best = (min(ok, key=lambda r: r["val_bias"]) if ok
            else max(grid, key=lambda r: r["val_mcq"] + r["val_yesno"]))
    keys = ("lr", "val_bias", "val_mcq", "val_yesno")
    info = {k: best[k] for k in keys}
    info["grid"] = [{k: r[k] for k in keys} for r in grid]
    info["models"] = {r["lr"]: r["model"] for r in grid}
    info["seconds"] = time.time() - t0
    return best["model"], info
