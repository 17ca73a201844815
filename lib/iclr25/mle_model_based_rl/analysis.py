"""Small analysis helpers: log-log slopes, the offline q-grid, behaviour policies.

Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["loglog_slope", "q_grid", "fine_q_grid", "gamble_behaviour", "instance", "ONLINE_INSTANCES",
           "OFFLINE_INSTANCES", "LOCK"]


def loglog_slope(x, y) -> float:
    """Least-squares slope of ``log y`` against ``log x`` (needs >= 2 points with x, y > 0).

    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D of the same length, got {x.shape} and {y.shape}")
    ok = (x > 0) & (y > 0)
    if ok.sum() < 2:
        raise ValueError("a log-log slope needs at least two points with x > 0 and y > 0")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def q_grid(n: int) -> np.ndarray:
    """``n`` evenly spaced gamble probabilities in [0, 1] (both ends included: deterministic models).

    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
    """
    if n < 2:
        raise ValueError(f"the q grid needs n >= 2 points, got {n}")
    return np.round(np.linspace(0.0, 1.0, n), 6)


def fine_q_grid() -> np.ndarray:
    """The offline grid: steps of 0.01 plus points geometrically close to 0 and 1 (1e-4 .. 1e-1),
    so that the version space can shrink around a deterministic model at the 1/K rate.

    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    near = np.logspace(-4, -1, 13)
    return np.unique(np.round(np.concatenate([np.linspace(0, 1, 101), near, 1 - near]), 6))


def gamble_behaviour(H: int, L: int, p_gamble: float) -> np.ndarray:
    """Behaviour policy ``[H, S, A]`` on the test-bed: uniform in the chain, gamble with probability
    ``p_gamble`` at the gamble state (its coverage of the gamble shrinks with ``p_gamble``).

    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
    """
    if not 0 <= p_gamble <= 1:
        raise ValueError(f"p_gamble must lie in [0, 1], got {p_gamble}")
    S = L + 4
    b = np.full((H, S, 2), 0.5)
    b[:, L] = [p_gamble, 1 - p_gamble]
    return b


# The chapter's instances of the test-bed (lock (0, 1), L = 2). ``rho`` is set so that the optimal
# policy and its gap are as described; the model class always contains the true model.
ONLINE_INSTANCES = {
    # the exit is optimal by a gap of 0.05 (x steps left); the gamble's variance differs
    "deterministic": dict(q=0.0, slip=0.0, rho=0.05),
    "near-deterministic": dict(q=0.05, slip=0.0, rho=0.1),
    "stochastic": dict(q=0.5, slip=0.2, rho=0.55),
    # the gamble is optimal: a learner that stops gambling after bad luck pays linear regret
    "gamble-optimal": dict(q=0.6, slip=0.2, rho=0.5),
}
OFFLINE_INSTANCES = {
    "stochastic": dict(q=0.5, slip=0.2, rho=0.4),       # pi* gambles; Var > 0
    "deterministic": dict(q=1.0, slip=0.0, rho=0.9),    # pi* gambles; Var = 0
    "exit-optimal": dict(q=0.3, slip=0.2, rho=0.4),     # pi* exits; plug-in may gamble on luck
}
LOCK = (0, 1)


def instance(name: str, *, H: int, q_grid, slip_grid, normalised: bool = True, offline: bool = False):
    """``(cls, true_index)`` for one of the chapter's named instances (see ``ONLINE_INSTANCES`` and
    ``OFFLINE_INSTANCES``). Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``."""
    from .models import gamble_chain_class

    table = OFFLINE_INSTANCES if offline else ONLINE_INSTANCES
    if name not in table:
        raise ValueError(f"unknown instance {name!r}; valid: {', '.join(table)}")
    spec = table[name]
    cls = gamble_chain_class(q_grid, slip_grid=slip_grid, rho=spec["rho"], H=H, normalised=normalised)
    try:
        true = cls.index(lock=LOCK, slip=spec["slip"], q=spec["q"])
    except KeyError as e:
        raise ValueError(f"instance {name!r} (q={spec['q']}, slip={spec['slip']}) is not in the model "
                         f"class: the grids must contain it (realizability)") from e
    return cls, true
