"""Scoring: next-token log-probabilities, continuation log-likelihoods with a reused prefix
cache, differentiable sequence log-probabilities, and perplexity.

Part of the shared core (:mod:`iclr25.lm`). Chapters 05 (query localization), 08 (ReFAT),
10 (ideology probes), 12 (PhyloLM), 13 (systematic outliers) and 17 (soft preference
learning) score with it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ._common import (_device_of, cache_kwarg, check_batch_size, check_texts, output_cache,
                      pad_batch, pad_id, position_ids)

__all__ = ["next_token_logprobs", "continuation_logprobs", "ContinuationScores",
           "sequence_logprobs", "perplexity"]


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text)["input_ids"])


@torch.no_grad()
def next_token_logprobs(model: nn.Module, tokenizer, texts: Sequence[str],
                        token_ids: Sequence[int] | torch.Tensor | None = None, *,
                        batch_size: int = 16) -> torch.Tensor:
    """Log-probabilities of the token that follows each text.

    Part of the shared core (chapters 05, 10, 12). Texts are tokenized as
    :func:`iclr25.lm.next_token_logits` does and left-padded into batches; equal to scoring one
    text at a time to 1e-5 (tested).

    Parameters
    ----------
    texts
        The texts (a list of strings).
    token_ids
        Candidate token ids (e.g. the ids of ``" Yes"`` and ``" No"``): only their
        log-probabilities are returned. ``None`` returns the whole vocabulary.
    batch_size
        Texts per forward pass.

    Returns
    -------
    torch.Tensor
        Float32 on the CPU: ``(n_texts, vocab)``, or ``(n_texts, len(token_ids))``.
    """
    texts = check_texts(texts)
    check_batch_size(batch_size)
    cand = None
    if token_ids is not None:
        cand = torch.as_tensor(token_ids, dtype=torch.long).reshape(-1)
        vocab = model.get_output_embeddings().weight.shape[0]
        if len(cand) == 0 or int(cand.min()) < 0 or int(cand.max()) >= vocab:
            raise ValueError(f"token_ids must be non-empty ids in [0, {vocab}), got "
                             f"{token_ids!r}")
    encoded = [_encode(tokenizer, t) for t in texts]
    for i, e in enumerate(encoded):
        if not e:
            raise ValueError(f"texts[{i}] tokenizes to no tokens; nothing to condition on")
    device = _device_of(model)
    order = sorted(range(len(texts)), key=lambda i: -len(encoded[i]))
    out: list[torch.Tensor | None] = [None] * len(texts)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        ids, mask = pad_batch([encoded[i] for i in chunk], pad_id(tokenizer), left=True,
                              device=device)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask),
                       logits_to_keep=1).logits[:, -1].float()
        logp = torch.log_softmax(logits, dim=-1)
        if cand is not None:
            logp = logp[:, cand.to(device)]
        for i, row in zip(chunk, logp.cpu()):
            out[i] = row
    if not out:
        width = len(cand) if cand is not None else model.get_output_embeddings().weight.shape[0]
        return torch.empty(0, width)
    return torch.stack(out)


@dataclass
class ContinuationScores:
    """What :func:`continuation_logprobs` returns, one entry per (context, continuation) pair.

    Attributes
    ----------
    logprob
        ``(n,)`` float64: the summed log-probability of the continuation's tokens.
    n_tokens
        ``(n,)`` int64: how many tokens the continuation has.
    is_greedy
        ``(n,)`` bool: every continuation token is the argmax of its position (lm-eval's
        ``is_greedy``).
    token_logprobs
        Each pair's per-token log-probabilities (float32).
    """

    logprob: torch.Tensor
    n_tokens: torch.Tensor
    is_greedy: torch.Tensor
    token_logprobs: list[torch.Tensor]

    @property
    def mean_logprob(self) -> torch.Tensor:
        """Log-probability per token (length-normalised score)."""
        return self.logprob / self.n_tokens.clamp(min=1)

    def __len__(self) -> int:
        return len(self.logprob)


def _split_pair(tokenizer, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """Tokens of the context and of the continuation, split as lm-eval splits them: trailing
    spaces of the context move to the continuation, the continuation's tokens are those of
    ``encode(context + continuation)`` past ``len(encode(context))``."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = _encode(tokenizer, context + continuation)
    ctx = _encode(tokenizer, context)
    return ctx, whole[len(ctx):]


