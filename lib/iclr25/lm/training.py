"""Fine-tuning ``transformers`` causal LMs: prompt/response batches with response-only masking,
and a training loop (``tinygpt.train``'s, with a ``loss_fn`` and an ``on_step``) that caches the
frozen lower layers' outputs when only the top layers train.

Part of the shared core (:mod:`iclr25.lm`). Chapters 08 (ReFAT) and 17 (soft preference
learning) train LoRA adapters on SmolLM2 with it.

Why the cache: with LoRA on the top ``k`` of 30 layers, the forward through the 30 - k frozen
layers dominates a step (1.9 s of a 3 s step on one core), and it is the same every time an
example comes round again. The trainer computes the hidden state entering the lowest trainable
layer once per example and starts later forwards there (tested equal to the uncached step).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from ..progress import progress
from ..tinygpt import SCHEDULES, lr_schedule
from ._common import _device_of, pad_batch, pad_id, position_ids
from .generation import chat_text
from .hooks import decoder_layers

__all__ = ["tokenize_pairs", "lm_loss", "train", "forward_from_layer", "lowest_trainable_layer"]


def tokenize_pairs(tokenizer, prompts: Sequence[Any], responses: Sequence[str], *,
                   chat: bool = True, system: str | None = None, max_len: int | None = None,
                   add_eos: bool = True) -> dict[str, torch.Tensor]:
    """Tokenize (prompt, response) pairs into a right-padded training batch.

    Part of the shared core (chapters 08, 17). ``response_mask`` is 1 on the response's tokens
    only, so :func:`lm_loss` trains on the response and not the prompt.

    Parameters
    ----------
    prompts, responses
        Equal-length lists; a prompt is a user message or a message list (as in
        :func:`iclr25.lm.generate`).
    chat
        Render with the chat template (the response becomes the assistant's turn, closed by the
        template's end-of-turn token); ``False`` concatenates plain text.
    max_len
        Cut each example to its first ``max_len`` tokens.
    add_eos
        With ``chat=False``, end each response with the EOS token.

    Returns
    -------
    dict
        ``input_ids``, ``attention_mask``, ``response_mask``: ``(n, max_len)`` LongTensors.
    """
    prompts, responses = list(prompts), list(responses)
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    seqs, masks = [], []
    for p, r in zip(prompts, responses):
        if chat:
            msgs = [{"role": "user", "content": p}] if isinstance(p, str) else list(p)
            head = chat_text(tokenizer, msgs, system, add_generation_prompt=True)
            whole = chat_text(tokenizer, msgs + [{"role": "assistant", "content": r}], system,
                              add_generation_prompt=False)
            h = list(tokenizer(head, add_special_tokens=False)["input_ids"])
            w = list(tokenizer(whole, add_special_tokens=False)["input_ids"])
            if w[:len(h)] != h:     # the template re-renders the prompt: tokenize apart
                w = h + list(tokenizer(whole[len(head):] if whole.startswith(head) else r,
                                       add_special_tokens=False)["input_ids"])
        else:
            if not isinstance(p, str):
                raise TypeError("with chat=False prompts must be strings")
            h = list(tokenizer(p)["input_ids"])
            w = h + list(tokenizer(r, add_special_tokens=False)["input_ids"])
            if add_eos and tokenizer.eos_token_id is not None:
                w.append(int(tokenizer.eos_token_id))
        m = [0] * len(h) + [1] * (len(w) - len(h))
        if max_len is not None:
            w, m = w[:max_len], m[:max_len]
        seqs.append(w)
        masks.append(m)
    ids, att = pad_batch(seqs, pad_id(tokenizer), left=False)
    resp = torch.zeros_like(ids)
    for i, m in enumerate(masks):
        resp[i, :len(m)] = torch.tensor(m, dtype=torch.long)
    return {"input_ids": ids, "attention_mask": att, "response_mask": resp}


def lm_loss(logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean next-token NLL over the target tokens: those with ``response_mask`` 1 when the batch
    has one (response-only training), else every real token after the first.

    Part of the shared core: the default ``loss_fn`` of :func:`train`.
    """
    ids = batch["input_ids"]
    weight = batch.get("response_mask", batch.get("attention_mask"))
    if weight is None:
        weight = torch.ones_like(ids)
    if "attention_mask" in batch:
        weight = weight * batch["attention_mask"]
    lg = logits[:, :-1].float()
    nll = torch.nn.functional.cross_entropy(lg.reshape(-1, lg.shape[-1]), ids[:, 1:].reshape(-1),
                                            reduction="none").view(ids.shape[0], -1)
    w = weight[:, 1:].to(nll.dtype)
    return (nll * w).sum() / w.sum().clamp(min=1)


def lowest_trainable_layer(model: nn.Module) -> int | None:
    """The lowest decoder layer with a parameter that requires grad; ``None`` when something
    below the decoder layers (the embeddings) trains, or nothing does.

    Part of the shared core (the trainer's cache decision).
    """
    blocks = decoder_layers(model)
    in_blocks = set()
    for i, b in enumerate(blocks):
        for p in b.parameters():
            in_blocks.add(id(p))
    lowest = None
    for i, b in enumerate(blocks):
        if any(p.requires_grad for p in b.parameters()):
            lowest = i
            break
    emb = model.get_input_embeddings()
    if emb is not None and any(p.requires_grad for p in emb.parameters()):
        return None
    return lowest


def _inner(model: nn.Module) -> nn.Module:
    inner = getattr(model, "model", None)
    if inner is None or not isinstance(getattr(inner, "layers", None), nn.ModuleList):
        raise TypeError(f"{type(model).__name__} has no .model.layers; the cached trainer "
                        "supports Llama-style transformers models")
    return inner


def forward_from_layer(model: nn.Module, layer: int, hidden: torch.Tensor,
                       attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The logits when decoder layer ``layer`` receives ``hidden`` as its input (the residual
    stream), i.e. the rest of the forward pass from there.

    Part of the shared core: the trainer's cached path, and a brute-force check for
    interventions (what "add to the residual and run the rest" gives). ``layer = 0`` with the
    token embeddings as ``hidden`` is the ordinary forward.
    """
    inner = _inner(model)
    n = len(inner.layers)
    if not 0 <= layer <= n:
        raise IndexError(f"layer {layer} out of range for a model with {n} layers")
    if hidden.dim() != 3 or hidden.shape[-1] != model.config.hidden_size:
        raise ValueError(f"hidden must be (batch, seq, {model.config.hidden_size}), got "
                         f"{tuple(hidden.shape)}")
    if attention_mask is None:
        attention_mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)
    full = inner.layers
    try:
        inner.layers = nn.ModuleList(list(full)[layer:])
        out = model(inputs_embeds=hidden, attention_mask=attention_mask,
                    position_ids=position_ids(attention_mask), use_cache=False)
    finally:
        inner.layers = full
    return out.logits


class _Stop(Exception):
    pass


@torch.no_grad()
def _hidden_at(model: nn.Module, layer: int, ids: torch.Tensor, mask: torch.Tensor):
    """The input of decoder layer ``layer`` (the forward stops there)."""
    block = decoder_layers(model)[layer]
    seen = {}

    def pre(mod, args, kwargs):
        seen["h"] = (args[0] if args else kwargs["hidden_states"]).detach()
        raise _Stop

    h = block.register_forward_pre_hook(pre, with_kwargs=True)
    try:
        model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask),
              use_cache=False)
    except _Stop:
        pass
    finally:
        h.remove()
    return seen["h"]


def train(model: nn.Module, data: dict[str, torch.Tensor] | Callable, *, n_steps: int,
          batch_size: int, lr: float, seed: int = 0,
          loss_fn: Callable[[torch.Tensor, dict], torch.Tensor] | None = None,
          on_step: Callable[[int, dict], Any] | None = None, schedule: str = "constant",
          warmup: int = 0, min_lr_ratio: float = 0.1, weight_decay: float = 0.0,
          betas: tuple[float, float] = (0.9, 0.999), grad_clip: float | None = 1.0,
          cache_frozen: bool | None = None, log_every: int = 1,
          desc: str = "fine-tuning") -> dict[str, Any]:
    """Train the parameters of ``model`` that require grad (e.g. LoRA adapters) with AdamW.

    Part of the shared core (chapters 08, 17); the loop of :func:`iclr25.tinygpt.train` for
    ``transformers`` causal LMs.

    Parameters
    ----------
    data
        A batch dict from :func:`tokenize_pairs` (``input_ids``, ``attention_mask``, optional
        ``response_mask`` and any other per-row tensors, e.g. reference log-probs): each step
        draws ``batch_size`` random rows. Or a callable ``(generator, batch_size) -> batch``.
    n_steps, batch_size, lr, seed
        Steps, rows per step, peak learning rate; ``seed`` fixes the rows drawn (the global RNG
        is left as it was).
    loss_fn
        ``loss_fn(logits, batch) -> scalar``; default :func:`lm_loss` (response-only NLL when
        the batch has ``response_mask``). It may also return a dict with ``"loss"`` and more
        numbers to log.
    on_step
        ``on_step(step, logs)`` after each step (``logs``: ``loss``, ``lr`` and what
        ``loss_fn`` returned); return ``True`` to stop early.
    schedule, warmup, min_lr_ratio, weight_decay, betas, grad_clip
        As in :func:`iclr25.tinygpt.train` (default here: constant learning rate, no decay).
    cache_frozen
        Cache the frozen lower layers' output per row and start each forward at the lowest
        trainable layer. ``None`` (default): when the data is a batch dict, the embeddings are
        frozen and the lowest trainable layer is above 0. The frozen layers run in eval mode
        either way (no dropout), so cached and uncached steps compute the same thing.

    Returns
    -------
    dict
        ``step``, ``loss``, ``lr`` (lists), ``final_loss`` (mean of the last 10 logged losses),
        ``seconds``, ``cached`` (whether the cache was used) and ``start_layer``. The model is
        left in eval mode.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; valid: {', '.join(SCHEDULES)}")
    if not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("no parameter of the model requires grad: add LoRA adapters "
                         "(iclr25.lm.lora.add) or unfreeze some parameters first")
    loss_fn = loss_fn or lm_loss
    fixed = isinstance(data, dict)
    if fixed:
        if "input_ids" not in data:
            raise ValueError("the data dict needs 'input_ids' (see tokenize_pairs)")
        n_rows = data["input_ids"].shape[0]
        for k, v in data.items():
            if isinstance(v, torch.Tensor) and v.shape[:1] != (n_rows,):
                raise ValueError(f"data[{k!r}] has {v.shape[0]} rows, input_ids has {n_rows}")
    elif not callable(data):
        raise TypeError("data must be a batch dict or a callable (generator, batch_size) -> batch")
    start = lowest_trainable_layer(model)
    can_cache = fixed and start is not None and start > 0
    if cache_frozen is None:
        cache_frozen = can_cache
    if cache_frozen and not can_cache:
        raise ValueError("cache_frozen=True needs a batch dict as data, frozen embeddings and "
                         "frozen lower layers (lowest trainable decoder layer above 0); got "
                         f"lowest trainable layer {start}")
    device = _device_of(model)
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=betas)
    gen = torch.Generator().manual_seed(seed)
    blocks = decoder_layers(model)
    hist: dict[str, Any] = {"step": [], "loss": [], "lr": []}
    cache: dict[int, torch.Tensor] = {}

    def set_modes():
        model.train()
        if start is not None:
            for b in list(blocks)[:start]:
                b.eval()
            emb = model.get_input_embeddings()
            if emb is not None:
                emb.eval()

    def hidden_rows(rows: torch.Tensor, ids, mask):
        missing = [int(r) for r in rows if int(r) not in cache]
        if missing:
            sel = torch.tensor(missing)
            sub_ids, sub_mask = data["input_ids"][sel].to(device), data["attention_mask"][sel].to(device)
            was = model.training
            model.eval()
            h = _hidden_at(model, start, sub_ids, sub_mask)
            model.train(was)
            set_modes()
            for r, hr in zip(missing, h):
                cache[r] = hr
        return torch.stack([cache[int(r)] for r in rows])

    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        set_modes()
        try:
            for step in progress(range(n_steps), desc=desc):
                for g in opt.param_groups:
                    g["lr"] = lr_schedule(step, n_steps, lr, warmup, schedule, min_lr_ratio)
                if fixed:
                    rows = torch.randint(0, n_rows, (batch_size,), generator=gen)
                    batch = {k: (v[rows].to(device) if isinstance(v, torch.Tensor) else v)
                             for k, v in data.items()}
                else:
                    batch = {k: (v.to(device) if isinstance(v, torch.Tensor) else v)
                             for k, v in data(gen, batch_size).items()}
                mask = batch.get("attention_mask")
                if mask is None:
                    mask = batch["attention_mask"] = torch.ones_like(batch["input_ids"])
                if cache_frozen:
                    h = hidden_rows(rows, batch["input_ids"], mask)
                    logits = forward_from_layer(model, start, h, mask)
                else:
                    logits = model(input_ids=batch["input_ids"], attention_mask=mask,
                                   position_ids=position_ids(mask), use_cache=False).logits
                out = loss_fn(logits, batch)
                extra = {}
                if isinstance(out, dict):
                    extra = {k: float(v) for k, v in out.items() if k != "loss"}
                    out = out["loss"]
                opt.zero_grad(set_to_none=True)
                out.backward()
                if grad_clip is not None:
                    torch.nn.utils.clip_grad_norm_(params, grad_clip)
                opt.step()
                logs = {"loss": float(out.detach()), "lr": opt.param_groups[0]["lr"], **extra}
                if step % log_every == 0 or step == n_steps - 1:
                    hist["step"].append(step)
                    hist["loss"].append(logs["loss"])
                    hist["lr"].append(logs["lr"])
                if on_step is not None and on_step(step, logs) is True:
                    break
        finally:
            model.eval()
    hist["final_loss"] = float(sum(hist["loss"][-10:]) / max(1, len(hist["loss"][-10:])))
    hist["seconds"] = time.perf_counter() - t0
    hist["cached"] = bool(cache_frozen)
    hist["start_layer"] = start if cache_frozen else 0
    return hist
