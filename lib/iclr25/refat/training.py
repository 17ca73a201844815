"""Refusal training (SFT), ReFAT and an attack-in-the-loop baseline on one cached-state trainer.
Chapter 08 (ReFAT), notebooks ``01-refusal-direction`` (the SFT that gives SmolLM2 its refusal)
and ``03-refat-training``.

LoRA adapts the top decoder layers only, so the residual stream entering the lowest adapted
layer ``start`` is the same at every step: it is computed once per example and each step runs
only layers ``start ...`` (as :func:`iclr25.lm.train` does; about ten times cheaper than a full
forward). The language-model head is applied at the response positions only (the loss is
response-only; the prompt is masked).

ReFAT (paper, Alg. 1 / Eq. 10), in our notation::

    every K steps:   r_l = mean_harmful h_l - mean_harmless h_l      (current weights, l >= start)
    each step:       batch = B/2 harmful (-> refusal) + B/2 harmless (-> answer)
                     with probability p: RFA (Eq. 3) on the harmful rows at every l in rfa_layers
                     (every position of the right-padded rows: training keeps ``positions="all"``)
                     loss = response-only cross-entropy;  AdamW step

``p_rfa = 0`` is plain refusal training (the paper's RT baseline). ``attack=`` turns the loop
into adversarial training with an input-space attack in the loop (our AT-lite).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .. import lm
from ..lm._common import pad_id, position_ids
from ..progress import progress
from .data import PromptSet
from .features import MODES, RefusalFeature, rfa

__all__ = ["TrainData", "prepare", "hidden_at", "forward_top", "response_loss", "train_refusal",
           "top_layer_feature"]


class _Stop(Exception):
    pass


@torch.no_grad()
def hidden_at(model: nn.Module, layer: int, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The residual stream entering decoder layer ``layer`` (the forward stops there)."""
    block = lm.decoder_layers(model)[layer]
    seen = {}

    def pre(mod, args, kwargs):
        seen["h"] = (args[0] if args else kwargs["hidden_states"]).detach()
        raise _Stop

    h = block.register_forward_pre_hook(pre, with_kwargs=True)
    was = model.training
    model.eval()
    try:
        model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask), use_cache=False)
    except _Stop:
        pass
    finally:
        h.remove()
        model.train(was)
    return seen["h"]


@dataclass
class TrainData:
    """Tokenized (prompt, response) rows with their cached states at layer ``start`` (chapter 08).

    Per row ``i`` (trimmed to its length): ``ids[i]``, ``resp[i]`` (response mask), ``hidden[i]``
    (``(len, d)``), ``prompt_end[i]`` (index of the last prompt token), ``harmful[i]``; and the
    ``prompts`` / ``targets`` texts.
    """

    ids: list[torch.Tensor]
    resp: list[torch.Tensor]
    hidden: list[torch.Tensor]
    prompt_end: np.ndarray
    harmful: np.ndarray
    prompts: list[str]
    targets: list[str]
    start: int
    hidden_rfa: list[torch.Tensor] | None = None
    rfa_below: RefusalFeature | None = None

    def __len__(self) -> int:
        return len(self.ids)


def _rows(model, tokenizer, prompts, targets, start, batch_size=16, edit=None):
    enc = lm.tokenize_pairs(tokenizer, prompts, targets)
    ids, mask, resp = enc["input_ids"], enc["attention_mask"], enc["response_mask"]
    lens = mask.sum(1)
    out_ids, out_resp, out_h, ends = [], [], [], []
    for s in range(0, len(ids), batch_size):
        sl = slice(s, s + batch_size)
        T = int(lens[sl].max())
        if edit is None:
            h = hidden_at(model, start, ids[sl, :T], mask[sl, :T])
        else:
            with edit():
                h = hidden_at(model, start, ids[sl, :T], mask[sl, :T])
        for j in range(h.shape[0]):
            n = int(lens[s + j])
            out_ids.append(ids[s + j, :n].clone())
            out_resp.append(resp[s + j, :n].clone())
            out_h.append(h[j, :n].clone())
            ends.append(int(resp[s + j, :n].nonzero()[0]) - 1)
    return out_ids, out_resp, out_h, np.array(ends)