@torch.no_grad()
def continuation_logprobs(model: nn.Module, tokenizer, contexts: Sequence[str],
                          continuations: Sequence[str], shared_prefix: str | None = None, *,
                          batch_size: int = 16) -> ContinuationScores:
    """Log-likelihood of each continuation given its context (multiple-choice scoring).

    Part of the shared core (chapters 05, 10, 12, 13, 17). The text scored for pair ``i`` is
    ``shared_prefix + contexts[i] + continuations[i]``, tokenized as lm-eval's
    ``HFLM.loglikelihood`` tokenizes it (equal to it to 1e-4 on the same requests; the
    benchmark checks). With ``shared_prefix`` (a few-shot prompt, a long instruction) the
    prefix's KV cache is computed once and reused by every batch: equal to scoring without
    reuse to 1e-5 (tested), and much faster when the prefix is long.

    Parameters
    ----------
    contexts, continuations
        Two lists of equal length. A continuation must not be empty. A context may be empty
        (then the model's BOS, else EOS, token is the context, as in lm-eval).
    shared_prefix
        Text that every context starts with (it is *prepended* to each context). Its tokens
        must be a prefix of each pair's tokens (end it at a natural boundary such as a newline;
        otherwise a clear error says which pair breaks it). The batches' suffixes attend to its
        cached keys and values.
    batch_size
        Pairs per forward pass.

    Returns
    -------
    ContinuationScores
        ``.logprob`` (summed), ``.n_tokens``, ``.is_greedy``, ``.token_logprobs``.
    """
    contexts = check_texts(contexts, "contexts")
    continuations = check_texts(continuations, "continuations")
    if len(contexts) != len(continuations):
        raise ValueError(f"{len(contexts)} contexts but {len(continuations)} continuations; "
                         "they are scored in pairs")
    check_batch_size(batch_size)
    prefix = shared_prefix or ""
    seqs, n_ctx = [], []
    for i, (c, x) in enumerate(zip(contexts, continuations)):
        if not x:
            raise ValueError(f"continuations[{i}] is empty; there is nothing to score")
        ctx, cont = _split_pair(tokenizer, prefix + c, x)
        if not ctx:
            start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None \
                else tokenizer.eos_token_id
            ctx = [int(start)]
        if not cont:
            raise ValueError(f"continuations[{i}] {x!r} adds no tokens to its context")
        seqs.append(ctx + cont)
        n_ctx.append(len(ctx))
    device = _device_of(model)
    P = 0
    prefix_cache = prefix_logits = None
    if prefix:
        pre = _encode(tokenizer, prefix)
        for i, s in enumerate(seqs):
            if s[:len(pre)] != pre or len(s) <= len(pre):
                raise ValueError(
                    f"the shared prefix's tokens are not a prefix of pair {i}'s tokens (the "
                    "tokenizer merges across the boundary); end shared_prefix at a token "
                    "boundary, e.g. with a newline, or pass shared_prefix=None")
        P = len(pre)
        out = model(input_ids=torch.tensor([pre], device=device), use_cache=True)
        prefix_cache = output_cache(out)
        prefix_logits = out.logits[0].float()   # for continuations that start inside the prefix
    kw_name = cache_kwarg(model)
    # pairs with the same context and a one-token continuation need one forward pass: the
    # logits at the context's last position score every such continuation (multiple choice)
    members: dict[int, list[int]] = {}
    first_of: dict[tuple, int] = {}
    for i, s in enumerate(seqs):
        key = tuple(s[:n_ctx[i]]) if len(s) - n_ctx[i] == 1 else ("pair", i)
        rep = first_of.setdefault(key, i)
        members.setdefault(rep, []).append(i)
    order = sorted(members, key=lambda i: -len(seqs[i]))
    tok_lp: list[torch.Tensor | None] = [None] * len(seqs)
    greedy = torch.zeros(len(seqs), dtype=torch.bool)
    pad = pad_id(tokenizer)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        suffixes = [seqs[i][P:] for i in chunk]
        ids, mask = pad_batch(suffixes, pad, left=False, device=device)  # right padding
        B, S = ids.shape
        # only positions that predict a continuation token need the LM head (49k columns)
        first = min(max(n_ctx[i] - 1 - P, 0) for i in chunk)
        keep = S - first
        if P:
            cache = copy.deepcopy(prefix_cache)
            if B > 1:
                cache.batch_repeat_interleave(B)
            full_mask = torch.cat([torch.ones((B, P), dtype=mask.dtype, device=device), mask], 1)
            pos = (torch.arange(S, device=device) + P).expand(B, S)
            logits = model(input_ids=ids, attention_mask=full_mask, position_ids=pos,
                           use_cache=True, logits_to_keep=keep, **{kw_name: cache}).logits
        else:
            logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits
        off = S - logits.shape[1]      # logits hold the last `keep` positions only
        for b, i in enumerate(chunk):
            for m in members[i]:  # the representative's row scores its whole group
                seq = seqs[m]
                # token t of the sequence is predicted by position t - 1; positions < P are the
                # prefix, whose last logits were kept
                targets = torch.tensor(seq[n_ctx[m]:], device=device)
                rows = torch.arange(n_ctx[m] - 1, len(seq) - 1, device=device)
                lg = logits[b, ((rows - P).clamp(min=0) - off).clamp(min=0)].float()
                inside = rows < P
                if bool(inside.any()):
                    lg = torch.where(inside[:, None], prefix_logits[rows.clamp(max=P - 1)], lg)
                lp = torch.log_softmax(lg, dim=-1)
                tok_lp[m] = lp.gather(1, targets[:, None])[:, 0].cpu()
                greedy[m] = bool((lg.argmax(-1) == targets).all())
    lps = [t for t in tok_lp]
    logprob = torch.tensor([float(t.double().sum()) for t in lps], dtype=torch.float64)
    n_tokens = torch.tensor([len(t) for t in lps], dtype=torch.long)
    return ContinuationScores(logprob, n_tokens, greedy, lps)


