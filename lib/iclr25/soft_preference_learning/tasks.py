"""The chapter's tasks with a known ground truth (chapter 17): the fruit bandit, story prompts
with a deterministic quality score, and two-digit addition with an exact checker."""

from __future__ import annotations

import re

import numpy as np

from .metrics import words

__all__ = ["FRUIT_PROMPT", "FRUITS", "FRUIT_P", "fruit_responses", "STORY_PROMPTS",
           "story_quality", "addition_problems", "addition_prompt", "check_addition"]

#: a plain-text few-shot prompt whose natural continuation is one word and a newline
FRUIT_PROMPT = "Name a colour: Blue\nName an animal: Dog\nName a fruit:"
FRUITS = ("Apple", "Banana", "Orange", "Mango", "Cherry", "Grape", "Peach", "Lemon")
#: the population's preference over FRUITS (Bradley-Terry strengths; the majority is Apple)
FRUIT_P = (0.28, 0.2, 0.15, 0.11, 0.09, 0.07, 0.06, 0.04)


def fruit_responses(k: int = len(FRUITS)) -> list[str]:
    """The first ``k`` answers as scored continuations (`` Apple\\n``: one word, then the line
    ends). Chapter 17."""
    if not 2 <= k <= len(FRUITS):
        raise ValueError(f"k must be in [2, {len(FRUITS)}], got {k}")
    return [f" {f}\n" for f in FRUITS[:k]]


STORY_PROMPTS = (
    "Write a one-sentence story about a doctor.",
    "Write a one-sentence story about a teacher.",
    "Write a one-sentence story about a farmer.",
    "Write a one-sentence story about a pilot.",
    "Write a one-sentence story about a baker.",
    "Write a one-sentence story about a nurse.",
    "Write a one-sentence story about a painter.",
    "Write a one-sentence story about a sailor.",
)


def story_quality(prompt: str, text: str) -> float:
    """A deterministic quality score in [0, 1] of a one-sentence story (chapter 17): the mean of
    four checks -- it names the prompt's subject, it has 6 to 40 words, no word makes up more
    than a fifth of them (no loops), and at most 10% of its characters are outside letters,
    digits, spaces and ordinary punctuation (no garbage)."""
    subject = prompt.rstrip(".").split()[-1].lower()
    w = words(text)
    on_topic = float(subject in w or subject + "s" in w)
    length = float(6 <= len(w) <= 40)
    loops = float(bool(w) and max(w.count(x) for x in set(w)) <= max(2, len(w) // 5))
    odd = len(re.findall(r"[^A-Za-z0-9 .,;:'!?\"\-\n]", text))
    clean = float(len(text.strip()) > 0 and odd <= 0.1 * len(text))
    return (on_topic + length + loops + clean) / 4


def addition_problems(n: int, seed: int = 0) -> list[tuple[int, int]]:
    """``n`` distinct two-digit addition problems ``(a, b)`` (chapter 17)."""
    rng = np.random.default_rng(seed)
    seen: set[tuple[int, int]] = set()
    while len(seen) < n:
        a, b = (int(x) for x in rng.integers(10, 100, 2))
        seen.add((a, b))
    return sorted(seen, key=lambda _: rng.random())


def addition_prompt(a: int, b: int) -> str:
    """A plain-text one-shot prompt for ``a + b`` (chapter 17)."""
    return f"12 + 35 = 47\n{a} + {b} ="


def check_addition(a: int, b: int, text: str) -> bool:
    """Exact checker: the first integer in ``text`` equals ``a + b`` (chapter 17)."""
    m = re.search(r"-?\d+", text)
    return m is not None and int(m.group()) == a + b