def prepare(model: nn.Module, tokenizer, ps: PromptSet, start: int,
            rfa_below: RefusalFeature | None = None, mode: str = "mean") -> TrainData:
    """Tokenize a prompt set's (prompt, target) pairs and cache the states entering ``start``.

    ``rfa_below``: a refusal feature at layers below ``start`` (frozen, so its directions never
    change in training); the harmful rows' states are cached a second time with RFA (``mode``)
    applied at those layers, which the trainer uses on the steps that apply RFA.
    """
    n = len(lm.decoder_layers(model))
    if not 0 < start < n:
        raise ValueError(f"start must be a decoder layer in 1..{n - 1}, got {start}")
    prompts = list(ps.harmful) + list(ps.harmless)
    targets = list(ps.harmful_targets) + list(ps.harmless_targets)
    ids, resp, hid, ends = _rows(model, tokenizer, prompts, targets, start)
    harmful = np.array([1] * len(ps.harmful) + [0] * len(ps.harmless), dtype=bool)
    data = TrainData(ids, resp, hid, ends, harmful, prompts, targets, start)
    if rfa_below is not None:
        if max(rfa_below.layers) >= start:
            raise ValueError(f"rfa_below must hold layers below start={start}, got {rfa_below.layers}")
        nh = len(ps.harmful)
        _, _, hid_r, _ = _rows(model, tokenizer, prompts[:nh], targets[:nh], start,
                               edit=lambda: rfa(model, rfa_below, mode=mode, positions="all"))
        data.hidden_rfa = hid_r + [None] * (len(prompts) - nh)
        data.rfa_below = rfa_below
    return data


def _collate(ids, resp, hidden, pad: int):
    T = max(len(x) for x in ids)
    B, d = len(ids), hidden[0].shape[-1]
    I = torch.full((B, T), pad, dtype=torch.long)
    M = torch.zeros((B, T), dtype=torch.long)
    R = torch.zeros((B, T), dtype=torch.long)
    H = torch.zeros((B, T, d), dtype=hidden[0].dtype)
    for i, (a, r, h) in enumerate(zip(ids, resp, hidden)):
        n = len(a)
        I[i, :n], M[i, :n], R[i, :n], H[i, :n] = a, 1, r, h
    return I, M, R, H


def forward_top(model: nn.Module, start: int, hidden: torch.Tensor, mask: torch.Tensor,
                stop_after: int | None = None) -> torch.Tensor:
    """Run decoder layers ``start ...`` (and the final norm) on ``hidden``; the last hidden state
    ``(B, T, d)``. ``stop_after``: stop once that layer's input has been seen (raises nothing;
    returns ``None``)."""
    inner = model.model
    full = inner.layers
    handle = None
    if stop_after is not None:
        def pre(mod, args, kwargs):
            raise _Stop
        top = stop_after + 1
        if top < len(full):
            handle = full[top].register_forward_pre_hook(pre, with_kwargs=True)
    try:
        inner.layers = nn.ModuleList(list(full)[start:])
        out = inner(inputs_embeds=hidden, attention_mask=mask, position_ids=position_ids(mask),
                    use_cache=False)
        return out.last_hidden_state
    except _Stop:
        return None
    finally:
        inner.layers = full
        if handle is not None:
            handle.remove()


