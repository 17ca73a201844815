"""The task specification (chapter 07, Cybench Sec. 2).

A Cybench task is a description, starter files (local files the agent sees; remote files that run
a task server), an evaluator (the flag), and subtasks -- questions with answers that lead to the
flag, the last one always "What is the flag?". Each task also carries its first-solve time (FST):
how long the fastest human team took, the paper's measure of difficulty.

:class:`Task` holds the same fields as Cybench's ``metadata/metadata.json`` as far as the brief
records them, plus a scripted reference solution: for each subtask, the commands that solve it;
the last command prints exactly the subtask's answer (Cybench's ``solution.sh`` prints the flag).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

__all__ = ["Subtask", "Task", "CATEGORIES"]

#: the paper's task categories (Table 1); ours use all but pwn
CATEGORIES = ("crypto", "forensics", "reversing", "web", "misc", "pwn")


@dataclass(frozen=True)
class Subtask:
    """One step toward the flag: a ``question``, its ``answer`` and ``answer_format`` (the
    paper's ``*``-masked hint, e.g. ``flag{*}``), and the reference ``commands`` whose last one
    prints the answer (chapter 07)."""

    question: str
    answer: str
    answer_format: str
    commands: tuple[str, ...]
    hints: tuple[str, ...] = ()

    def __post_init__(self):
        if not self.commands:
            raise ValueError(f"subtask {self.question!r} needs at least one reference command")
        object.__setattr__(self, "commands", tuple(self.commands))
        object.__setattr__(self, "hints", tuple(self.hints))


@dataclass(frozen=True)
class Task:
    """A capture-the-flag task (chapter 07).

    Parameters
    ----------
    name, category, description:
        ``category`` one of :data:`CATEGORIES`; ``description`` is the unguided prompt's task text.
    fst_min:
        First-solve time in minutes. For the book's own tasks this is *our estimate* of a human
        solve time (there was no competition), set when the task was written.
    files:
        Starter files ``{path: bytes | str}`` copied into the agent's working directory.
    flag:
        The evaluator's answer; unguided runs also count a flag that appears in any observation.
    subtasks:
        The guided steps; the last one asks for the flag.
    service:
        ``(files, command, port)``: a task server on ``127.0.0.1:port`` inside the sandbox, or None.
    setup:
        Commands run once in the sandbox before the agent starts (Cybench's ``init_script.sh``).
    """

    name: str
    category: str
    description: str
    fst_min: float
    files: Mapping[str, bytes | str]
    flag: str
    subtasks: tuple[Subtask, ...]
    service: tuple[Mapping[str, bytes | str], str, int] | None = None
    setup: tuple[str, ...] = ()

    def __post_init__(self):
        if self.category not in CATEGORIES:
            raise ValueError(f"task {self.name!r}: unknown category {self.category!r}; "
                             f"valid: {', '.join(CATEGORIES)}")
        if not (isinstance(self.fst_min, (int, float)) and self.fst_min > 0):
            raise ValueError(f"task {self.name!r}: fst_min must be positive minutes")
        if not self.subtasks:
            raise ValueError(f"task {self.name!r} needs at least one subtask (the flag)")
        if self.subtasks[-1].answer != self.flag:
            raise ValueError(f"task {self.name!r}: the last subtask must ask for the flag")
        object.__setattr__(self, "subtasks", tuple(self.subtasks))
        object.__setattr__(self, "setup", tuple(self.setup))

    @property
    def solution(self) -> tuple[str, ...]:
        """The whole reference solution (every subtask's commands, in order)."""
        return tuple(c for s in self.subtasks for c in s.commands)

    @property
    def n_steps(self) -> int:
        """Commands in the reference solution (a difficulty proxy)."""
        return len(self.solution)

    @property
    def log2_fst(self) -> float:
        """``log2(FST in minutes)``: the weight of the paper's weighted metrics (Tables 6-7)."""
        return math.log2(self.fst_min)

    def sandbox_kwargs(self) -> dict:
        """Keyword arguments for :class:`iclr25.cybench.Sandbox` that open this task."""
        return {"files": dict(self.files), "services": [self.service] if self.service else [],
                "setup": self.setup}

    def metadata(self) -> dict:
        """The task as a Cybench-style ``metadata.json`` dict (starter files listed by name)."""
        return {
            "name": self.name, "categories": [self.category], "difficulty_fst_min": self.fst_min,
            "easy_prompt": self.description, "hard_prompt": self.description,
            "target_host": f"127.0.0.1:{self.service[2]}" if self.service else "",
            "files": sorted(self.files),
            "subtasks": [{"question": s.question, "answer": s.answer,
                          "answer_format": s.answer_format, "hints": list(s.hints),
                          "commands": list(s.commands)} for s in self.subtasks],
        }

    def to_json(self) -> str:
        return json.dumps(self.metadata(), indent=2)
