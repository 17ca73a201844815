"""Option-letter scoring for causal LMs and Hugging Face VLMs (chapter 19).

Two paths behind :func:`score_letters`:

- ``"batched"`` (fast): left-padded batches, one forward pass each, only the last position's
  logits (``logits_to_keep=1``), the letters' log-probabilities read off; for a text-only model
  it is :func:`iclr25.lm.next_token_logprobs`.
- ``"generate"`` (reference): one ``generate(max_new_tokens=1, output_scores=True)`` call per
  prompt, reading the same scores, as the official evaluation does.

Both give the same numbers to 1e-5 (tested); the benchmark ``benchmarks/bench_vla_gender_bias.py``
measures the difference in prompts per second.
"""

from __future__ import annotations

from collections.abc import Sequence

import copy

import numpy as np
import torch
from torch import nn

from .. import lm
from ..lm._common import cache_kwarg, output_cache, pad_batch, pad_id, position_ids
from ..progress import progress
from .protocol import LETTERS

__all__ = ["letter_ids", "chat_prompts", "score_letters", "score_letters_cached", "score_vlm",
           "expand_image_tokens"]

METHODS = ("batched", "generate")


def letter_ids(tokenizer, n: int) -> list[int]:
    """Token ids of the first ``n`` option letters (``A``, ``B``, ...), each a single token."""
    ids = []
    for L in LETTERS[:n]:
        t = tokenizer.encode(L, add_special_tokens=False)
        if len(t) != 1:
            raise ValueError(f"letter {L!r} is not a single token for this tokenizer ({t})")
        ids.append(int(t[0]))
    return ids


def chat_prompts(tokenizer, bodies: Sequence[str], system: str | None = None) -> list[str]:
    """Each body as a user turn in the tokenizer's chat template, ending where the assistant's
    answer begins (chapter 19)."""
    return [lm.chat_text(tokenizer, b, system=system) for b in bodies]


@torch.no_grad()
def _generate_scores(model, tokenizer, texts, ids):
    out = []
    for t in texts:
        enc = tokenizer(t, return_tensors="pt")
        g = model.generate(**enc, max_new_tokens=1, do_sample=False, output_scores=True,
                           return_dict_in_generate=True, pad_token_id=pad_id(tokenizer))
        out.append(torch.log_softmax(g.scores[0][0].float(), -1)[ids])
    return torch.stack(out) if out else torch.empty(0, len(ids))


