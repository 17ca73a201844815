"""The replicates the chapter's registry judges: per data set, per seed, per block of seeds.

Each function turns a run into the replicates of one registered statistic (see
``book/claims/04-mle-model-based-rl.yaml``); the registry, not the notebook, turns them into a
verdict. Nothing here thresholds or judges.

Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
"""

from __future__ import annotations

import numpy as np

from .analysis import loglog_slope
from .mdp import rollout
from .models import FiniteModelClass

__all__ = ["version_space_sizes", "late_slopes", "block_ids", "block_slopes", "worst_block_slopes",
           "tune_interior"]


def version_space_sizes(cls: FiniteModelClass, true_index: int, behaviour, sizes, n_rep: int,
                        beta: float, rng) -> dict:
    """``|P_hat|`` on ``n_rep`` independent data sets of each size in ``sizes`` (trajectories).

    Returns ``{"size": [len(sizes), n_rep], "covered": ..., "q_range": ...}`` (``q_range`` only
    when the models carry a ``q`` parameter): replicate ``i`` of every size is an independent data
    set, so ``size[-1] - size[0]`` pairs the largest and the smallest data set of replicate ``i``.
    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
    """
    sizes = [int(n) for n in sizes]
    if not sizes or min(sizes) < 1 or n_rep < 1:
        raise ValueError(f"sizes must be >= 1 trajectories and n_rep >= 1, got {sizes}, {n_rep}")
    rng = np.random.default_rng(rng)
    qs = np.array([p.get("q", np.nan) for p in cls.params], float) if cls.params else None
    out = {"size": np.zeros((len(sizes), n_rep)), "covered": np.zeros((len(sizes), n_rep), bool),
           "q_range": np.full((len(sizes), n_rep), np.nan)}
    for i, n in enumerate(sizes):
        st, ac = rollout(cls.P[true_index], behaviour, cls.H, cls.s0, n * n_rep, rng)
        sas = cls.S * cls.A * cls.S
        flat = (st[:, :-1] * cls.A + ac) * cls.S + st[:, 1:]           # [n * n_rep, H]
        flat = flat + (np.arange(n * n_rep) // n)[:, None] * sas        # replicate i: episodes i*n..
        c = np.bincount(flat.ravel(), minlength=n_rep * sas).astype(float)
        c = c.reshape(n_rep, cls.S, cls.A, cls.S)
        vs = cls.version_space(c, beta)
        out["size"][i] = vs.sum(-1)
        out["covered"][i] = vs[:, true_index]
        if qs is not None and np.isfinite(qs).all():
            out["q_range"][i] = [np.ptp(qs[v]) for v in vs]
    return out


def late_slopes(cum_regret) -> np.ndarray:
    """Per seed, the log-log slope of cumulative regret against the episode over the second half
    of the run (``cum_regret[n_seeds, K]``). A seed whose regret does not change over the second
    half has slope 0 (it has stopped growing); otherwise the slope is fitted on the episodes whose
    cumulative regret is positive. Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
    """
    cum = np.asarray(cum_regret, float)
    if cum.ndim != 2 or cum.shape[1] < 4:
        raise ValueError(f"cum_regret must be [n_seeds, K] with K >= 4, got {cum.shape}")
    half = cum.shape[1] // 2
    k = np.arange(half, cum.shape[1]) + 1.0
    out = np.zeros(cum.shape[0])
    for i, y in enumerate(cum[:, half:]):
        if y[-1] - y[0] <= 1e-12 or (y > 0).sum() < 2:
            out[i] = 0.0
        else:
            out[i] = loglog_slope(k, y)
    return out


def block_ids(seeds, n_blocks: int) -> np.ndarray:
    """Disjoint blocks of equal size over ``seeds`` numbered ``0..n-1``: seed ``i`` goes to block
    ``i // (n / n_blocks)``. Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
    """
    seeds = np.asarray(seeds, int)
    n = int(seeds.max()) + 1 if seeds.size else 0
    if n_blocks < 1 or n % n_blocks:
        raise ValueError(f"{n} seeds do not split into {n_blocks} equal blocks")
    return seeds // (n // n_blocks)


def _slope(x, y) -> float:
    """:func:`loglog_slope` on the points with ``y > 0``; 0 (flat) when fewer than two are positive
    (a mean that is exactly 0 has no logarithm: it is left out of the fit, never floored)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    return loglog_slope(x, y) if ((x > 0) & (y > 0)).sum() >= 2 else 0.0


def block_slopes(df, x: str, y: str, n_blocks: int, *, seed: str = "seed") -> np.ndarray:
    """One replicate per block of seeds: the log-log slope of the block's mean ``y`` against ``x``.

    ``df`` has one row per (``x``, seed); blocks are :func:`block_ids` of ``df[seed]``. Returns
    ``[n_blocks]``. Means that are exactly 0 are left out of a block's fit (see :func:`_slope`).
    Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
    """
    d = df.assign(_block=block_ids(df[seed].to_numpy(), n_blocks))
    m = d.groupby(["_block", x])[y].mean()
    return np.array([_slope(m.loc[b].index.to_numpy(float), m.loc[b].to_numpy(float))
                     for b in range(n_blocks)])


def worst_block_slopes(df, x: str, n_blocks: int, *, y: str = "gap", over: str = "g",
                       seed: str = "seed") -> np.ndarray:
    """One replicate per block of data sets: the log-log slope on ``x`` of the worst (largest), over
    the family (``over``), of the block's mean ``y``. ``df`` has one row per (``x``, seed, ``over``);
    zero means are left out of the fit as in :func:`block_slopes`.
    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    d = df.assign(_block=block_ids(df[seed].to_numpy(), n_blocks))
    worst = d.groupby(["_block", x, over])[y].mean().groupby(["_block", x]).max()
    return np.array([_slope(worst.loc[b].index.to_numpy(float), worst.loc[b].to_numpy(float))
                     for b in range(n_blocks)])


def tune_interior(score, grid, *, factor: float = 3.0, max_extensions: int = 6):
    """Choose the grid value with the smallest ``score``; while it is an end of the grid, extend
    the grid by ``factor`` in that direction and score the new value (the registered tuning rule of
    notebooks 02 and 03: the chosen value is interior).

    ``score(values) -> sequence of scores`` scores several values at once. Returns ``(best,
    scores)`` with ``scores`` a ``{value: score}`` dict of every value tried. Introduced in
    notebook ``04-mle-model-based-rl/02-online-optimism``.
    """
    vals = sorted(float(v) for v in grid)
    if len(vals) < 3:
        raise ValueError(f"a tuning grid needs at least 3 values (an interior one), got {grid}")
    if factor <= 1:
        raise ValueError(f"factor must be > 1, got {factor}")
    scores = dict(zip(vals, map(float, score(vals))))
    for _ in range(max_extensions + 1):
        keys = sorted(scores)
        best = min(keys, key=lambda v: (scores[v], v))
        if keys[0] < best < keys[-1]:
            return best, scores
        new = best / factor if best == keys[0] else best * factor
        scores[new] = float(score([new])[0])
    raise RuntimeError(f"no interior optimum after {max_extensions} extensions: {scores}")
