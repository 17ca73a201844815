"""Generation: chat formatting, one-prompt :func:`generate` and batched :func:`generate_batch`.

Part of the shared core (:mod:`iclr25.lm`). Chapters 03 (CogMir), 07 (Cybench), 08 (ReFAT),
12 (PhyloLM), 17 (soft preference learning) and 19 generate with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ._common import (_device_of, cache_kwarg, check_batch_size, new_cache, pad_batch, pad_id,
                      position_ids)

__all__ = ["chat_text", "generate", "generate_batch", "Generations", "next_token_logits",
           "top_tokens"]


def chat_text(tokenizer, messages: str | Sequence[dict], system: str | None = None,
              add_generation_prompt: bool = True) -> str:
    """The prompt text of a chat: the tokenizer's chat template, or a plain fallback.

    Part of the shared core; used by every chapter that talks to a chat model (03, 07, 08, 12,
    17, 19) and by :func:`generate`.

    Parameters
    ----------
    tokenizer
        A ``transformers`` tokenizer. With a chat template (``tokenizer.chat_template``) the
        template renders the messages; without one (a base model such as Gemma-3-270M) the
        fallback writes ``"System: ...\\n\\nUser: ...\\n\\nAssistant:"``.
    messages
        One user message (``str``) or a list of ``{"role", "content"}`` dicts (roles
        ``system``, ``user``, ``assistant``).
    system
        A system message to put first, unless the messages already start with one.
    add_generation_prompt
        Open the assistant's turn at the end (what a prompt for generation needs); ``False``
        renders the conversation as it is (e.g. a prompt with its response, for training).
    """
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    else:
        messages = list(messages)
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or "role" not in m or "content" not in m:
                raise TypeError(f"messages[{i}] must be a dict with 'role' and 'content', got {m!r}")
    if system is not None and not (messages and messages[0].get("role") == "system"):
        messages = [{"role": "system", "content": system}] + messages
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=add_generation_prompt)
    names = {"system": "System", "user": "User", "assistant": "Assistant"}
    parts = []
    for m in messages:
        role = m["role"]
        if role not in names:
            raise ValueError(f"unknown chat role {role!r}; valid: {sorted(names)}")
        parts.append(f"{names[role]}: {m['content']}")
    text = "\n\n".join(parts)
    if add_generation_prompt:
        text = (text + "\n\n" if text else "") + "Assistant:"
    return text


def _chat_text(tokenizer, prompt, system: str | None) -> str:
    return chat_text(tokenizer, prompt, system, add_generation_prompt=True)


@torch.no_grad()
def generate(model: nn.Module, tokenizer, prompt: str | list[dict], *, max_new_tokens: int = 64,
             chat: bool = True, system: str | None = None, do_sample: bool = False,
             temperature: float = 1.0, top_p: float = 1.0, seed: int | None = None) -> str:
    """Generate a continuation of ``prompt`` and return the new text only.

    Part of the shared core (chapters 06, 11 and every chat chapter). For many prompts at once
    use :func:`generate_batch`, which gives the same greedy output, faster.

    Parameters
    ----------
    prompt
        A user message (``str``), or a list of ``{"role", "content"}`` messages when ``chat``.
    max_new_tokens
        At most this many new tokens.
    chat
        Wrap the prompt in the tokenizer's chat template (with the assistant turn opened);
        ``False`` continues the raw text.
    system
        A system message to put first (SmolLM2's template supplies a default one otherwise).
    do_sample, temperature, top_p, seed
        Greedy decoding by default; with ``do_sample=True``, ``seed`` makes sampling repeatable.

    Returns
    -------
    str
        The generated text, special tokens removed.
    """
    if chat:
        text = _chat_text(tokenizer, prompt, system)
        enc = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    else:
        if not isinstance(prompt, str):
            raise TypeError("with chat=False the prompt must be a string")
        enc = tokenizer(prompt, return_tensors="pt")
    enc = {k: v.to(_device_of(model)) for k, v in enc.items()}
    kwargs: dict[str, Any] = dict(max_new_tokens=max_new_tokens, do_sample=do_sample)
    if do_sample:
        kwargs.update(temperature=temperature, top_p=top_p)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    rng = torch.random.fork_rng(devices=[]) if seed is not None else contextlib.nullcontext()
    with rng:
        if seed is not None:
            torch.manual_seed(seed)
        out = model.generate(**enc, pad_token_id=pad, **kwargs)
    new = out[0, enc["input_ids"].shape[1]:]
    return tokenizer.decode(new, skip_special_tokens=True)


@torch.no_grad()
def next_token_logits(model: nn.Module, tokenizer, text: str, *, chat: bool = False) -> torch.Tensor:
    """The logits of the token that follows ``text``: a float tensor of shape ``(vocab,)``.

    Part of the shared core. ``text`` is tokenized as is (no BOS token is added for SmolLM2);
    with ``chat=True`` it is wrapped as a user message with the assistant turn opened.
    """
    if chat:
        enc = tokenizer(_chat_text(tokenizer, text, None), return_tensors="pt",
                        add_special_tokens=False)
    else:
        enc = tokenizer(text, return_tensors="pt")
    enc = {k: v.to(_device_of(model)) for k, v in enc.items()}
    return model(**enc).logits[0, -1].float().cpu()


def top_tokens(model: nn.Module, tokenizer, text: str, k: int = 5, *,
               chat: bool = False) -> list[tuple[str, float]]:
    """The ``k`` likeliest next tokens after ``text``, decoded, with their probabilities.

    Part of the shared core.
    """
    probs = next_token_logits(model, tokenizer, text, chat=chat).softmax(-1)
    top = probs.topk(k)
    return [(tokenizer.decode([int(i)]), float(p)) for p, i in zip(top.values, top.indices)]


# --------------------------------------------------------------------------------------------
# batched generation
# --------------------------------------------------------------------------------------------

@dataclass
class Generations:
    """What :func:`generate_batch` returns: one entry per (prompt, returned sequence).

    Entries are in prompt order; with ``num_return_sequences = k`` the ``k`` sequences of
    prompt ``i`` are entries ``i*k ... i*k + k - 1``. Iterating, ``len`` and indexing act on
    :attr:`texts`.

    Attributes
    ----------
    texts
        The generated text, special tokens removed, cut before the first stop string.
    token_ids
        The generated token ids (up to and including the end-of-sequence token or the token that
        completed a stop string).
    prompt_token_ids
        The prompt's token ids (after the chat template).
    finish_reasons
        ``"eos"``, ``"stop"`` (a stop string appeared) or ``"length"`` (``max_new_tokens``).
    """

    texts: list[str]
    token_ids: list[list[int]]
    prompt_token_ids: list[list[int]]
    finish_reasons: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.texts)

    def __iter__(self):
        return iter(self.texts)

    def __getitem__(self, i):
        return self.texts[i]


def _eos_ids(model: nn.Module, tokenizer) -> set[int]:
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = getattr(tokenizer, "eos_token_id", None)
    if eos is None:
        return set()
    return {int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])}


def _encode_prompt(tokenizer, prompt, chat: bool, system: str | None) -> list[int]:
    if chat:
        text = chat_text(tokenizer, prompt, system)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if not isinstance(prompt, str):
        raise TypeError("with chat=False every prompt must be a string")
    return list(tokenizer(prompt)["input_ids"])


def _row_seed(seed: int, prompt: int, sequence: int) -> int:
    return int(np.random.SeedSequence([seed, prompt, sequence]).generate_state(1, np.uint64)[0]
               % (2**63 - 1))


def _sample(logits: torch.Tensor, temperature: float, top_p: float,
            gens: list[torch.Generator]) -> torch.Tensor:
    """One token per row: temperature, then nucleus (top-p) filtering, then a draw from the row's
    own generator (so a row's sample does not depend on the other rows of its batch)."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        cum = sorted_p.cumsum(-1)
        drop = (cum - sorted_p) > top_p     # keep the smallest set whose mass reaches top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    out = torch.empty(probs.shape[0], dtype=torch.long)
    for r, g in enumerate(gens):
        out[r] = torch.multinomial(probs[r].cpu(), 1, generator=g)[0]
    return out.to(logits.device)


@torch.no_grad()
def _decode_batch(model, tokenizer, prompt_ids: list[list[int]], gens, *, max_new_tokens: int,
                  do_sample: bool, temperature: float, top_p: float, stop: list[str],
                  eos: set[int]):
    device = _device_of(model)
    pad = pad_id(tokenizer)
    ids, mask = pad_batch(prompt_ids, pad, left=True, device=device)
    pos = position_ids(mask)
    B = ids.shape[0]
    cache = new_cache(model)
    kw = {cache_kwarg(model): cache}
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                logits_to_keep=1, **kw)
    logits = out.logits[:, -1]
    new: list[list[int]] = [[] for _ in range(B)]
    reasons = ["length"] * B
    cut = [None] * B
    done = torch.zeros(B, dtype=torch.bool)
    eos_t = torch.tensor(sorted(eos), dtype=torch.long) if eos else None
    for step in range(max_new_tokens):
        nxt = _sample(logits, temperature, top_p, gens) if do_sample else logits.argmax(-1)
        nxt = nxt.cpu()
        nxt[done] = pad
        for r in range(B):
            if done[r]:
                continue
            tok_id = int(nxt[r])
            new[r].append(tok_id)
            if eos_t is not None and tok_id in eos:
                done[r] = True
                reasons[r] = "eos"
            elif stop:
                text = tokenizer.decode(new[r], skip_special_tokens=True)
                hits = [i for i in (text.find(s) for s in stop) if i >= 0]
                if hits:
                    done[r] = True
                    reasons[r] = "stop"
                    cut[r] = min(hits)
        if bool(done.all()) or step == max_new_tokens - 1:
            break
        mask = torch.cat([mask, torch.ones((B, 1), dtype=mask.dtype, device=device)], dim=1)
        pos = pos[:, -1:] + 1
        out = model(input_ids=nxt.to(device)[:, None], attention_mask=mask, position_ids=pos,
                    use_cache=True, logits_to_keep=1, **kw)
        logits = out.logits[:, -1]
    texts = []
    for r in range(B):
        text = tokenizer.decode(new[r], skip_special_tokens=True)
        texts.append(text if cut[r] is None else text[:cut[r]])
    return texts, new, reasons


def generate_batch(model: nn.Module, tokenizer, prompts: Sequence[str | Sequence[dict]], *,
                   max_new_tokens: int = 64, chat: bool = True, system: str | None = None,
                   do_sample: bool = False, temperature: float = 1.0, top_p: float = 1.0,
                   seed: int | None = None, num_return_sequences: int = 1,
                   stop: str | Sequence[str] | None = None, batch_size: int = 16) -> Generations:
    """Generate continuations of many prompts at once: left padding and the KV cache.

    Part of the shared core; chapters 03, 07, 08, 12, 17 and 19 generate through it (and
    :class:`iclr25.chat.LocalBackend` wraps it). Greedy output equals one-at-a-time
    :func:`generate` (tested), at several times its throughput. Interventions
    (:func:`iclr25.lm.intervene`) apply at every decoding step.

    Parameters
    ----------
    prompts
        A list of user messages (``str``) or message lists (``[{"role", "content"}, ...]``).
    max_new_tokens
        At most this many new tokens per sequence.
    chat, system
        As in :func:`generate`: wrap each prompt in the chat template (:func:`chat_text`).
    do_sample, temperature, top_p, seed
        Greedy by default. With ``do_sample=True`` each sequence draws from its own generator,
        seeded by ``(seed, prompt index, sequence index)``: the same call gives the same texts
        whatever ``batch_size`` is (``seed=None`` draws the seed from torch's global RNG).
    num_return_sequences
        Sequences per prompt (distinct only when sampling).
    stop
        Stop strings: a sequence ends when its text contains one; the text is cut before it.
    batch_size
        Sequences per forward pass. Prompts are sorted by length before batching (less
        padding); the output is in prompt order.

    Returns
    -------
    Generations
        ``.texts``, ``.token_ids``, ``.prompt_token_ids``, ``.finish_reasons``.
    """
    if isinstance(prompts, (str, dict)):
        raise TypeError("prompts must be a list of prompts; for one prompt use lm.generate or "
                        "pass [prompt]")
    prompts = list(prompts)
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if not isinstance(num_return_sequences, int) or num_return_sequences < 1:
        raise ValueError(f"num_return_sequences must be a positive integer, got "
                         f"{num_return_sequences!r}")
    check_batch_size(batch_size)
    if do_sample and not temperature > 0:
        raise ValueError(f"temperature must be > 0 when sampling, got {temperature!r}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if any(not isinstance(s, str) or not s for s in stops):
        raise ValueError(f"stop must be non-empty strings, got {stop!r}")
    if do_sample and seed is None:
        seed = int(torch.randint(0, 2**31 - 1, (1,)).item())
    encoded = [_encode_prompt(tokenizer, p, chat, system) for p in prompts]
    jobs = [(i, j) for i in range(len(prompts)) for j in range(num_return_sequences)]
    order = sorted(range(len(jobs)), key=lambda k: -len(encoded[jobs[k][0]]))
    eos = _eos_ids(model, tokenizer)
    texts: list[Any] = [None] * len(jobs)
    ids: list[Any] = [None] * len(jobs)
    reasons: list[Any] = [None] * len(jobs)
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            gens = ([torch.Generator().manual_seed(_row_seed(seed, *jobs[k])) for k in chunk]
                    if do_sample else [])
            t, n, r = _decode_batch(model, tokenizer, [encoded[jobs[k][0]] for k in chunk], gens,
                                    max_new_tokens=max_new_tokens, do_sample=do_sample,
                                    temperature=temperature, top_p=top_p, stop=stops, eos=eos)
            for k, a, b, c in zip(chunk, t, n, r):
                texts[k], ids[k], reasons[k] = a, b, c
    finally:
        model.train(was_training)
    return Generations(texts, ids, [list(encoded[i]) for i, _ in jobs], reasons)