def score_letters(model: nn.Module, tokenizer, texts: Sequence[str], n_options: int, *,
                  method: str = "batched", batch_size: int = 16) -> np.ndarray:
    """Log-probabilities ``(n_texts, n_options)`` of the option letters as the next token.

    Chapter 19. ``texts`` are complete model inputs (already in the chat template, see
    :func:`chat_prompts`). ``method`` is ``"batched"`` (fast) or ``"generate"`` (one
    ``generate(max_new_tokens=1)`` per prompt: the reference)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    ids = letter_ids(tokenizer, n_options)
    if method == "generate":
        lp = _generate_scores(model, tokenizer, list(texts), ids)
    else:
        lp = lm.next_token_logprobs(model, tokenizer, list(texts), ids, batch_size=batch_size)
    return lp.numpy().astype(np.float64)


@torch.no_grad()
def score_letters_cached(model: nn.Module, tokenizer, texts: Sequence[str], prefixes: Sequence[str],
                         n_options: int, *, batch_size: int = 16, desc: str | None = None) -> np.ndarray:
    """:func:`score_letters` (``"batched"``) with a reused prefix cache per distinct prefix.

    Chapter 19. ``prefixes[i]`` is a string that ``texts[i]`` starts with (in the text proxy:
    the chat header, the system prompt and the person's description, shared by every question
    about that person). Each distinct prefix runs through the model once; its keys and values
    are repeated over a batch of the texts' remaining tokens, left-padded (the padding is
    masked and positions continue from the prefix). Equal to scoring the full texts to 1e-4
    (tested); the saving is the prefix's share of the tokens.

    The prefix must end at a token boundary (e.g. a newline): its tokens must be the first
    tokens of each text's tokens, else a ``ValueError`` names the text."""
    if len(texts) != len(prefixes):
        raise ValueError(f"{len(texts)} texts but {len(prefixes)} prefixes")
    ids = letter_ids(tokenizer, n_options)
    enc = lambda t: list(tokenizer(t)["input_ids"])
    groups: dict[str, list[int]] = {}
    for i, (t, p) in enumerate(zip(texts, prefixes)):
        if not t.startswith(p) or len(t) == len(p):
            raise ValueError(f"prefixes[{i}] is not a proper prefix of texts[{i}]")
        groups.setdefault(p, []).append(i)
    out = np.zeros((len(texts), n_options))
    kw, pad, cand = cache_kwarg(model), pad_id(tokenizer), torch.tensor(ids)
    for p, rows in progress(groups.items(), desc=desc or "prefix groups", total=len(groups)):
        pre = enc(p)
        full = [enc(texts[i]) for i in rows]
        for i, f in zip(rows, full):
            if f[:len(pre)] != pre:
                raise ValueError(f"the prefix's tokens are not the first tokens of texts[{i}] (the "
                                 "tokenizer merges across the boundary); end the prefix at a newline")
        P = len(pre)
        cache0 = output_cache(model(input_ids=torch.tensor([pre]), use_cache=True))
        order = sorted(range(len(rows)), key=lambda j: -len(full[j]))
        for s in range(0, len(order), batch_size):
            chunk = order[s:s + batch_size]
            sfx, mask = pad_batch([full[j][P:] for j in chunk], pad, left=True)
            cache = copy.deepcopy(cache0)
            if len(chunk) > 1:
                cache.batch_repeat_interleave(len(chunk))
            fmask = torch.cat([torch.ones(len(chunk), P, dtype=mask.dtype), mask], 1)
            logits = model(input_ids=sfx, attention_mask=fmask, position_ids=position_ids(mask) + P,
                           use_cache=True, logits_to_keep=1, **{kw: cache}).logits[:, -1].float()
            lp = torch.log_softmax(logits, -1)[:, cand].double().numpy()
            out[[rows[j] for j in chunk]] = lp
    return out


def expand_image_tokens(ids: Sequence[int], image_token_id: int, n_image_tokens: int) -> list[int]:
    """Replace each single image placeholder by ``n_image_tokens`` copies (what a LLaVA processor
    does before the model sees the ids)."""
    out: list[int] = []
    for t in ids:
        out += [t] * n_image_tokens if t == image_token_id else [t]
    return out


@torch.no_grad()
def score_vlm(model: nn.Module, input_ids: Sequence[Sequence[int]], pixel_values: torch.Tensor,
              letter_token_ids: Sequence[int], *, pad_token_id: int = 0, batch_size: int = 8,
              method: str = "batched") -> np.ndarray:
    """Letter log-probabilities for a Hugging Face vision-language model (chapter 19).

    ``input_ids[i]`` is prompt ``i``'s token ids with the image placeholders already expanded
    (:func:`expand_image_tokens`); ``pixel_values[i]`` its image ``(C, H, W)``. Any model whose
    forward takes ``input_ids``, ``attention_mask``, ``pixel_values`` (LLaVA and its kin) works.
    ``"batched"`` left-pads and scores ``batch_size`` prompts per forward; ``"single"`` is the
    one-at-a-time reference (same numbers to 1e-5, tested)."""
    if method not in ("batched", "single"):
        raise ValueError(f"unknown method {method!r}; valid: batched, single")
    if len(input_ids) != len(pixel_values):
        raise ValueError(f"{len(input_ids)} prompts but {len(pixel_values)} images")
    if pixel_values.dim() != 4:
        raise ValueError(f"pixel_values must be (n, C, H, W), got {tuple(pixel_values.shape)}")
    cand = torch.as_tensor(list(letter_token_ids), dtype=torch.long)
    bs = 1 if method == "single" else batch_size
    out = []
    for s in range(0, len(input_ids), bs):
        ids, mask = pad_batch([list(x) for x in input_ids[s:s + bs]], pad_token_id, left=True,
                              device=pixel_values.device)
        logits = model(input_ids=ids, attention_mask=mask, pixel_values=pixel_values[s:s + bs],
                       position_ids=position_ids(mask)).logits[:, -1].float()
        out.append(torch.log_softmax(logits, -1)[:, cand].cpu())
    return torch.cat(out).numpy().astype(np.float64) if out else np.empty((0, len(cand)))
