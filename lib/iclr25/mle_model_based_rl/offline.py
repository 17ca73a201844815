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
from .models import FiniteModelClass, _random_argmax, counts_from

__all__ = ["OfflineResult", "PolicyTable", "collect", "cppo_lr", "plug_in", "coverage",
           "pessimistic_value", "offline_sweep", "worst_case_gap_sweep", "all_deterministic_policies",
           "restriction_check", "vi_lcb", "lcb_width", "Family"]


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
        uniq, inv = _unique_rows(pi_all.reshape(cls.M, -1))
        pols = [np.eye(cls.A)[u.reshape(cls.H, cls.S)] for u in uniq]
        self.n_optimal = len(pols)
        pols += [as_probs(e, cls.A) for e in extra]
        self.policies = np.stack(pols)
        self.of_model = inv.ravel()
        det = _deterministic_values(cls.P, cls.r, uniq.reshape(-1, cls.H, cls.S), cls.H, cls.s0)
        self.values = np.concatenate([det] + [cls.values_in(p)[None] for p in pols[self.n_optimal:]])


def _unique_rows(x):
    """``np.unique(x, axis=0, return_inverse=True)`` (same order), fast for many long rows: the
    rows are first deduplicated as raw bytes, then the few distinct ones sorted lexicographically."""
    x = np.ascontiguousarray(x)
    raw = x.view(np.dtype((np.void, x.dtype.itemsize * x.shape[1])))[:, 0]
    _, first, inv = np.unique(raw, return_index=True, return_inverse=True)
    rows = x[first]
    order = np.lexsort(rows.T[::-1])                                    # lexicographic, first column first
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rows[order], rank[inv.ravel()]


def _deterministic_values(P, r, pols, H, s0):
    """``V^{pi_u}_{0;P_m}(s0)`` of deterministic policies ``pols[U, H, S]`` in every model
    ``P[M, S, A, S]``: ``[U, M]`` (all policies at once; :func:`evaluate` is the reference)."""
    M, S, A, _ = P.shape
    U = len(pols)
    Pf = P.reshape(M, S * A, S)
    rows, cols = np.arange(S)[:, None], np.arange(U)[None, :]
    V = np.zeros((M, S, U))                                              # V_{h+1} of every policy
    for h in range(H - 1, -1, -1):
        Q = np.matmul(Pf, V).reshape(M, S, A, U)                         # P V_{h+1} for every (s, a)
        a = pols[:, h].T                                                 # [S, U]
        V = Q[:, rows, a, cols] + r[rows, a][None]
    return V[:, s0, :].T


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
    return _cppo_from_vs(table, cls.version_space(counts, beta), include_extra)


def _cppo_from_vs(table: PolicyTable, vs: np.ndarray, include_extra: bool = True) -> OfflineResult:
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


