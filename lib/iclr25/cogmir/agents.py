"""Agents: the subject of a protocol, behind any chat backend or scored locally (chapter 03).

Every agent has ``choose(trials) -> Choices`` for two-option trials:

- :class:`ScoringAgent` -- a local ``transformers`` model read by option log-likelihood
  (:class:`~iclr25.cogmir.discriminators.OptionScorer`): the choice is the likelier of " A"
  and " B" after "Answer:", and ``p_target`` the probability of the cued one among the two.
  Also ``rate(trials)`` for rating protocols (expected rating from the 1-11 distribution).
- :class:`ChatAgent` -- any :class:`iclr25.chat.Backend` (``LocalBackend`` for SmolLM2,
  ``OpenAICompatibleBackend`` for a user's own server, ``ScriptedBackend``): it replies in
  free text, read by :func:`~iclr25.cogmir.discriminators.parse_choice` (or an
  :class:`~iclr25.cogmir.discriminators.LLMJudge`).
- :class:`ScriptedSubject` -- a scripted agent with a set conformity ``p``: it follows a cue
  with probability ``p`` (and takes the other option otherwise) and picks at random without a
  cue; used as a :class:`iclr25.chat.ScriptedBackend` to validate the whole pipeline, which must
  measure ``p`` back.
- :class:`ScriptedConfederate` -- a scripted "human" participant that gives a set answer with a
  set probability (chapter 03's confederates, for multi-agent scenes built by hand).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .discriminators import OptionScorer, expected_rating, parse_choice, rating_distribution
from .scenes import LETTERS

__all__ = ["Choices", "ScoringAgent", "ChatAgent", "ScriptedSubject", "ScriptedConfederate"]


@dataclass
class Choices:
    """Decisions on two-option trials (chapter 03): ``choice`` 0 (A), 1 (B) or -1 (no answer
    found); ``p_target`` the probability of the cued option among the two (scored agents only);
    ``replies`` the raw texts (chat agents only)."""

    choice: np.ndarray
    p_target: np.ndarray | None = None
    replies: list[str] | None = None
    logprobs: np.ndarray | None = None


def _trials(trials):
    trials = list(trials)
    if not trials:
        raise ValueError("no trials given")
    return trials


class ScoringAgent:
    """A local model as subject, read by option log-likelihood (chapter 03)."""

    def __init__(self, model, tokenizer, *, batch_size: int = 16, reuse_prefix: bool = True,
                 answer: str = "text", name: str = "subject"):
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.scorer = OptionScorer(model, tokenizer, batch_size=batch_size,
                                   reuse_prefix=reuse_prefix, answer=answer)
        self.batch_size = batch_size

    def choose(self, trials) -> Choices:
        trials = _trials(trials)
        lp = self.scorer.score(trials)
        target = np.array([t.target for t in trials])
        p = np.exp(lp - np.logaddexp(lp[:, :1], lp[:, 1:]))        # softmax over A, B
        # ties (equal log-likelihoods) go to A, as argmax does
        return Choices(choice=lp.argmax(1), p_target=p[np.arange(len(trials)), target],
                       logprobs=lp)

    def rate(self, trials, lo: int = 1, hi: int = 11) -> tuple[np.ndarray, np.ndarray]:
        """``(expected rating (n,), distribution (n, hi - lo + 1))`` for rating trials."""
        trials = _trials(trials)
        probs = rating_distribution(self.model, self.tokenizer, trials, lo=lo, hi=hi,
                                    batch_size=self.batch_size)
        return expected_rating(probs, lo), probs


class ChatAgent:
    """Any chat backend as subject, read from its free-text reply (chapter 03).

    ``judge``: an :class:`~iclr25.cogmir.discriminators.LLMJudge` for replies that
    :func:`parse_choice` cannot read (optional).
    """

    def __init__(self, backend, *, max_new_tokens: int = 24, temperature: float = 0.0,
                 seed: int | None = 0, judge=None, name: str = "subject"):
        if not hasattr(backend, "chat"):
            raise TypeError(f"backend must be an iclr25.chat backend (with .chat), got "
                            f"{type(backend).__name__}")
        self.backend, self.name = backend, name
        self.max_new_tokens, self.temperature, self.seed = max_new_tokens, temperature, seed
        self.judge = judge

    def reply(self, conversations) -> list[str]:
        return self.backend.chat(list(conversations), max_new_tokens=self.max_new_tokens,
                                 temperature=self.temperature, seed=self.seed)

    def choose(self, trials) -> Choices:
        trials = _trials(trials)
        replies = self.reply([t.messages for t in trials])
        choice = np.array([parse_choice(r, t.options) for r, t in zip(replies, trials)])
        if self.judge is not None and (choice < 0).any():
            idx = np.flatnonzero(choice < 0)
            qs = [trials[i].messages[-1]["content"] for i in idx]
            choice[idx] = self.judge.judge([replies[i] for i in idx], qs,
                                           [trials[i].options for i in idx])
        return Choices(choice=choice, replies=replies)


class ScriptedSubject:
    """A scripted subject with conformity ``p`` (chapter 03): a callable for
    :class:`iclr25.chat.ScriptedBackend`. It reads the two options from the ``Is it x or y?``
    of the last user message and the cue with ``cue_pattern`` (the first match wins: in
    the halo scene, the first speaker); with a cue it answers the cued option with probability
    ``p`` and the other otherwise; without one it answers either with probability 1/2. So its
    bias rate is ``p`` and its control rate 1/2."""

    CUE = r"(?:chose|answer is) (.+?)\.(?:\n|$)"

    def __init__(self, p: float, seed: int = 0, cue_pattern: str = CUE):
        if not 0 <= p <= 1:
            raise ValueError(f"conformity p must be in [0, 1], got {p!r}")
        self.p, self.rng = float(p), np.random.default_rng(seed)
        self.pattern = re.compile(cue_pattern, re.MULTILINE)

    def __call__(self, messages) -> str:
        user = [m["content"] for m in messages if m["role"] == "user"][-1]
        opts = re.search(r"Is it (.+) or (.+)\?$", user, re.MULTILINE)
        if not opts:
            raise ValueError("the scripted subject found no 'Is it x or y?' in the message")
        options = [opts.group(1).strip(), opts.group(2).strip()]
        cues = self.pattern.findall(user)
        if cues and cues[0].strip() in options:
            cued = options.index(cues[0].strip())
            pick = cued if self.rng.random() < self.p else 1 - cued
        else:
            pick = int(self.rng.random() < 0.5)
        return f"Answer: {options[pick]}. Explanation: scripted."


class ScriptedConfederate:
    """A scripted participant (chapter 03): says ``answer`` (a letter, standing for the first
    or second option) with probability ``p``, else the other. ``say(rng)`` -> the letter;
    ``line(channel, option)`` -> its message."""

    def __init__(self, name: str, answer: str = "B", p: float = 1.0):
        if answer not in LETTERS:
            raise ValueError(f"answer must be one of {LETTERS}, got {answer!r}")
        if not 0 <= p <= 1:
            raise ValueError(f"p must be in [0, 1], got {p!r}")
        self.name, self.answer, self.p = name, answer, p

    def say(self, rng: np.random.Generator) -> str:
        return self.answer if rng.random() < self.p else LETTERS[1 - LETTERS.index(self.answer)]

    def line(self, channel, option: str) -> str:
        return channel.line(self.name, f"I chose {option}.")
