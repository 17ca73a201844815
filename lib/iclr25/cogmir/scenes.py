"""Scenes (prompt templates with named slots), communication channels, and trials.

Part of chapter 03 (CogMir). A :class:`Scene` is a template for the subject's conversation: a
system message (the study's instructions, shared by every trial of a protocol, so its KV cache
is computed once when options are scored) and a user message with ``{slots}``. A channel turns
what another agent says into a line of that message: :class:`Broadcast` (one line to everyone,
e.g. "the other 49 participants: we all chose B") or :class:`OneToOne` (a private message from
one identity). A :class:`Trial` is one rendered conversation plus what the analysis needs: which
option the cue points at (``target``, 0 = A, 1 = B), the condition and the item.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Scene", "Broadcast", "OneToOne", "Trial", "RatingTrial", "LETTERS",
           "CHOICE_SYSTEM", "RATING_SYSTEM"]

LETTERS = ("A", "B")

#: no system message: the model's own default (SmolLM2's chat template adds one). A study
#: instruction as system message made SmolLM2 pick the first-listed option far more often (it
#: then answered only 47% of known questions right in both orders, against 75% without one).
CHOICE_SYSTEM = None
RATING_SYSTEM = None


@dataclass(frozen=True)
class Scene:
    """A conversation template (chapter 03): ``user`` holds ``{slot}`` placeholders; ``system``
    is the shared instruction; ``prefill`` starts the subject's reply when options are scored
    (``"Answer:"``, ``"Level:"``)."""

    name: str
    user: str
    system: str | None = CHOICE_SYSTEM
    prefill: str = "Answer:"

    @property
    def slots(self) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(self.user) if f}

    def render(self, **slots: Any) -> list[dict[str, str]]:
        """The messages with every slot filled; a missing or unknown slot is an error naming
        the scene's slots."""
        need = self.slots
        missing, extra = sorted(need - set(slots)), sorted(set(slots) - need)
        if missing or extra:
            raise KeyError(f"scene {self.name!r} has slots {sorted(need)}; missing {missing}, "
                           f"unknown {extra}")
        msgs = [{"role": "user", "content": self.user.format(**slots)}]
        if self.system:
            msgs.insert(0, {"role": "system", "content": self.system})
        return msgs


@dataclass(frozen=True)
class Broadcast:
    """One message to every participant at once (chapter 03): ``line(sender, text)``."""

    kind: str = "broadcast"

    def line(self, sender: str, text: str) -> str:
        return f"[message to all participants] {sender}: {text}"


@dataclass(frozen=True)
class OneToOne:
    """A private message from one sender to the subject (chapter 03)."""

    kind: str = "one-to-one"

    def line(self, sender: str, text: str) -> str:
        return f"[private message to you] {sender}: {text}"


@dataclass
class Trial:
    """One two-option trial (chapter 03). ``options`` are the two option texts in the order
    shown (first = A, second = B); ``target`` is the position (0 = first, 1 = second) of the
    option the cue points at; in a control trial, of the option it *would* point at, so that
    rates compare like with like."""

    protocol: str
    condition: str
    item: str
    target: int
    messages: list[dict[str, str]]
    options: tuple[str, str] = ("A", "B")
    prefill: str = "Answer:"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.target not in (0, 1):
            raise ValueError(f"target must be 0 (first option) or 1 (second), got "
                             f"{self.target!r}")
        if len(self.options) != 2:
            raise ValueError(f"a trial has two options, got {self.options!r}")


@dataclass
class RatingTrial:
    """One rating trial (chapter 03, Ben Franklin): the subject answers ``Level: <1-11>``."""

    protocol: str
    condition: str
    item: str
    messages: list[dict[str, str]]
    prefill: str = "Level:"
    extra: dict[str, Any] = field(default_factory=dict)
