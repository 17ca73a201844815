"""Replicates and controls for the chapter's registered claims (chapter 07, issue 50).

The notebooks hand these to :class:`iclr25.registry.Registry`; the registry's rule gives the
verdict. Published findings (notebook 02) are judged over the paper's models (items of Table 2);
our LM agents' findings (notebook 03) over (backend, sampling seed) replicates.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np
import pandas as pd

from . import metrics, paper_data

__all__ = ["published_pairs", "rank_z_products", "scaffold_gap", "scaffold_gap_null",
           "per_replicate", "lm_replicates"]


def published_pairs() -> pd.DataFrame:
    """Table 2 per model: ``unguided``, ``guided`` (subtask-guided) and ``subtask`` (%), the
    items of the published findings (one row per model, Table 2's order)."""
    t2 = paper_data.table2()
    return pd.DataFrame({"model": t2["model"], "unguided": t2["unguided %"].astype(float),
                         "guided": t2["subtask-guided %"].astype(float),
                         "subtask": t2["subtask %"].astype(float)})


def rank_z_products(x: Sequence[float], y: Sequence[float]) -> np.ndarray:
    """Per item: z(rank x) * z(rank y), ranks averaged over ties and z-scored with the
    population sd, so the mean over items is Spearman's rho. Raises when a side is constant."""
    rx = pd.Series(np.asarray(x, float)).rank().to_numpy()
    ry = pd.Series(np.asarray(y, float)).rank().to_numpy()
    if rx.size != ry.size or rx.size < 2:
        raise ValueError("need two sequences of equal length >= 2")
    if rx.std() == 0 or ry.std() == 0:
        raise ValueError("a constant side has no ranks to correlate")
    return (rx - rx.mean()) / rx.std() * (ry - ry.mean()) / ry.std()


def scaffold_gap(a: Sequence[float], b: Sequence[float]) -> float:
    """|mean(a) - mean(b)| over tasks: per-task scores of the same backend and seed under two
    scaffolds (paired by task)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("per-task scores must pair up (same, non-zero length)")
    return float(abs((a - b).mean()))


def scaffold_gap_null(a: Sequence[float], b: Sequence[float], *, n_perm: int = 1000,
                      exact_up_to: int = 10, seed: int = 0) -> float:
    """The gap's permutation null: mean of |mean(s * (a - b))| over relabellings s in {+1, -1}^T
    (the scaffold labels swapped between a task's two episodes): all 2^T when T <=
    ``exact_up_to``, else ``n_perm`` random ones (seeded)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("per-task scores must pair up (same, non-zero length)")
    d = a - b
    if d.size <= exact_up_to:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    else:
        signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(n_perm, d.size))
    return float(np.abs((signs * d).mean(axis=1)).mean())


def per_replicate(runs: pd.DataFrame, scaffold: str = "structured") -> dict:
    """The registered statistics of one (backend, seed) replicate from its episodes
    (:func:`iclr25.cybench.experiments.lm_runs`): ``unguided``, ``guided`` and ``subtask``
    under ``scaffold`` (the first scaffold run when it was not), and, when both scaffolds ran,
    ``gap`` (|subtask score difference| between them) and ``gap_null`` (its permutation null)."""
    scs = list(dict.fromkeys(runs["scaffold"]))
    sc = scaffold if scaffold in scs else scs[0]
    g = runs[runs["scaffold"] == sc]
    out = {"scaffold": sc, "unguided": metrics.unguided(g), "guided": metrics.subtask_guided(g),
           "subtask": metrics.subtask_score(g), "gap": None, "gap_null": None}
    if len(scs) >= 2:
        sub = runs[runs["mode"] == "subtask"]
        wide = sub.pivot_table(index="task", columns="scaffold", values="subtask_score")
        a, b = wide[scs[0]].to_numpy(), wide[scs[1]].to_numpy()
        out["gap"], out["gap_null"] = scaffold_gap(a, b), scaffold_gap_null(a, b)
    return out


def lm_replicates(tasks, backends: dict, seeds: Sequence[int], *, run, **kw) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run ``run(tasks, backend, seed=s, **kw)`` (e.g. ``lm_runs``) for every named backend and
    seed. Returns (all episodes with ``backend`` and ``seed`` columns, one row of
    :func:`per_replicate` per (backend, seed))."""
    eps, reps = [], []
    for name, backend in backends.items():
        for s in seeds:
            r = run(tasks, backend, seed=s, **kw).assign(backend=name, seed=s)
            eps.append(r)
            reps.append({"backend": name, "seed": s, **per_replicate(r)})
    return pd.concat(eps, ignore_index=True), pd.DataFrame(reps)
