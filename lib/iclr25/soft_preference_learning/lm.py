"""Preference training of a causal LM with the SPL loss: precomputed reference log-probabilities,
LoRA adapters (:mod:`iclr25.lm.lora`) and the frozen lower layers cached (chapter 17).

A :class:`PreferenceData` holds each distinct (prompt, response) sequence once and the pairs as
indices into them, so a step runs each distinct sequence of its pairs once (a bandit with K
answers costs K sequences a step, however many pairs). :func:`train_preference` starts every
forward at the lowest trainable decoder layer from a cache of that layer's input, and runs the LM
head only on the response tokens (tested equal to :func:`iclr25.lm.sequence_logprobs`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..lm import sequence_logprobs, tokenize_pairs
from ..lm.hooks import decoder_layers
from ..lm.training import lowest_trainable_layer
from ..progress import progress
from .losses import check_coefficients, spl_loss

__all__ = ["PreferenceData", "make_preference_data", "reference_logprobs", "train_preference",
           "response_logprobs", "policy_logprobs", "add_top_lora", "ALL_LINEAR"]

#: every linear layer of a Llama decoder layer
ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def add_top_lora(model: nn.Module, n_layers: int, r: int = 8, *, seed: int = 0,
                 targets=ALL_LINEAR) -> nn.Module:
    """LoRA (rank ``r``, scale ``2r / r = 2``) on ``targets`` of the top ``n_layers`` decoder
    layers; everything else frozen (chapter 17; :func:`iclr25.lm.lora.add`)."""
    from ..lm import lora

    total = len(decoder_layers(model))
    if not 1 <= n_layers <= total:
        raise ValueError(f"n_layers must be in [1, {total}], got {n_layers}")
    return lora.add(model, r=r, alpha=2 * r, targets=targets,
                    layers=range(total - n_layers, total), seed=seed)


@dataclass
class PreferenceData:
    """Distinct sequences (right-padded) and preference pairs as indices into them (chapter 17).

    Attributes
    ----------
    input_ids, attention_mask, response_mask
        ``(S, L)``: the distinct prompt+response sequences (:func:`iclr25.lm.tokenize_pairs`).
    chosen, rejected
        ``(n,)`` LongTensors: pair ``k`` prefers sequence ``chosen[k]`` to ``rejected[k]``.
    ref_logps
        ``(S,)`` the reference model's sequence log-probabilities (:func:`reference_logprobs`),
        ``None`` until computed.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor
    chosen: torch.Tensor
    rejected: torch.Tensor
    ref_logps: torch.Tensor | None = None

    @property
    def n_pairs(self) -> int:
        return int(self.chosen.numel())

    @property
    def n_sequences(self) -> int:
        return int(self.input_ids.shape[0])


def make_preference_data(tokenizer, prompts: Sequence[Any], chosen: Sequence[str],
                         rejected: Sequence[str], *, chat: bool = True, add_eos: bool = True,
                         max_len: int | None = None) -> PreferenceData:
    """Tokenize preference pairs ``(prompt, chosen response, rejected response)``; identical
    sequences are stored once (chapter 17)."""
    prompts, chosen, rejected = list(prompts), list(chosen), list(rejected)
    if not (len(prompts) == len(chosen) == len(rejected)) or not prompts:
        raise ValueError(f"prompts, chosen and rejected must be non-empty lists of one length, got "
                         f"{len(prompts)}, {len(chosen)}, {len(rejected)}")
    index: dict[tuple, int] = {}
    seq_p, seq_r = [], []

    def idx(p, r):
        key = (repr(p), r)
        if key not in index:
            index[key] = len(seq_p)
            seq_p.append(p)
            seq_r.append(r)
        return index[key]

    w = [idx(p, c) for p, c in zip(prompts, chosen)]
    l = [idx(p, r) for p, r in zip(prompts, rejected)]
    if any(a == b for a, b in zip(w, l)):
        raise ValueError("a pair prefers a response to itself (chosen == rejected)")
    batch = tokenize_pairs(tokenizer, seq_p, seq_r, chat=chat, max_len=max_len, add_eos=add_eos)
    if bool((batch["response_mask"].sum(1) == 0).any()):
        raise ValueError("a sequence has no response token left (max_len too small?)")
    return PreferenceData(batch["input_ids"], batch["attention_mask"], batch["response_mask"],
                          torch.tensor(w), torch.tensor(l))