def lcb_width(counts, H: int, rmax: float, delta: float = 0.1) -> np.ndarray:
    """The textbook Hoeffding width of VI-LCB, ``w_h(s, a) = U_{h+1} sqrt(L / (2 n(s, a)))`` with
    ``U_{h+1} = (H - h - 1) rmax`` the range of the value still to come and ``L = log(2 S A H /
    delta)`` (a union bound over steps and pairs): ``[H, S, A]`` (``inf`` where ``n(s, a) = 0``).

    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    counts = np.asarray(counts, float)
    if counts.ndim != 3 or counts.shape[2] != counts.shape[0]:
        raise ValueError(f"counts must be [S, A, S], got {counts.shape}")
    S, A, _ = counts.shape
    n = counts.sum(-1)
    L = np.log(2 * S * A * H / delta)
    U = (H - 1 - np.arange(H)) * float(rmax)                             # range of V_{h+1}
    base = np.sqrt(L / (2 * np.maximum(n, 1)))
    return np.where(n[None] > 0, U[:, None, None] * base[None], np.inf)


def vi_lcb(counts, r, H: int, scale=1.0, *, delta: float = 0.1, rng=None) -> np.ndarray:
    """VI-LCB: value iteration on the empirical model with a Hoeffding lower-confidence penalty (the
    model-free-style pessimistic baseline of notebook 03; Rashidinejad et al. 2021, Xie et al. 2021).

    ``Q_h = max(0, r + P_hat V_{h+1} - scale * w_h)`` with ``w_h`` from :func:`lcb_width` (pairs never
    seen get ``Q = 0``, the lowest return), ``V_h = max_a Q_h``; transitions pooled over steps as
    everywhere in this chapter. ``r`` is one reward ``[S, A]`` or a batch ``[B, S, A]`` (a family of
    instances); ``scale`` a number or ``[B]``. Returns the greedy deterministic policies
    ``[B, H, S]``, ties broken uniformly at random with ``rng`` (else towards the lowest action: a
    large penalty clips every value to 0, and a fixed tie-break would then decide the action, so the
    notebook always passes ``rng``, as for the chapter's other learners). Introduced in notebook
    ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    counts = np.asarray(counts, float)
    r = np.asarray(r, float)
    r = r[None] if r.ndim == 2 else r
    if r.ndim != 3 or r.shape[1:] != counts.shape[:2]:
        raise ValueError(f"r must be [S, A] or [B, S, A] matching counts {counts.shape}, got {r.shape}")
    B, S, A = r.shape
    c = np.broadcast_to(np.asarray(scale, float), (B,))
    if np.any(c < 0):
        raise ValueError(f"scale must be >= 0, got {scale}")
    n = counts.sum(-1)
    P_hat = counts / np.maximum(n, 1)[..., None]
    width = lcb_width(counts, H, r.max(), delta)                         # [H, S, A]
    width = np.where(np.isinf(width), 0.0, width)                        # unseen pairs: Q = 0 below
    pi = np.zeros((B, H, S), dtype=np.int64)
    V = np.zeros((B, S))
    for h in range(H - 1, -1, -1):
        Q = r + np.einsum("sat,bt->bsa", P_hat, V) - c[:, None, None] * width[h]
        Q = np.where(n[None] > 0, np.maximum(Q, 0.0), 0.0)
        pi[:, h] = Q.argmax(-1) if rng is None else _random_argmax(Q, rng)
        V = Q.max(-1)
    return pi


def _values_batch(P, r, pi, H, s0):
    """``V^{pi_b}_0(s0)`` in one model ``P[S, A, S]`` for rewards ``r[B, S, A]`` and policies ``pi[B, H, S]``."""
    B, S, _ = r.shape
    rows = np.arange(S)
    V = np.zeros((B, S))
    for h in range(H - 1, -1, -1):
        a = pi[:, h]
        V = np.take_along_axis(r, a[..., None], -1)[..., 0] + np.einsum("bst,bt->bs", P[rows, a], V)
    return V[:, s0]


class Family:
    """A family of instances that share transitions and differ only in the known reward, built once.

    ``make_class(g)`` builds the class of the instance with parameter ``g`` (every instance must have
    the same transition models and true model, so that one data set serves the whole family). Each
    instance's :class:`PolicyTable` (with the behaviour policy as an extra) and optimal value are
    computed here, so that :meth:`sweep` can be called many times (tuning, then evaluation).

    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """

    def __init__(self, make_class, true_params: dict, gaps, behaviour):
        gaps = [float(g) for g in gaps]
        if not gaps:
            raise ValueError("gaps must name at least one instance of the family")
        self.behaviour = behaviour
        self.members = []
        for g in gaps:
            cls = make_class(g)
            true = cls.index(**true_params)
            table = PolicyTable(cls, extra=[behaviour])
            self.members.append((g, cls, true, table, float(cls.optimal()[0][true, 0, cls.s0])))
        ref = self.members[0][1]
        for _, cls, true, _, _ in self.members[1:]:
            if cls.P.shape != ref.P.shape or not np.array_equal(cls.P, ref.P) or true != self.members[0][2]:
                raise ValueError("every instance of the family must share the same transition models "
                                 "and true model (only the reward may differ)")
        self.ref, self.true = ref, self.members[0][2]
        self.rewards = np.stack([m[1].r for m in self.members])           # [B, S, A]
        self.v_star = np.array([m[4] for m in self.members])

    def sweep(self, K_grid, n_seeds: int, delta: float, *, seed: int = 0, lcb_scales=(),
              pessimism: bool = True, show_progress: bool = False):
        """One row per (K, data set, instance ``g``): ``gap`` (CPPO-LR's realised gap ``V* -
        V^{pi_hat}``, when ``pessimism``), ``covered``, and ``gap_lcb@<c>`` for each VI-LCB penalty
        scale in ``lcb_scales`` (same data sets)."""
        import pandas as pd

        from ..progress import progress

        ref, true = self.ref, self.true
        beta = ref.beta(delta)
        scales = [float(c) for c in lcb_scales]
        rng = np.random.default_rng(seed)
        ties = np.random.default_rng([seed, 7])            # VI-LCB's tie-breaks: the data stay the same
        rows = []
        jobs = [(K, s) for K in K_grid for s in range(n_seeds)]
        for K, s in (progress(jobs, desc="offline data sets") if show_progress else jobs):
            counts = collect(ref.P[true], self.behaviour, ref.H, ref.s0, int(K), rng)
            vs = ref.version_space(counts, beta)
            block = {"K": np.full(len(self.members), int(K)), "seed": np.full(len(self.members), s),
                     "g": [m[0] for m in self.members], "covered": np.full(len(self.members), bool(vs[true]))}
            if pessimism:
                block["gap"] = [v_star - float(table.values[_cppo_from_vs(table, vs).row, true])
                                for _, _, _, table, v_star in self.members]
            for c in scales:
                pi = vi_lcb(counts, self.rewards, ref.H, c, delta=delta, rng=ties)
                block[f"gap_lcb@{c:g}"] = self.v_star - _values_batch(ref.P[true], self.rewards, pi,
                                                                       ref.H, ref.s0)
            rows.append(pd.DataFrame(block))
        return pd.concat(rows, ignore_index=True)


def worst_case_gap_sweep(make_class, true_params: dict, gaps, behaviour, K_grid, n_seeds: int,
                         delta: float, *, seed: int = 0, show_progress: bool = True):
    """The realised gap of CPPO-LR on a *family* of instances, each averaged over many data sets.

    ``make_class(g)`` builds the model class of the instance with gap parameter ``g`` (every
    instance must share the same transition models, so that one data set serves the whole family;
    only the known reward differs). For each ``K`` and data set the version space is computed once,
    then CPPO-LR (restricted policy set, :func:`cppo_lr`) is run in every instance. Returns a
    ``pandas.DataFrame`` with one row per (K, seed, g): ``gap`` = ``V* - V^{pi_hat}`` in the true model
    of that instance (the realised sub-optimality, not a bound) and ``covered`` (see :class:`Family`).

    Averaging ``gap`` over data sets and taking the largest mean over the family gives the
    instance-worst-case realised gap that Theorem 2 bounds (its rate holds for every instance, so
    its tightness shows on the worst one); the family is fixed in advance and does not depend on K.
    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    fam = Family(make_class, true_params, gaps, behaviour)
    df = fam.sweep(K_grid, n_seeds, delta, seed=seed, show_progress=show_progress)
    return df[["K", "seed", "g", "covered", "gap"]]


def all_deterministic_policies(H: int, S: int, A: int) -> np.ndarray:
    """Every deterministic Markov policy ``[A^(H S), H, S]`` (tiny MDPs only: at most 2^20).

    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    n = H * S
    if A ** n > 2 ** 20:
        raise ValueError(f"{A}^({H}*{S}) = {A ** n} policies is too many to enumerate (limit 2^20); "
                         "use a smaller H or S")
    idx = np.arange(A ** n)
    digits = (idx[:, None] // A ** np.arange(n)[None]) % A
    return digits.reshape(-1, H, S).astype(np.int64)


def restriction_check(cls: FiniteModelClass, true_index: int, behaviour, K_grid, n_seeds: int,
                      beta: float, *, seed: int = 0):
    """How much CPPO-LR's restricted policy set loses against *all* deterministic Markov policies.

    On a tiny class, every deterministic Markov policy is evaluated in every model (brute force);
    for each data set the max-min over all of them is compared with the max-min over the restricted
    set of :func:`cppo_lr`. Returns a ``pandas.DataFrame`` per (K, seed): ``maxmin_all``,
    ``maxmin_restricted`` (the pessimistic values), ``true_all`` and ``true_restricted`` (the true
    values of the two returned policies; ties in the all-policy max-min are broken towards the
    policy with the largest value in the MLE model) and ``vs_size``.
    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    import pandas as pd

    pols = all_deterministic_policies(cls.H, cls.S, cls.A)
    rows_idx = np.arange(cls.S)
    vals = np.zeros((len(pols), cls.M))
    for m in range(cls.M):
        V = np.zeros((len(pols), cls.S))
        for h in range(cls.H - 1, -1, -1):
            a = pols[:, h]
            V = cls.r[rows_idx, a] + np.einsum("ust,ut->us", cls.P[m][rows_idx, a], V)
        vals[:, m] = V[:, cls.s0]
    table = PolicyTable(cls, extra=[behaviour])
    rng = np.random.default_rng(seed)
    out = []
    for K in K_grid:
        for s in range(n_seeds):
            counts = collect(cls.P[true_index], behaviour, cls.H, cls.s0, int(K), rng)
            vs = cls.version_space(counts, beta)
            worst = vals[:, vs].min(1)
            best = worst.max()
            ties = np.flatnonzero(worst >= best - 1e-12)
            mle = int(cls.mle(counts))
            pick = ties[np.argmax(vals[ties, mle])]
            res = _cppo_from_vs(table, vs)
            out.append({"K": int(K), "seed": s, "vs_size": int(vs.sum()),
                        "maxmin_all": float(best), "maxmin_restricted": res.estimate,
                        "true_all": float(vals[pick, true_index]),
                        "true_restricted": float(table.values[res.row, true_index])})
    return pd.DataFrame(out)
