"""Offline model-based RL: CPPO-LR-style pessimism (the paper's Algorithm 2), plug-in MLE, coverage.

Given K trajectories from a behaviour policy, build the MLE version space ``P_hat`` and return

    pi_hat = argmax_{pi in Pi} min_{P in P_hat} V^pi_{0;P}(s0)                 (pessimism)

**Restriction.** The paper maximises over all policies; a max-min over every deterministic Markov
policy is a product of ``A^{H S}`` candidates. We restrict ``Pi`` to an explicit, data-dependent set:
the optimal policy of every model in ``P_hat`` plus the behaviour policy. Any policy the paper's
argmax could return that is optimal for some plausible model is in this set; policies optimal for no
plausible model are not considered.

The plug-in baseline plans in the maximum-likelihood model. The coverage coefficient is the tabular
single-policy concentrability ``C^pi = max_{h,s,a} d^pi_h(s,a) / d^b_h(s,a)``, which upper-bounds the
model-class coefficient the paper's Theorem 2 uses.

Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .mdp import as_probs, evaluate, occupancy, rollout
from .models import FiniteModelClass, counts_from

__all__ = ["OfflineResult", "PolicyTable", "collect", "cppo_lr", "plug_in", "coverage",
           "pessimistic_value", "offline_sweep"]


def collect(P: np.ndarray, behaviour, H: int, s0: int, K: int, rng) -> np.ndarray:
    """Counts ``n(s, a, s')`` of ``K`` trajectories of ``behaviour`` in the true model ``P``.

    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    if K < 1:
        raise ValueError(f"K (number of trajectories) must be >= 1, got {K}")
    states, actions = rollout(P, behaviour, H, s0, K, rng)
    return counts_from(states, actions, P.shape[0], P.shape[1])


class PolicyTable:
    """The values of a fixed set of policies in every model of a class, computed once.

    ``policies[U, H, S, A]`` are the distinct optimal policies of the class's models plus any
    ``extra`` policies (e.g. the behaviour policy); ``values[U, M]`` is ``V^{pi_u}_{0;P_m}(s0)``;
    ``of_model[m]`` is the row of model ``m``'s optimal policy.

    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """

    def __init__(self, cls: FiniteModelClass, extra=()):
        self.cls = cls
        _, pi_all = cls.optimal()
        uniq, inv = np.unique(pi_all.reshape(cls.M, -1), axis=0, return_inverse=True)
        pols = [np.eye(cls.A)[u.reshape(cls.H, cls.S)] for u in uniq]
        self.n_optimal = len(pols)
        pols += [as_probs(e, cls.A) for e in extra]
        self.policies = np.stack(pols)
        self.of_model = inv.ravel()
        self.values = np.stack([cls.values_in(p) for p in self.policies])


@dataclass
class OfflineResult:
    """What :func:`cppo_lr` or :func:`plug_in` returns.

    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """

    policy: np.ndarray          # [H, S, A] action probabilities of the returned policy
    row: int                    # its row in the PolicyTable
    estimate: float             # pessimistic value (cppo_lr) or plug-in value (plug_in)
    vs_size: int                # |P_hat|
    n_candidates: int           # |Pi| searched


def _table(cls, table):
    if table is None:
        return PolicyTable(cls)
    if table.cls is not cls:
        raise ValueError("the PolicyTable was built for a different model class")
    return table


def cppo_lr(cls: FiniteModelClass, counts, beta: float, *, table: PolicyTable | None = None,
            include_extra: bool = True) -> OfflineResult:
    """Pessimistic offline planning over the MLE version space (Algorithm 2, restricted ``Pi``).

    ``Pi`` = optimal policies of the models in ``P_hat`` (+ the table's extra policies, such as the
    behaviour policy, when ``include_extra``). Returns the max-min policy and its pessimistic value
    ``min_{P in P_hat} V^pi_P(s0)``. Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    table = _table(cls, table)
    vs = cls.version_space(counts, beta)
    rows = np.unique(table.of_model[vs])
    if include_extra:
        rows = np.concatenate([rows, np.arange(table.n_optimal, len(table.policies))])
    worst = table.values[np.ix_(rows, np.flatnonzero(vs))].min(-1)   # min_{P in P_hat} V^pi_P
    best = int(np.argmax(worst))
    row = int(rows[best])
    return OfflineResult(table.policies[row], row, float(worst[best]), int(vs.sum()), len(rows))


def plug_in(cls: FiniteModelClass, counts, *, table: PolicyTable | None = None, rng=None) -> OfflineResult:
    """Plan in the maximum-likelihood model (no pessimism): the baseline of notebook 03.

    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    table = _table(cls, table)
    m = int(cls.mle(counts, rng))
    row = int(table.of_model[m])
    return OfflineResult(table.policies[row], row, float(table.values[row, m]), 1, 1)


def pessimistic_value(cls: FiniteModelClass, counts, beta: float, policy) -> float:
    """``min_{P in P_hat} V^pi_P(s0)`` for one policy (the lower confidence bound of Theorem 2's proof).

    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    vs = cls.version_space(counts, beta)
    return float(evaluate(cls.P[vs], cls.r, policy, cls.H)[:, 0, cls.s0].min())


def coverage(P: np.ndarray, target, behaviour, H: int, s0: int) -> float:
    """Single-policy concentrability ``C = max_{h,s,a} d^target_h(s,a) / d^behaviour_h(s,a)``
    (``inf`` when the behaviour policy never visits a pair the target visits).

    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    d_t = occupancy(P, target, H, s0)
    d_b = occupancy(P, behaviour, H, s0)
    visited = d_t > 1e-15
    if np.any(visited & (d_b <= 1e-15)):
        return float("inf")
    return float((d_t[visited] / d_b[visited]).max())


def offline_sweep(cls: FiniteModelClass, true_index: int, behaviour, K_grid, n_seeds: int,
                  beta: float, *, seed: int = 0, table: PolicyTable | None = None,
                  show_progress: bool = True):
    """CPPO-LR and plug-in planning on ``n_seeds`` data sets of each size ``K`` in ``K_grid``.

    Returns a ``pandas.DataFrame`` with one row per (K, seed): ``covered`` (P* in P_hat),
    ``shortfall`` = V^{pi*} - min_{P in P_hat} V^{pi*}_P (what Theorem 2 bounds; it upper-bounds the
    gap whenever P* is in P_hat), ``gap`` = V^{pi*} - V^{pi_hat} of CPPO-LR, ``pess_value`` and
    ``true_value`` of its policy, ``gap_plugin`` of plug-in MLE planning, and ``vs_size``.
    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    import pandas as pd

    from ..progress import progress

    table = PolicyTable(cls, extra=[behaviour]) if table is None else _table(cls, table)
    rng = np.random.default_rng(seed)
    V_all, _ = cls.optimal()
    v_star = float(V_all[true_index, 0, cls.s0])
    star_row = table.of_model[true_index]
    P_true = cls.P[true_index]
    rows = []
    jobs = [(K, s) for K in K_grid for s in range(n_seeds)]
    for K, s in (progress(jobs, desc="offline data sets") if show_progress else jobs):
        counts = collect(P_true, behaviour, cls.H, cls.s0, int(K), rng)
        vs = cls.version_space(counts, beta)
        res = cppo_lr(cls, counts, beta, table=table)
        plug = plug_in(cls, counts, table=table, rng=rng)
        rows.append({
            "K": int(K), "seed": s, "covered": bool(vs[true_index]), "vs_size": int(vs.sum()),
            "shortfall": v_star - float(table.values[star_row, vs].min()),
            "gap": v_star - float(table.values[res.row, true_index]),
            "pess_value": res.estimate, "true_value": float(table.values[res.row, true_index]),
            "gap_plugin": v_star - float(table.values[plug.row, true_index]),
        })
    return pd.DataFrame(rows)