def response_loss(model: nn.Module, last_hidden: torch.Tensor, ids: torch.Tensor,
                  resp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over response tokens, with the LM head applied only at the
    positions that predict them (equals :func:`iclr25.lm.lm_loss` on the full logits; tested)."""
    m = (resp[:, 1:] * mask[:, 1:]).bool()
    h = last_hidden[:, :-1][m]
    logits = model.lm_head(h).float()
    return torch.nn.functional.cross_entropy(logits, ids[:, 1:][m])


@torch.no_grad()
def top_layer_feature(model: nn.Module, data: TrainData, rows_h: Sequence[int],
                      rows_s: Sequence[int], layers: Sequence[int]) -> RefusalFeature:
    """The refusal feature at ``layers`` (all ``>= data.start``) from cached rows: harmful
    ``rows_h`` against harmless ``rows_s``, at each row's last prompt token (chapter 08)."""
    if min(layers) < data.start:
        raise ValueError(f"layers must be >= the cached start layer {data.start}, got {min(layers)}")
    from .features import _hook_streams

    rows = list(rows_h) + list(rows_s)
    I, M, R, H = _collate([data.ids[i] for i in rows], [data.resp[i] for i in rows],
                          [data.hidden[i] for i in rows], 0)
    ends = torch.as_tensor(data.prompt_end[rows])
    ar = torch.arange(len(rows))
    rec = {}

    def record(l, h):
        rec[l] = h[ar, ends].double()

    handles = _hook_streams(model, layers, record)
    was = model.training
    model.eval()
    try:
        forward_top(model, data.start, H, M,
                    stop_after=max(layers) if max(layers) < len(lm.decoder_layers(model)) else None)
    finally:
        for h in handles:
            h.remove()
        model.train(was)
    acts = torch.stack([rec[l] for l in layers], 1)
    nh = len(rows_h)
    return RefusalFeature.from_contrast(acts[:nh], acts[nh:], list(layers))


def train_refusal(model: nn.Module, tokenizer, data: TrainData, *, n_steps: int, batch_size: int,
                  lr: float, seed: int = 0, p_rfa: float = 0.0, recalc_every: int = 4,
                  n_dir_samples: int = 16, rfa_layers: Sequence[int] | None = None,
                  mode: str = "mean", grad_clip: float | None = 1.0,
                  attack: Callable[[nn.Module, list[str]], list[str]] | None = None,
                  desc: str = "training") -> dict:
    """Train the model's trainable parameters (LoRA) on refusal data; ReFAT when ``p_rfa > 0``.

    Chapter 08. Each step draws ``batch_size / 2`` harmful and ``batch_size / 2`` harmless rows.
    With ``p_rfa > 0`` the refusal feature at ``rfa_layers`` (default: every layer from
    ``data.start``) is recomputed from ``n_dir_samples`` rows per class every ``recalc_every``
    steps, and with probability ``p_rfa`` RFA (``mode``) is applied to the harmful rows.
    ``attack(model, prompts) -> prompts``: AT-lite, the harmful rows' prompts are attacked
    against the current model each step (their states are recomputed).

    Returns the history: ``loss``, ``step_seconds`` (per step), ``dir_seconds`` (direction
    recomputation, included in the step), ``attack_seconds``, ``rfa_applied``.
    """
    if not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
    if not isinstance(batch_size, int) or batch_size < 2 or batch_size % 2:
        raise ValueError(f"batch_size must be an even integer >= 2, got {batch_size!r}")
    if not 0 <= p_rfa <= 1:
        raise ValueError(f"p_rfa must be in [0, 1], got {p_rfa}")
    if mode not in MODES:
        raise ValueError(f"unknown RFA mode {mode!r}; valid: {', '.join(MODES)}")
    if not isinstance(recalc_every, int) or recalc_every < 1:
        raise ValueError(f"recalc_every must be a positive integer, got {recalc_every!r}")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("no parameter requires grad: add LoRA adapters first (iclr25.lm.lora.add)")
    n_layers = len(lm.decoder_layers(model))
    low = lm.training.lowest_trainable_layer(model)
    if low is None or low < data.start:
        raise ValueError(f"the data caches states at layer {data.start} but layer {low} trains: "
                         "prepare the data at (or below) the lowest adapted layer")
    rfa_layers = list(range(data.start, n_layers + 1)) if rfa_layers is None else list(rfa_layers)
    if min(rfa_layers) < data.start:
        raise ValueError(f"rfa_layers must be >= the cached start layer {data.start} (layers below "
                         "are ablated through prepare(..., rfa_below=...))")
    harm_idx, safe_idx = np.flatnonzero(data.harmful), np.flatnonzero(~data.harmful)
    if len(harm_idx) == 0 or len(safe_idx) == 0:
        raise ValueError("the data needs both harmful and harmless rows")
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    rng = np.random.default_rng(seed)
    pad = pad_id(tokenizer)
    half = batch_size // 2
    hist = {"loss": [], "step_seconds": [], "dir_seconds": [], "attack_seconds": [], "rfa_applied": []}
    rf = None
    model.train()
    for step in progress(range(n_steps), desc=desc):
        t0 = time.perf_counter()
        td = 0.0
        if p_rfa > 0 and step % recalc_every == 0:
            rh = rng.choice(harm_idx, min(n_dir_samples, len(harm_idx)), replace=False)
            rs = rng.choice(safe_idx, min(n_dir_samples, len(safe_idx)), replace=False)
            rf = top_layer_feature(model, data, rh, rs, rfa_layers)
            model.train()
            td = time.perf_counter() - t0
        rows = list(rng.choice(harm_idx, half)) + list(rng.choice(safe_idx, half))
        ids = [data.ids[i] for i in rows]
        resp = [data.resp[i] for i in rows]
        hid = [data.hidden[i] for i in rows]
        ta = 0.0
        if attack is not None:
            t1 = time.perf_counter()
            new_prompts = attack(model, [data.prompts[i] for i in rows[:half]])
            a_ids, a_resp, a_hid, _ = _rows(model, tokenizer, new_prompts,
                                            [data.targets[i] for i in rows[:half]], data.start)
            ids[:half], resp[:half], hid[:half] = a_ids, a_resp, a_hid
            model.train()
            ta = time.perf_counter() - t1
        use_rfa = p_rfa > 0 and rng.random() < p_rfa
        if use_rfa and data.hidden_rfa is not None and attack is None:
            hid[:half] = [data.hidden_rfa[i] for i in rows[:half]]
        I, M, R, H = _collate(ids, resp, hid, pad)
        if use_rfa:
            with rfa(model, rf, rfa_layers, mode=mode, rows=list(range(half)), positions="all"):
                last = forward_top(model, data.start, H, M)
        else:
            last = forward_top(model, data.start, H, M)
        loss = response_loss(model, last, I, R, M)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        opt.step()
        hist["loss"].append(float(loss.detach()))
        hist["step_seconds"].append(time.perf_counter() - t0)
        hist["dir_seconds"].append(td)
        hist["attack_seconds"].append(ta)
        hist["rfa_applied"].append(bool(use_rfa))
    model.eval()
    return hist