@torch.no_grad()
def reference_logprobs(model: nn.Module, data: PreferenceData, *, batch_size: int = 16) -> torch.Tensor:
    """The reference model's summed response log-probability of every distinct sequence,
    computed once before training and stored in ``data.ref_logps`` (chapter 17). Call it on the
    model before LoRA is added (a fresh adapter changes nothing, so after is the same)."""
    out = []
    was = model.training
    model.eval()
    for s in range(0, data.n_sequences, batch_size):
        sl = slice(s, s + batch_size)
        out.append(sequence_logprobs(model, data.input_ids[sl], data.attention_mask[sl],
                                     data.response_mask[sl]).double())
    model.train(was)
    data.ref_logps = torch.cat(out)
    return data.ref_logps


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def _inner(model: nn.Module) -> nn.Module:
    inner = getattr(model, "model", None)
    if inner is None or not isinstance(getattr(inner, "layers", None), nn.ModuleList):
        raise TypeError(f"{type(model).__name__} has no .model.layers (a Llama-style transformers "
                        "model is expected)")
    return inner


def policy_logprobs(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    response_mask: torch.Tensor, *, start: int = 0,
                    hidden: torch.Tensor | None = None,
                    temperature: float | Sequence[float] = 1.0) -> torch.Tensor:
    """Summed response log-probabilities ``(batch,)`` float64, differentiable; the LM head runs
    on response positions only (chapter 17).

    ``start > 0`` with ``hidden`` (the input of decoder layer ``start``) runs the forward from
    that layer on (the trainer's cached path). ``temperature`` divides the logits (token-level
    temperature scaling); a list of temperatures returns ``(len(temperature), batch)`` from one
    forward pass."""
    inner = _inner(model)
    full = inner.layers
    if start:
        if hidden is None:
            raise ValueError("start > 0 needs the hidden state entering that layer")
        kw = {"inputs_embeds": hidden}
    else:
        kw = {"input_ids": input_ids}
    try:
        if start:
            inner.layers = nn.ModuleList(list(full)[start:])
        last = inner(attention_mask=attention_mask, position_ids=_positions(attention_mask),
                     use_cache=False, **kw).last_hidden_state
    finally:
        inner.layers = full
    sel = (response_mask[:, 1:] * attention_mask[:, 1:]).bool()
    rows = torch.arange(input_ids.shape[0], device=input_ids.device)[:, None].expand_as(sel)[sel]
    logits = model.get_output_embeddings()(last[:, :-1][sel]).float()
    tgt = input_ids[:, 1:][sel]
    temps = [temperature] if isinstance(temperature, (int, float)) else list(temperature)
    out = []
    for T in temps:
        lg = logits if T == 1.0 else logits / T
        tok = lg.gather(-1, tgt[:, None])[:, 0] - torch.logsumexp(lg, -1)
        out.append(torch.zeros(input_ids.shape[0], dtype=torch.float64,
                               device=tok.device).index_add(0, rows, tok.double()))
    return out[0] if isinstance(temperature, (int, float)) else torch.stack(out)


@torch.no_grad()
def _hidden_inputs(model: nn.Module, layer: int, ids: torch.Tensor, mask: torch.Tensor):
    out = model(input_ids=ids, attention_mask=mask, position_ids=_positions(mask),
                output_hidden_states=True, use_cache=False)
    return out.hidden_states[layer].detach()   # the input of decoder layer `layer`


