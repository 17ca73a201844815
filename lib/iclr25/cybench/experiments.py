"""The chapter's experiments as functions (chapter 07): the graded-agent sweep of
``02-metrics-and-graded-agents`` and the LM runs of ``03-small-model-agent``."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .agents import LMAgent, ReplayAgent
from .runner import MODES, Memo, run_episodes
from .task import Task

__all__ = ["graded_sweep", "lm_runs", "spearman"]


def graded_sweep(tasks: Sequence[Task], ps: Sequence[float], n_seeds: int, *, seed: int = 0,
                 max_iters: int = 15, subtask_iters: int = 5, backend: str = "auto",
                 workers: int = 2, log: str | Path | None = None, progress=None) -> pd.DataFrame:
    """Replay agents of skill ``p`` on every task, both modes, ``n_seeds`` seeds each (chapter
    07). One row per episode (:meth:`Episode.record`) plus ``p``. Observations are shared through
    one :class:`Memo` (see :mod:`iclr25.cybench.runner`)."""
    if n_seeds < 1:
        raise ValueError("n_seeds must be >= 1")
    memo = Memo()
    grid = [(s, p, m) for s in range(seed, seed + n_seeds) for p in ps for m in MODES]
    rows = []
    it = progress(grid, desc="graded agents") if progress else grid
    for s, p, mode in it:
        eps = run_episodes(tasks, ReplayAgent(p, seed=s), mode, seed=s, max_iters=max_iters,
                           subtask_iters=subtask_iters, backend=backend, workers=workers,
                           log=log, memo=memo)
        rows += [{**e.record(), "p": p} for e in eps]
    df = pd.DataFrame(rows)
    df.attrs["memo_hits"], df.attrs["memo_misses"] = memo.hits, memo.misses
    return df


def lm_runs(tasks: Sequence[Task], backend, *, scaffolds=("structured", "action_only"),
            modes=MODES, max_iters: int = 15, subtask_iters: int = 5, max_new_tokens: int = 256,
            memory: int = 3, temperature: float = 0.0, seed: int = 0,
            sandbox_backend: str = "auto", log: str | Path | None = None,
            progress=None) -> pd.DataFrame:
    """An LM agent (any chat backend) on every task, for each scaffold and mode (chapter 07).
    All tasks of one (scaffold, mode) run as one batch per iteration. One row per episode plus
    ``scaffold``."""
    rows = []
    grid = [(sc, m) for sc in scaffolds for m in modes]
    it = progress(grid, desc="LM agent") if progress else grid
    for sc, mode in it:
        agent = LMAgent(backend, scaffold=sc, memory=memory, max_new_tokens=max_new_tokens,
                        temperature=temperature, seed=seed)
        eps = run_episodes(tasks, agent, mode, seed=seed, max_iters=max_iters,
                           subtask_iters=subtask_iters, backend=sandbox_backend, log=log)
        rows += [{**e.record(), "scaffold": sc} for e in eps]
    return pd.DataFrame(rows)


def spearman(x, y) -> float:
    """Spearman rank correlation (average ranks for ties); NaN when either side is constant."""
    x, y = pd.Series(np.asarray(x, float)).rank(), pd.Series(np.asarray(y, float)).rank()
    if x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])
