"""Discriminators: how a subject's decision is read (chapter 03).

- :func:`parse_choice`, :func:`parse_level` -- regular expressions on a free-text reply
  ("Answer: B. Explanation ...", "Level: 7").
- :class:`OptionScorer` -- the log-likelihood of " A" and " B" after the prefilled "Answer:",
  one forward pass per trial (the two one-token options share it) with the shared instruction's
  KV cache reused (:func:`iclr25.lm.continuation_logprobs`).
- :func:`rating_distribution` -- the probability of each rating 1-11 after "Level:" from two
  next-token passes (digits are single tokens in SmolLM2's vocabulary, so 10 and 11 are "1"
  followed by "0"/"1").
- :class:`LLMJudge` -- asks any chat backend which option a reply chose; tested with a
  scripted judge; no headline number of the chapter depends on it.
- :func:`similarity_to` -- MiniLM cosine similarity of texts to references (rumour chain).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import numpy as np
import torch

from .scenes import LETTERS

__all__ = ["parse_choice", "parse_level", "OptionScorer", "rating_distribution",
           "expected_rating", "first_tokens", "LLMJudge", "similarity_to", "chat_context", "shared_prefix"]

_ANSWER = re.compile(r"answer\s*(?:is)?\s*[:：]?\s*\**\s*\(?([AB])\b", re.IGNORECASE)
_LEADING = re.compile(r"^\s*\**\(?([AB])\)?(?:[\s.:,)]|$)")
_LEVEL = re.compile(r"level\s*[:：]?\s*(\d{1,2})\b", re.IGNORECASE)


_ANSWER_TEXT = re.compile(r"answer\s*(?:is)?\s*[:：]\s*\**\s*(.+)", re.IGNORECASE)


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()


def parse_choice(text: str, options: Sequence[str] | None = None) -> int:
    """0 (first option), 1 (second) or -1 (no choice found) from a free-text reply (chapter 03).

    With ``options`` (the two option texts): the text after the first ``Answer:`` (else the
    whole reply) is matched against them -- the option it starts with, else the only option it
    contains. Without options: a letter, ``"Answer: B. Because ..."`` or ``"B) ..."``.
    """
    if not isinstance(text, str):
        raise TypeError(f"a reply must be a string, got {type(text).__name__}")
    if options is not None:
        if len(options) != 2:
            raise ValueError(f"two options expected, got {options!r}")
        m = _ANSWER_TEXT.search(text)
        body = _norm(m.group(1) if m else text)
        opts = [_norm(o) for o in options]
        starts = [i for i, o in enumerate(opts) if o and (body + " ").startswith(o + " ")]
        if len(starts) == 1:
            return starts[0]
        if len(starts) == 2:      # one option is a prefix of the other: the longer one
            return int(len(opts[1]) > len(opts[0]))
        has = [i for i, o in enumerate(opts) if o and f" {o} " in f" {body} "]
        if len(has) == 1:
            return has[0]
    m = _ANSWER.search(text) or _LEADING.search(text)
    return LETTERS.index(m.group(1).upper()) if m else -1


def parse_level(text: str, lo: int = 1, hi: int = 11) -> int | None:
    """The rating of ``"Level: 7"`` (chapter 03), or ``None`` when absent or outside
    ``[lo, hi]``."""
    if not isinstance(text, str):
        raise TypeError(f"a reply must be a string, got {type(text).__name__}")
    m = _LEVEL.search(text)
    if not m:
        return None
    v = int(m.group(1))
    return v if lo <= v <= hi else None


def chat_context(tokenizer, messages, prefill: str) -> str:
    """The scored text of a trial: the chat template with the assistant's turn opened, then
    ``prefill`` (chapter 03)."""
    from iclr25.lm import chat_text

    return chat_text(tokenizer, messages) + prefill


def shared_prefix(texts: Sequence[str]) -> str:
    """The longest common prefix of ``texts`` cut after its last newline ('' if none)."""
    p = os.path.commonprefix(list(texts))
    cut = p.rfind("\n")
    return p[:cut + 1] if cut >= 0 else ""


def first_tokens(tokenizer, context: str, options: Sequence[str]) -> list[str]:
    """The first token of each ``" " + option`` after ``context``, as text (chapter 03).

    Raises a clear error when two options start with the same token (reword them: no shared
    article, numbers in words) or when the token does not survive a decode/encode round trip.
    """
    ctx = list(tokenizer(context)["input_ids"])
    out, ids = [], []
    for o in options:
        whole = list(tokenizer(context + " " + o)["input_ids"])
        if whole[:len(ctx)] != ctx or len(whole) == len(ctx):
            raise ValueError(f"option {o!r} does not extend the context at a token boundary")
        first = whole[len(ctx)]
        text = tokenizer.decode([first])
        if list(tokenizer(context + text)["input_ids"])[len(ctx):] != [first]:
            raise ValueError(f"the first token of option {o!r} ({text!r}) does not round-trip "
                             "through the tokenizer; reword the option")
        out.append(text)
        ids.append(first)
    if len(set(ids)) != len(ids):
        raise ValueError(f"options {list(options)!r} start with the same token {out[0]!r}, so "
                         "one forward cannot tell them apart; reword them (drop a shared "
                         "article, write numbers in words) or use answer='letter'")
    return out


class OptionScorer:
    """Scores two-option trials with one forward pass per trial (chapter 03).

    ``answer="text"`` (default): the log-probability of each option's first token after the
    prefilled ``"Answer:"`` -- the branch greedy decoding commits to (the options are written
    so that their first tokens differ; :func:`first_tokens` checks). ``answer="letter"``: the
    log-probability of " A" and " B" (the options labelled A and B in the order shown).
    ``score(trials)`` returns ``(n, 2)`` float64 log-probabilities, computed by
    :func:`iclr25.lm.continuation_logprobs`: the two one-token options share one forward, and
    the shared prefix of all the trials' texts (the system instruction) is computed once.
    """

    def __init__(self, model, tokenizer, *, batch_size: int = 16, reuse_prefix: bool = True,
                 answer: str = "text"):
        if answer not in ("text", "letter"):
            raise ValueError(f"answer must be 'text' or 'letter', got {answer!r}")
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.reuse_prefix, self.answer = int(batch_size), reuse_prefix, answer

    def requests(self, trials) -> tuple[list[str], list[str]]:
        """The (context, continuation) pairs scored: two per trial, first option then second."""
        contexts, conts = [], []
        for t in trials:
            ctx = chat_context(self.tokenizer, t.messages, t.prefill)
            cands = ([" " + x for x in LETTERS] if self.answer == "letter"
                     else first_tokens(self.tokenizer, ctx, t.options))
            for c in cands:
                contexts.append(ctx)
                conts.append(c)
        return contexts, conts

    def score(self, trials) -> np.ndarray:
        from iclr25.lm import continuation_logprobs

        trials = list(trials)
        if not trials:
            return np.zeros((0, 2))
        contexts, conts = self.requests(trials)
        prefix = shared_prefix(contexts) if self.reuse_prefix else ""
        if prefix:
            contexts = [c[len(prefix):] for c in contexts]
        try:
            lp = continuation_logprobs(self.model, self.tokenizer, contexts, conts,
                                       shared_prefix=prefix or None,
                                       batch_size=self.batch_size).logprob
        except ValueError:
            if not prefix:
                raise
            lp = continuation_logprobs(self.model, self.tokenizer,
                                       [prefix + c for c in contexts], conts,
                                       batch_size=self.batch_size).logprob
        return lp.numpy().reshape(-1, 2)


def _digit_ids(tokenizer) -> list[int]:
    ids = []
    for d in "0123456789":
        enc = tokenizer.convert_tokens_to_ids(d)
        if enc is None or enc == tokenizer.unk_token_id:
            raise ValueError("rating_distribution needs a tokenizer with one token per digit "
                             "(SmolLM2, Llama 3); this one has none for " + repr(d))
        ids.append(int(enc))
    return ids


@torch.no_grad()
def rating_distribution(model, tokenizer, trials, *, lo: int = 1, hi: int = 11,
                        batch_size: int = 16) -> np.ndarray:
    """``(n, hi - lo + 1)`` probabilities of each rating after ``"Level: "`` (chapter 03).

    Two next-token passes per trial: the first digit after ``"Level: "``, and the token after
    ``"Level: 1"``. A rating ends when a non-digit follows, so ``P(1) = P('1') P(non-digit |
    '1')``, ``P(10) = P('1') P('0' | '1')``, ``P(11) = P('1') P('1' | '1')``; the result is
    renormalised over ``lo..hi`` (``hi <= 19``).
    """
    from iclr25.lm import next_token_logprobs

    if not (1 <= lo <= 9 and lo <= hi <= 19):
        raise ValueError(f"need 1 <= lo <= 9 and lo <= hi <= 19, got lo={lo}, hi={hi}")
    trials = list(trials)
    digits = _digit_ids(tokenizer)
    ctx = [chat_context(tokenizer, t.messages, t.prefill) + " " for t in trials]
    first = next_token_logprobs(model, tokenizer, ctx, digits, batch_size=batch_size).exp()
    second = next_token_logprobs(model, tokenizer, [c + "1" for c in ctx], digits,
                                 batch_size=batch_size).exp()
    probs = np.zeros((len(trials), hi - lo + 1))
    for r in range(lo, hi + 1):
        if r <= 9:
            p = first[:, r]
            if r == 1:
                p = p * (1 - second.sum(1))
        else:
            p = first[:, 1] * second[:, r - 10]
        probs[:, r - lo] = p.double().numpy()
    total = probs.sum(1, keepdims=True)
    if (total <= 0).any():
        raise ValueError("the model puts no probability on any rating; check the prompt")
    return probs / total


def expected_rating(probs: np.ndarray, lo: int = 1) -> np.ndarray:
    """``sum_r r P(r)`` per row of a :func:`rating_distribution` (chapter 03)."""
    probs = np.asarray(probs, dtype=np.float64)
    return probs @ np.arange(lo, lo + probs.shape[1])


class LLMJudge:
    """Reads a free-text reply's choice with a chat model as judge (chapter 03).

    ``judge(replies, questions)`` -> list of 0 (A), 1 (B), -1 (neither or unparsable). Any
    :class:`iclr25.chat.Backend` works; the tests use a scripted judge. The chapter's headline
    numbers use :class:`OptionScorer` and :func:`parse_choice`, not this.
    """

    TEMPLATE = ("Here is a question with two options and someone's reply.\n\n{question}\n\n"
                "Reply: {reply}\n\nWhich option did the reply choose: A ({a}) or B ({b})? "
                "Answer with 'Answer: A', 'Answer: B' or 'Answer: none'.")

    def __init__(self, backend, *, max_new_tokens: int = 8):
        if not hasattr(backend, "chat"):
            raise TypeError(f"the judge needs an iclr25.chat backend (with .chat), got "
                            f"{type(backend).__name__}")
        self.backend, self.max_new_tokens = backend, max_new_tokens

    def judge(self, replies: Sequence[str], questions: Sequence[str],
              options: Sequence[Sequence[str]]) -> list[int]:
        if not len(replies) == len(questions) == len(options):
            raise ValueError(f"{len(replies)} replies, {len(questions)} questions and "
                             f"{len(options)} option pairs; one of each per reply")
        convs = [[{"role": "user", "content": self.TEMPLATE.format(question=q, reply=r, a=o[0],
                                                                     b=o[1])}]
                 for r, q, o in zip(replies, questions, options)]
        if not convs:
            return []
        out = self.backend.chat(convs, max_new_tokens=self.max_new_tokens, temperature=0.0)
        return [parse_choice(o) for o in out]


def similarity_to(encoder, texts: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """Cosine similarity of ``texts[i]`` to ``references[i]`` (chapter 03: a retelling to its
    original) with a :class:`iclr25.embed.SentenceEncoder` (MiniLM)."""
    if len(texts) != len(references):
        raise ValueError(f"{len(texts)} texts but {len(references)} references")
    if not len(texts):
        return np.zeros(0)
    x = encoder.encode(list(texts))
    y = encoder.encode(list(references))
    x = x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-12)
    y = y / np.linalg.norm(y, axis=1, keepdims=True).clip(1e-12)
    return (x * y).sum(1)