def sequence_logprobs(model: nn.Module, input_ids: torch.Tensor,
                      attention_mask: torch.Tensor | None = None,
                      response_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Summed log-probability of each sequence's (response) tokens, differentiable.

    Part of the shared core (chapters 08 and 17 train on it: DPO-style and soft preference
    losses). Runs under the caller's grad mode, so gradients reach the parameters.

    Parameters
    ----------
    input_ids
        ``(batch, seq)`` token ids, padded on either side.
    attention_mask
        ``(batch, seq)``, 1 on real tokens (default: all ones). Positions skip left padding.
    response_mask
        ``(batch, seq)``, 1 on the tokens whose log-probability counts (e.g. the response after
        a prompt); default: every real token after the first.

    Returns
    -------
    torch.Tensor
        ``(batch,)`` float32: ``sum_t response_mask[t] * log p(x_t | x_<t)``.
    """
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be (batch, seq), got shape {tuple(input_ids.shape)}")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    if response_mask is None:
        response_mask = attention_mask
    for name, m in (("attention_mask", attention_mask), ("response_mask", response_mask)):
        if m.shape != input_ids.shape:
            raise ValueError(f"{name} must have input_ids' shape {tuple(input_ids.shape)}, got "
                             f"{tuple(m.shape)}")
    logits = model(input_ids=input_ids, attention_mask=attention_mask,
                   position_ids=position_ids(attention_mask)).logits[:, :-1].float()
    targets = input_ids[:, 1:]
    tok = logits.gather(-1, targets[..., None])[..., 0] - torch.logsumexp(logits, dim=-1)
    weight = (response_mask[:, 1:] * attention_mask[:, 1:]).to(tok.dtype)
    return (tok * weight).sum(-1)


@torch.no_grad()
def perplexity(model: nn.Module, tokenizer, texts: Sequence[str], *, batch_size: int = 8,
               max_len: int = 512) -> float:
    """Perplexity over ``texts``: ``exp`` of the mean next-token NLL over all predicted tokens.

    Part of the shared core (chapter 13 measures what removing outliers costs with it; the
    quantisation helpers of :mod:`iclr25.lm.quant` are checked by it). Each text is tokenized
    as is, cut to its first ``max_len`` tokens; its first token is context only.
    """
    texts = check_texts(texts)
    check_batch_size(batch_size)
    if not isinstance(max_len, int) or max_len < 2:
        raise ValueError(f"max_len must be an integer >= 2, got {max_len!r}")
    encoded = [_encode(tokenizer, t)[:max_len] for t in texts]
    encoded = [e for e in encoded if len(e) >= 2]
    if not encoded:
        raise ValueError("no text has at least 2 tokens; perplexity needs something to predict")
    device = _device_of(model)
    total, count = 0.0, 0
    for start in range(0, len(encoded), batch_size):
        ids, mask = pad_batch(encoded[start:start + batch_size], pad_id(tokenizer), left=False,
                              device=device)
        lp = sequence_logprobs(model, ids, mask)
        total -= float(lp.double().sum())
        count += int(mask[:, 1:].sum())
    return math.exp(total / count)
