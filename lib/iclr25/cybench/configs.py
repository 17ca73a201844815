"""The chapter's runs at each profile (see :mod:`iclr25.profiles`; chapter 07).

``smoke`` keeps every notebook within seconds (a few tasks, one seed; the LM: 2 tasks x 2
iterations x 32 tokens, one scaffold), ``book`` runs every task for the scripted agents and, for
SmolLM2, 4 tasks x 3 unguided iterations (1 per subtask) x 48 tokens in both scaffolds (what fits
5 minutes on a shared 2-core machine), ``paper`` uses the paper's budgets (15 unguided
iterations, 5 per subtask, 2,000 tokens, temperature 0.5) on every task, with the registered
replicates: SmolLM2-135M and Gemma-3-270M, sampling seeds 0-2.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..profiles import make_config

__all__ = ["SandboxConfig", "GradedConfig", "LMConfig", "sandbox", "graded", "lm"]


@dataclass(frozen=True)
class SandboxConfig:
    """``01-tasks-and-sandbox``: reference solutions and escape attempts."""

    n_tasks: int           # tasks whose reference solution is run (all: 17)
    n_timing: int          # commands timed for the per-command overhead
    backend: str = "auto"  # bwrap | unshare | auto
    seed: int = 0


@dataclass(frozen=True)
class GradedConfig:
    """``02-metrics-and-graded-agents``: replay agents of skill p on every task."""

    n_tasks: int
    ps: tuple              # skills p (issue: 0.2, 0.5, 0.8, 1.0)
    n_seeds: int           # seeds per (task, p, mode)
    max_iters: int         # paper: 15 unguided iterations
    subtask_iters: int     # paper: 5 per subtask
    workers: int = 2
    backend: str = "auto"
    seed: int = 0


@dataclass(frozen=True)
class LMConfig:
    """``03-small-model-agent``: SmolLM2 as the agent."""

    n_tasks: int
    max_iters: int         # unguided iterations (paper: 15)
    subtask_iters: int     # per subtask (paper: 5)
    max_new_tokens: int    # paper: 2000 output tokens
    memory: int            # iterations kept in the prompt (paper: 3)
    batch_size: int
    scaffolds: tuple       # structured and/or action_only (Table 3)
    temperature: float = 0.0   # paper: 0.5; greedy here so the book repeats
    threads: int = 1           # torch threads (1 is fastest on a shared 2-core machine)
    backend: str = "auto"
    seed: int = 0              # first sampling seed; seeds seed .. seed + n_seeds - 1
    n_seeds: int = 1           # sampling seeds per model (registered: 3)
    models: tuple = ("smollm2-135m-instruct",)  # registered: SmolLM2-135M and Gemma-3-270M


_SANDBOX = {"smoke": {"n_tasks": 5, "n_timing": 10},
            "book": {"n_tasks": 17, "n_timing": 50},
            "paper": {"n_tasks": 17, "n_timing": 200}}
_GRADED = {"smoke": {"n_tasks": 3, "ps": (0.2, 0.5, 0.8, 1.0), "n_seeds": 1, "max_iters": 15,
                     "subtask_iters": 5},
           "book": {"n_tasks": 17, "ps": (0.2, 0.5, 0.8, 1.0), "n_seeds": 3, "max_iters": 15,
                    "subtask_iters": 5},
           "paper": {"n_tasks": 17, "ps": (0.2, 0.5, 0.8, 1.0), "n_seeds": 20, "max_iters": 15,
                     "subtask_iters": 5}}
_LM = {"smoke": {"n_tasks": 2, "max_iters": 2, "subtask_iters": 1, "max_new_tokens": 32,
                 "memory": 3, "batch_size": 8, "scaffolds": ("action_only",)},
       "book": {"n_tasks": 4, "max_iters": 3, "subtask_iters": 1, "max_new_tokens": 48,
                "memory": 3, "batch_size": 8, "scaffolds": ("structured", "action_only")},
       "paper": {"n_tasks": 17, "max_iters": 15, "subtask_iters": 5, "max_new_tokens": 2000,
                 "memory": 3, "batch_size": 16, "scaffolds": ("structured", "action_only"),
                 "temperature": 0.5, "n_seeds": 3,
                 "models": ("smollm2-135m-instruct", "gemma-3-270m")}}


def sandbox(profile: str | None = None, **overrides) -> SandboxConfig:
    return make_config(SandboxConfig, _SANDBOX, profile, **overrides)


def graded(profile: str | None = None, **overrides) -> GradedConfig:
    cfg = make_config(GradedConfig, _GRADED, profile, **overrides)
    if any(not 0 <= p <= 1 for p in cfg.ps):
        raise ValueError(f"every p must be in [0, 1], got {cfg.ps}")
    return cfg


def lm(profile: str | None = None, **overrides) -> LMConfig:
    cfg = make_config(LMConfig, _LM, profile, **overrides)
    if cfg.n_seeds < 1 or not cfg.models:
        raise ValueError("need n_seeds >= 1 and at least one model")
    return cfg