def train_preference(model: nn.Module, data: PreferenceData, *, alpha: float, beta: float,
                     n_steps: int, batch_size: int | None, lr: float, seed: int = 0,
                     cache_frozen: bool | None = None, grad_clip: float | None = 1.0,
                     weight_decay: float = 0.0, on_step: Callable[[int, dict], Any] | None = None,
                     desc: str = "preference training") -> dict[str, Any]:
    """Train the parameters of ``model`` that require grad (LoRA adapters) on the SPL loss
    (``alpha = beta``: DPO) with AdamW (chapter 17).

    Parameters
    ----------
    data
        A :class:`PreferenceData` with ``ref_logps`` (:func:`reference_logprobs`).
    alpha, beta
        The entropy and the cross-entropy coefficients.
    n_steps, batch_size, lr, seed
        Steps; pairs per step (``None`` or at least ``n_pairs``: every pair each step); the
        learning rate (constant); ``seed`` fixes the pairs drawn.
    cache_frozen
        Cache the input of the lowest trainable decoder layer per sequence and start each
        forward there. ``None``: whenever that layer is above 0 and the embeddings are frozen.

    Returns
    -------
    dict
        ``step``, ``loss``, ``margin`` (mean implicit reward margin), ``accuracy`` (share of pairs
        with a positive margin) per step, ``seconds``, ``cached``, ``start_layer``,
        ``tokens`` (sequence tokens forwarded). The model is left in eval mode.
    """
    check_coefficients(alpha, beta)
    if data.ref_logps is None:
        raise ValueError("data.ref_logps is missing: call reference_logprobs(model, data) on the "
                         "reference model first")
    if not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive integer or None, got {batch_size!r}")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("no parameter of the model requires grad: add LoRA adapters "
                         "(iclr25.lm.lora.add) first")
    start = lowest_trainable_layer(model)
    can_cache = start is not None and start > 0
    if cache_frozen is None:
        cache_frozen = can_cache
    if cache_frozen and not can_cache:
        raise ValueError("cache_frozen=True needs frozen embeddings and a lowest trainable decoder "
                         f"layer above 0; got {start}")
    first = start if cache_frozen else 0
    device = next(model.parameters()).device
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    gen = torch.Generator().manual_seed(seed)
    cache: dict[int, torch.Tensor] = {}
    ref = data.ref_logps.double()
    n = data.n_pairs
    full_batch = batch_size is None or batch_size >= n
    hist: dict[str, Any] = {"step": [], "loss": [], "margin": [], "accuracy": []}
    tokens = 0
    model.eval()   # no dropout anywhere: cached and uncached steps compute the same thing
    t0 = time.perf_counter()
    for step in progress(range(n_steps), desc=desc):
        pick = torch.arange(n) if full_batch else torch.randint(0, n, (batch_size,), generator=gen)
        w, l = data.chosen[pick], data.rejected[pick]
        # identical pairs once, weighted by their count (the same mean loss)
        S = data.n_sequences
        key, counts = torch.unique(w * S + l, return_counts=True)
        w, l = key // S, key % S
        seqs, inv = torch.unique(torch.cat([w, l]), return_inverse=True)
        mask = data.attention_mask[seqs]
        width = int(mask.sum(1).max())
        ids, mask, resp = (data.input_ids[seqs][:, :width].to(device), mask[:, :width].to(device),
                           data.response_mask[seqs][:, :width].to(device))
        hidden = None
        if cache_frozen:
            missing = [int(s) for s in seqs if int(s) not in cache]
            if missing:
                sel = torch.tensor(missing)
                h = _hidden_inputs(model, first, data.input_ids[sel].to(device),
                                   data.attention_mask[sel].to(device))
                for s, hs in zip(missing, h):
                    cache[s] = hs
            hidden = torch.stack([cache[int(s)][:width] for s in seqs])
        lp = policy_logprobs(model, ids, mask, resp, start=first, hidden=hidden)
        tokens += int(mask.sum())
        k = len(w)
        pw, pl = lp[inv[:k]], lp[inv[k:]]
        rw, rl = ref[w].to(lp.device), ref[l].to(lp.device)
        cnt = counts.to(lp.dtype).to(lp.device)
        loss = spl_loss(pw, pl, rw, rl, alpha, beta, weight=cnt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        opt.step()
        with torch.no_grad():
            margin = alpha * (pw - pl) - beta * (rw - rl)
            logs = {"loss": float(loss), "margin": float((margin * cnt).sum() / cnt.sum()),
                    "accuracy": float(((margin > 0).double() * cnt).sum() / cnt.sum())}
        hist["step"].append(step)
        for name in ("loss", "margin", "accuracy"):
            hist[name].append(logs[name])
        if on_step is not None and on_step(step, logs) is True:
            break
    model.eval()
    hist["seconds"] = time.perf_counter() - t0
    hist["cached"] = bool(cache_frozen)
    hist["start_layer"] = first
    hist["tokens"] = tokens
    return hist


@torch.no_grad()
def response_logprobs(model: nn.Module, tokenizer, prompt: Any, responses: Sequence[str], *,
                      temperatures: Sequence[float] = (1.0,), chat: bool = True,
                      add_eos: bool = True, batch_size: int = 16) -> torch.Tensor:
    """``log pi_T(response | prompt)`` of each response under token-level temperature ``T``:
    a ``(len(temperatures), len(responses))`` float64 tensor (chapter 17).

    The response is scored as it is trained (the chat template's assistant turn, closed by its
    end-of-turn token; with ``chat=False`` the plain continuation, ended by EOS when
    ``add_eos``), so ``exp`` of a row is the probability of the exact responses."""
    temps = [float(t) for t in temperatures]
    if any(not t > 0 for t in temps):
        raise ValueError(f"temperatures must be > 0, got {temperatures!r}")
    responses = list(responses)
    batch = tokenize_pairs(tokenizer, [prompt] * len(responses), responses, chat=chat,
                           add_eos=add_eos)
    out = torch.zeros(len(temps), len(responses), dtype=torch.float64)
    was = model.training
    model.eval()
    for s in range(0, len(responses), batch_size):
        sl = slice(s, s + batch_size)
        out[:, sl] = policy_logprobs(model, batch["input_ids"][sl], batch["attention_mask"][sl],
                                     batch["response_mask"][sl], temperature=temps).cpu()
    model.train(was)
    return out
