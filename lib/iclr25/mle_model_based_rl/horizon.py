"""Horizon-free or not: O-MBRL against a Hoeffding-bonus UCBVI learner on a stochastic river lock.

The horizon question needs instances whose number of *consequential* decisions grows with ``H``
while everything the learner must learn stays the same size. :func:`river_lock` is such a family:

* ``N`` chain states (start ``s0``, the middle state in the chapter) and 2 actions; at every chain state one action (the *lock*, unknown)
  swims upstream, the other drifts one state back towards 0 deterministically;
* swimming moves up with probability ``p``, is swept back one state with probability ``back``
  and stays put otherwise; at the top state ``N - 1`` swimming holds the position (probability
  ``1 - back``) and pays ``1 / H`` per step;
* the drift action at state 0 pays ``rho / H`` per step (the safe option).

Every per-step reward is at most ``1 / H``, so every trajectory's total lies in [0, 1] (the paper's
normalisation). The transition model (``N``, the lock, ``p``, ``back``) does not depend on ``H``,
so the finite model class and the tabular state space are the same at every horizon; what grows
with ``H`` is the number of steps at which a wrong action costs progress (the stochastic current
keeps pushing the swimmer back, at every step of the episode).

The baseline is UCBVI (Azar, Osband & Munos, 2017) with Hoeffding bonuses (UCBVI-CH) on the tabular
model, adapted to the normalised reward: per step, ``Q_h = min(U_h, r + P_hat V_{h+1} + b)`` with
``b(s, a) = c sqrt(L / max(n(s, a), 1))``, ``L = log(5 S A H K / delta)``, ``U_h = (H - h) max r``
the largest return left, and ``Q_h = U_h`` for unvisited pairs. The Hoeffding bonus scales with the
*range* of the value (1 here) and ignores that the per-step variances of a normalised return add up
to at most 1; UCBVI-CH's guarantee is ``~sqrt(H S A K)`` in normalised units, the paper's is free of
poly(H). Beside it, UCBVI-BF with an empirical-Bernstein bonus (variance-aware, so it can itself be
nearly horizon-free). Each bonus constant ``c`` and O-MBRL's ``beta`` multiplier are tuned on the
grids the registry fixes, by mean regret summed over the horizons, and a grid is extended until the
choice is interior (:func:`tune_river`).

Two contrasts where the regret should grow with ``H`` (:func:`river_instance`): a river with
``2 + H / 8`` states whose ``H / 8`` interior locks are unknown (``log |Pcal|`` linear in ``H``), and
the fixed river with reward 1 per step instead of ``1 / H`` (no normalisation).

Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

from ..progress import progress
from .mdp import TabularMDP, rollout
from .models import FiniteModelClass, _random_argmax

__all__ = ["river_lock", "river_lock_class", "RIVER", "UCBVIResult", "run_ucbvi", "ucbvi_plan", "policy_values",
           "horizon_sweep", "river_rho", "RIVER_INSTANCES", "tune_shared", "tune_river", "river_instance",
           "growing_lock", "BONUSES", "VARIANTS"]

# The chapter's river (N = 3, lock (1, 0, 1), start in the middle state 1, so that the value of
# swimming changes little with H: 0.52 at H = 8, 0.63 at H = 64). The safe reward rho is set per horizon from the exact
# value of swimming (see :func:`river_rho`) so that the margin between swimming and staying safe is
# the same at every H: ``gap > 0`` makes swimming optimal by about ``gap``, ``gap < 0`` the safe option.
RIVER = dict(N=3, lock=(1, 0, 1), p=0.5, back=0.2, rho=0.3, s0=1)
RIVER_INSTANCES = {"swim-optimal": 0.05, "safe-optimal": -0.05}


def _river_arrays(p, back, rho, lock, N, H, normalised=True):
    if N < 2:
        raise ValueError(f"the river needs N >= 2 states, got {N}")
    for name, v in (("p", p), ("back", back), ("rho", rho)):
        if not 0 <= v <= 1:
            raise ValueError(f"{name} must lie in [0, 1], got {v}")
    if p + back > 1 + 1e-12:
        raise ValueError(f"p + back must be <= 1 (they are probabilities of one swim), got {p + back}")
    if int(H) != H or H < 1:
        raise ValueError(f"horizon H must be a positive integer, got {H}")
    lock = tuple(int(a) for a in lock)
    if len(lock) != N or any(a not in (0, 1) for a in lock):
        raise ValueError(f"lock must be {N} actions in {{0, 1}}, got {lock}")
    P = np.zeros((N, 2, N))
    r = np.zeros((N, 2))
    for s in range(N):
        swim, drift = lock[s], 1 - lock[s]
        P[s, drift, max(s - 1, 0)] = 1.0
        up, down = min(s + 1, N - 1), max(s - 1, 0)
        P[s, swim, up] += p if s < N - 1 else 0.0
        P[s, swim, down] += back
        P[s, swim, s] += 1.0 - back - (p if s < N - 1 else 0.0)
    scale = 1.0 / H if normalised else 1.0
    r[N - 1, lock[N - 1]] = scale
    r[0, 1 - lock[0]] = rho * scale
    return P, r


def river_lock(p: float = RIVER["p"], *, back: float = RIVER["back"], rho: float = RIVER["rho"],
               lock=RIVER["lock"], N: int = RIVER["N"], H: int = 32, s0: int = RIVER["s0"]) -> TabularMDP:
    """The stochastic river lock (see the module docstring) as a normalised :class:`TabularMDP`.

    Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
    """
    P, r = _river_arrays(p, back, rho, lock, N, H)
    return TabularMDP(P, r, int(H), int(s0))


def river_rho(H: int, gap: float, *, p: float = RIVER["p"], back: float = RIVER["back"],
              lock=RIVER["lock"], N: int = RIVER["N"], s0: int = RIVER["s0"]) -> float:
    """The safe reward ``rho`` that puts the safe option ``gap`` below the value of swimming at ``H``.

    ``V_swim`` is the optimal value with ``rho = 0`` (exact value iteration) and the safe policy
    (drift to 0 and stay) is worth ``rho * V_drift`` with ``V_drift`` its value at ``rho = 1``; the
    result solves ``rho * V_drift = V_swim - gap`` and must lie in [0, 1]. Introduced in notebook
    ``04-mle-model-based-rl/02-online-optimism``.
    """
    v_swim = river_lock(p, back=back, rho=0.0, lock=lock, N=N, H=H, s0=s0).optimal()[0][0, s0]
    one = river_lock(p, back=back, rho=1.0, lock=lock, N=N, H=H, s0=s0)
    drift = np.broadcast_to(1 - np.asarray(lock, dtype=np.int64), (int(H), N))
    rho = float((v_swim - gap) / one.value(drift))
    if not 0 <= rho <= 1:
        raise ValueError(f"gap {gap} gives rho = {rho:.3f} at H = {H}; rho must lie in [0, 1] "
                         f"(the value of swimming is {v_swim:.3f})")
    return rho


def river_lock_class(p_grid, back_grid, *, rho: float = RIVER["rho"], N: int = RIVER["N"],
                     H: int = 32, s0: int = RIVER["s0"], locks=None,
                     normalised: bool = True) -> FiniteModelClass:
    """Every lock x ``p`` x ``back`` on the grids (pairs with ``p + back > 1`` are left out).

    ``|Pcal| = 2^N x (valid grid pairs)`` (or ``len(locks) x ...``), the same at every ``H``; the
    reward (``rho``, ``H``) is known: ``1 / H`` per step at the top and ``rho / H`` at the bottom, or
    ``1`` and ``rho`` with ``normalised=False`` (returns in ``[0, H]``, the per-step-reward contrast).
    Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
    """
    p_grid = np.unique(np.round(np.asarray(p_grid, float), 9))
    back_grid = np.unique(np.round(np.asarray(back_grid, float), 9))
    if p_grid.size == 0 or back_grid.size == 0:
        raise ValueError("p_grid and back_grid must be non-empty")
    locks = list(product((0, 1), repeat=N)) if locks is None else [tuple(l) for l in locks]
    Ps, params, r = [], [], None
    for lock in locks:
        for b in back_grid:
            for p in p_grid:
                if p + b > 1 + 1e-12:
                    continue
                P, r = _river_arrays(float(p), float(b), rho, lock, N, H, normalised)
                Ps.append(P)
                params.append({"lock": tuple(lock), "p": float(p), "back": float(b)})
    if not Ps:
        raise ValueError("no grid pair has p + back <= 1")
    return FiniteModelClass(np.stack(Ps), r, int(H), int(s0), params)


def policy_values(P: np.ndarray, r: np.ndarray, pi: np.ndarray, H: int, s0: int) -> np.ndarray:
    """``V^{pi_i}_0(s0)`` of ``R`` deterministic policies ``pi[R, H, S]`` in one model ``P[S, A, S]``.

    Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
    """
    pi = np.asarray(pi)
    R, S = pi.shape[0], P.shape[0]
    rows = np.arange(S)
    V = np.zeros((R, S))
    for h in range(H - 1, -1, -1):
        a = pi[:, h]                                         # [R, S]
        V = r[rows, a] + np.einsum("rst,rt->rs", P[rows, a], V)
    return V[:, s0]


BONUSES = ("hoeffding", "bernstein")


def ucbvi_plan(counts: np.ndarray, r: np.ndarray, H: int, bonus_scale, L: float, rng=None, *,
               bonus: str = "hoeffding") -> np.ndarray:
    """One UCBVI planning step: the greedy policies ``pi[R, H, S]`` of ``R`` runs from their
    transition counts ``counts[R, S, A, S]``.

    ``Q_h(s, a) = min(U_h, r(s, a) + P_hat V_{h+1}(s, a) + b_h(s, a))`` with ``U_h = (H - h) max r``,
    and ``Q_h(s, a) = U_h`` where ``n(s, a) = 0``. The bonus is

    * ``"hoeffding"`` (UCBVI-CH): ``b = c sqrt(L / n)``;
    * ``"bernstein"`` (UCBVI-BF, the empirical-Bernstein bonus of Azar et al. 2017 without its
      lower-order correction term): ``b_h = c (sqrt(2 L Var_{P_hat}(V_{h+1}) / n) + 7 U_{h+1} L / (3 n))``,
      which shrinks where the next-state value varies little;

    with ``n = max(n(s, a), 1)`` and ``c`` = ``bonus_scale`` (a number or one per run). Ties are broken
    uniformly at random with ``rng`` (else towards the lowest action). Introduced in notebook
    ``04-mle-model-based-rl/02-online-optimism``.
    """
    if bonus not in BONUSES:
        raise ValueError(f"unknown bonus {bonus!r}; valid: {', '.join(BONUSES)}")
    counts = np.asarray(counts, float)
    if counts.ndim != 4 or counts.shape[1:] != r.shape + (r.shape[0],):
        raise ValueError(f"counts must be [R, S, A, S] with [S, A] = {r.shape}, got {counts.shape}")
    R, S, A, _ = counts.shape
    c = np.broadcast_to(np.asarray(bonus_scale, float), (R,))[:, None, None]
    n_sa = counts.sum(-1)
    seen = n_sa > 0
    n = np.maximum(n_sa, 1)
    P_hat = counts / n[..., None]
    hoeffding = c * np.sqrt(L / n)
    rmax = r.max()
    pi = np.zeros((R, H, S), dtype=np.int64)
    V = np.zeros((R, S))
    for h in range(H - 1, -1, -1):
        cap = (H - h) * rmax
        EV = np.einsum("rsat,rt->rsa", P_hat, V)
        if bonus == "hoeffding":
            b = hoeffding
        else:
            var = np.maximum(np.einsum("rsat,rt->rsa", P_hat, V * V) - EV * EV, 0.0)
            b = c * (np.sqrt(2 * L * var / n) + 7 * (H - h - 1) * rmax * L / (3 * n))
        Q = r[None] + EV + b
        Q = np.where(seen, np.minimum(Q, cap), cap)
        a = Q.argmax(-1) if rng is None else _random_argmax(Q, rng)
        pi[:, h] = a
        V = np.take_along_axis(Q, a[..., None], -1)[..., 0]
    return pi


@dataclass
class UCBVIResult:
    """Per-episode exact regret of :func:`run_ucbvi`: ``regret[n_runs, K]`` (one row per run).

    Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
    """

    regret: np.ndarray
    bonus_scale: np.ndarray   # c of each run
    v_star: float

    @property
    def cum_regret(self) -> np.ndarray:
        return self.regret.cumsum(-1)


def run_ucbvi(mdp: TabularMDP, K: int, *, bonus_scale=1.0, n_seeds: int = 10, delta: float = 0.1,
              seed: int = 0, show_progress: bool = True, bonus: str = "hoeffding") -> UCBVIResult:
    """UCBVI with Hoeffding bonuses (UCBVI-CH; ``bonus="bernstein"``: UCBVI-BF, see
    :func:`ucbvi_plan`) for ``K`` episodes in ``mdp``, vectorised over runs.

    ``bonus_scale`` is the constant ``c`` of the bonus ``c sqrt(L / n)``: a number, or a sequence
    (one block of ``n_seeds`` runs per value, so a tuning grid runs in one loop). Transitions are
    pooled over steps (time-homogeneous, as in Azar et al. 2017 and the paper); the reward is known.
    Regret is exact (value of each episode's greedy policy in the true model).

    Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
    """
    scales = np.atleast_1d(np.asarray(bonus_scale, float))
    if scales.ndim != 1 or np.any(scales < 0) or not np.all(np.isfinite(scales)):
        raise ValueError(f"bonus_scale must be >= 0 (a number or a 1-D sequence), got {bonus_scale}")
    if K < 1 or n_seeds < 1:
        raise ValueError(f"K and n_seeds must be >= 1, got K={K}, n_seeds={n_seeds}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    if bonus not in BONUSES:
        raise ValueError(f"unknown bonus {bonus!r}; valid: {', '.join(BONUSES)}")
    P_true, r, H, s0 = mdp.P, mdp.r, mdp.H, mdp.s0
    S, A, _ = P_true.shape
    R = scales.size * n_seeds
    c = np.repeat(scales, n_seeds)[:, None, None]
    L = np.log(5 * S * A * H * K / delta)
    V_opt, _ = mdp.optimal()
    v_star = float(V_opt[0, s0])
    rng = np.random.default_rng(seed)
    n_sat = np.zeros((R, S, A, S))
    regret = np.zeros((R, K))
    episodes = progress(range(K), desc="UCBVI episodes") if show_progress else range(K)
    for k in episodes:
        pi = ucbvi_plan(n_sat, r, H, c[:, 0, 0], L, rng, bonus=bonus)
        regret[:, k] = v_star - policy_values(P_true, r, pi, H, s0)
        states, actions = rollout(P_true, np.eye(A)[pi], H, s0, R, rng)
        flat = (states[:, :-1] * A + actions) * S + states[:, 1:]
        np.add.at(n_sat.reshape(R, -1), (np.repeat(np.arange(R), H), flat.ravel()), 1.0)
    return UCBVIResult(regret, c[:, 0, 0].copy(), v_star)


VARIANTS = ("fixed", "growing", "per-step")
LEARNERS = {"UCBVI-CH": "hoeffding", "UCBVI-BF": "bernstein"}


def growing_lock(H: int) -> tuple:
    """The true lock of the growing river at ``H``: ``N = 2 + H / 8`` states, alternating
    ``(1, 0, 1, 0, ...)`` like :data:`RIVER`'s. Introduced in notebook
    ``04-mle-model-based-rl/02-online-optimism``."""
    if H % 8:
        raise ValueError(f"the growing river needs H divisible by 8, got {H}")
    return tuple((i + 1) % 2 for i in range(2 + H // 8))


def river_instance(H: int, gap: float, *, p_grid, back_grid, variant: str = "fixed"):
    """``(cls, true_index)`` of the chapter's river at horizon ``H``.

    ``variant``: ``"fixed"`` (:data:`RIVER`, the same class of ``2^3 x`` grid models at every
    ``H``); ``"per-step"`` (the same, with reward 1 per step instead of ``1 / H``: returns in
    ``[0, H]``); ``"growing"`` (``N = 2 + H / 8`` states, start in the middle ``N // 2``; the locks of
    the bottom and top states are known and the ``H / 8`` interior locks are unknown, so the class
    has ``2^(H/8) x`` grid models and ``log |Pcal|`` grows linearly in ``H``). ``rho`` is
    :func:`river_rho` of that river at ``H``. Introduced in notebook
    ``04-mle-model-based-rl/02-online-optimism``.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown river variant {variant!r}; valid: {', '.join(VARIANTS)}")
    if variant == "growing":
        lock = growing_lock(H)
        N, s0 = len(lock), len(lock) // 2
        locks = [(lock[0],) + inner + (lock[-1],) for inner in product((0, 1), repeat=N - 2)]
    else:
        lock, N, s0, locks = tuple(RIVER["lock"]), RIVER["N"], RIVER["s0"], None
    rho = river_rho(H, gap, lock=lock, N=N, s0=s0)
    cls = river_lock_class(p_grid, back_grid, rho=rho, N=N, H=H, s0=s0, locks=locks,
                           normalised=variant != "per-step")
    try:
        true = cls.index(lock=lock, p=float(RIVER["p"]), back=float(RIVER["back"]))
    except KeyError as e:
        raise ValueError(f"the river instance (p={RIVER['p']}, back={RIVER['back']}) is not in the "
                         f"model class: p_grid and back_grid must contain it (realizability)") from e
    return cls, true


def horizon_sweep(horizons, K: int, *, p_grid, back_grid, gap: float = 0.05,
                  ucb_scales=(1.0,), beta_scales=(1.0,), bf_scales=(), n_seeds: int = 10,
                  delta: float = 0.1, seed: int = 0, variant: str = "fixed",
                  show_progress: bool = True):
    """Cumulative regret at ``K`` of O-MBRL, UCBVI-CH and UCBVI-BF on the river at each horizon.

    At each ``H`` the instance is :func:`river_instance` (``variant``). O-MBRL runs once per
    ``beta`` scale ``s`` (``beta = s log(|Pcal| / delta)``), UCBVI-CH once per bonus constant in
    ``ucb_scales`` and UCBVI-BF once per constant in ``bf_scales`` (an empty sequence skips a
    learner); all on the same instance, horizons, ``K`` and seeds. Returns a ``pandas.DataFrame``
    with one row per (learner, H, knob, seed): ``regret`` (cumulative, exact) and ``v_star``.
    Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
    """
    import pandas as pd

    from .online import run_online

    rows = []
    jobs = [int(H) for H in horizons]
    if not jobs:
        raise ValueError("horizons must name at least one H")
    for H in (progress(jobs, desc="horizons") if show_progress else jobs):
        cls, true = river_instance(H, gap, p_grid=p_grid, back_grid=back_grid, variant=variant)
        base = cls.beta(delta)
        for s in beta_scales:
            res = run_online(cls, true, K, beta=float(s) * base, n_seeds=n_seeds, seed=seed,
                             show_progress=False)
            for i, v in enumerate(res.cum_regret[:, -1]):
                rows.append({"learner": "O-MBRL", "H": H, "knob": float(s), "seed": i, "regret": v,
                             "v_star": res.v_star})
        for learner, scales in (("UCBVI-CH", ucb_scales), ("UCBVI-BF", bf_scales)):
            if len(scales) == 0:
                continue
            res = run_ucbvi(cls.mdp(true, normalised=variant != "per-step"), K, bonus_scale=scales,
                            n_seeds=n_seeds, delta=delta, seed=seed, show_progress=False,
                            bonus=LEARNERS[learner])
            for j, v in enumerate(res.cum_regret[:, -1]):
                rows.append({"learner": learner, "H": H, "knob": float(res.bonus_scale[j]),
                             "seed": j % n_seeds, "regret": v, "v_star": res.v_star})
    return pd.DataFrame(rows)


def tune_shared(sweep) -> dict:
    """The knob of each learner with the smallest mean regret summed over all horizons (one value
    shared by every H, so the tuning cannot rescale the bonus with H; the registered rule of
    notebook 02). Returns ``{learner: knob}``. Introduced in notebook
    ``04-mle-model-based-rl/02-online-optimism``.
    """
    score = sweep.groupby(["learner", "knob", "H"])["regret"].mean().groupby(["learner", "knob"]).sum()
    return {learner: float(score.loc[learner].idxmin()) for learner in score.index.levels[0]
            if learner in score.index.get_level_values(0)}


def tune_river(horizons, K: int, grids: dict, *, p_grid, back_grid, gap: float, n_seeds: int,
               delta: float = 0.1, seed: int = 0, factor: float = 3.0):
    """Tune each learner's knob on the registered grid, extended until the choice is interior.

    ``grids`` maps ``"O-MBRL"`` (beta multipliers), ``"UCBVI-CH"`` and ``"UCBVI-BF"`` (bonus
    constants) to their grids. Each value is scored by the mean regret summed over ``horizons``
    (:func:`tune_shared`) on ``n_seeds`` tuning seeds; a choice at an end of its grid extends the grid
    by ``factor`` in that direction (:func:`iclr25.mle_model_based_rl.tune_interior`). Returns
    ``(knobs, sweep)``: ``{learner: knob}`` and every tuning run. Introduced in notebook
    ``04-mle-model-based-rl/02-online-optimism``.
    """
    import pandas as pd

    from .measures import tune_interior

    kwarg = {"O-MBRL": "beta_scales", "UCBVI-CH": "ucb_scales", "UCBVI-BF": "bf_scales"}
    unknown = sorted(set(grids) - set(kwarg))
    if unknown:
        raise ValueError(f"unknown learner(s) {unknown}; valid: {', '.join(kwarg)}")
    runs, knobs = [], {}
    for learner, grid in grids.items():
        def score(values, learner=learner):
            kw = {k: () for k in kwarg.values()} | {kwarg[learner]: tuple(values)}
            df = horizon_sweep(horizons, K, p_grid=p_grid, back_grid=back_grid, gap=gap, n_seeds=n_seeds,
                               delta=delta, seed=seed, show_progress=False, **kw)
            runs.append(df)
            g = df.groupby(["knob", "H"])["regret"].mean().groupby("knob").sum()
            return [g.loc[float(v)] for v in values]
        knobs[learner], _ = tune_interior(score, grid, factor=factor)
    return knobs, pd.concat(runs, ignore_index=True)
