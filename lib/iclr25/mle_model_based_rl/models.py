"""A finite model class with vectorised log-likelihoods, the MLE version space, and the test-bed.

The paper's algorithms keep the *version space* of near-maximum-likelihood models
(Alg. 1 line 4, Alg. 2 line 2)::

    P_hat = { P in Pcal : sum_{(s,a,s') in D} log P(s'|s,a) >= max_{P~ in Pcal} sum log P~(s'|s,a) - beta }

with ``beta = log(|Pcal| / delta)`` for a finite class, so that the true ``P*`` lies in it with
probability at least ``1 - delta``. Log-likelihoods depend on the data only through the counts
``n(s, a, s')``, so the log-likelihood of all ``M`` models is one matrix product.

Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

import numpy as np

from .mdp import TabularMDP, check_transitions, evaluate, value_iteration

__all__ = ["FiniteModelClass", "counts_from", "gamble_chain", "gamble_chain_class", "default_beta"]


def default_beta(n_models: int, delta: float) -> float:
    """The union-bound radius ``beta = log(|Pcal| / delta)`` of the paper's finite-class analysis.

    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
    if n_models < 1:
        raise ValueError("the model class is empty")
    return float(np.log(n_models / delta))


def counts_from(states: np.ndarray, actions: np.ndarray, S: int, A: int, *,
                per_episode: bool = False) -> np.ndarray:
    """Transition counts ``n(s, a, s')`` from trajectories ``states[n, H+1]``, ``actions[n, H]``.

    Returns ``[S, A, S]`` (summed over episodes) or ``[n, S, A, S]`` with ``per_episode=True``.

    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
    """
    states, actions = np.asarray(states), np.asarray(actions)
    if states.ndim != 2 or actions.shape != (states.shape[0], states.shape[1] - 1):
        raise ValueError(f"need states[n, H+1] and actions[n, H], got {states.shape} and {actions.shape}")
    n, H = actions.shape
    flat = (states[:, :-1] * A + actions) * S + states[:, 1:]
    if per_episode:
        out = np.zeros((n, S * A * S))
        np.add.at(out, (np.repeat(np.arange(n), H), flat.ravel()), 1.0)
        return out.reshape(n, S, A, S)
    return np.bincount(flat.ravel(), minlength=S * A * S).astype(float).reshape(S, A, S)


@dataclass
class FiniteModelClass:
    """A finite class ``Pcal = {P_1, ..., P_M}`` of transition models sharing a known reward.

    Parameters
    ----------
    P : ``[M, S, A, S]`` the models.
    r : ``[S, A]`` the known reward; ``H`` the horizon; ``s0`` the start state.
    params : one dict per model describing it (e.g. ``{"lock": (0, 1), "slip": 0.1, "q": 0.5}``).

    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
    """

    P: np.ndarray
    r: np.ndarray
    H: int
    s0: int = 0
    params: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.P = check_transitions(self.P)
        if self.P.ndim != 4:
            raise ValueError(f"FiniteModelClass.P must be [M, S, A, S], got {self.P.shape}")
        M, S, A, _ = self.P.shape
        self.r = np.asarray(self.r, dtype=float)
        if self.r.shape != (S, A):
            raise ValueError(f"reward r must be [S, A] = [{S}, {A}], got {self.r.shape}")
        if self.params and len(self.params) != M:
            raise ValueError(f"params has {len(self.params)} entries for {M} models")
        flat = self.P.reshape(M, -1)
        # log P(s'|s,a) where positive; transitions a model forbids are tracked separately, so that
        # a model that gives an observed transition probability 0 gets log-likelihood -inf exactly.
        self._logP = np.where(flat > 0, np.log(np.where(flat > 0, flat, 1.0)), 0.0).T  # [SAS, M]
        self._zero = (flat == 0).astype(float).T                                         # [SAS, M]
        self._opt = None

    @property
    def M(self) -> int:
        return self.P.shape[0]

    @property
    def S(self) -> int:
        return self.P.shape[1]

    @property
    def A(self) -> int:
        return self.P.shape[2]

    def mdp(self, m: int, *, normalised: bool = True) -> TabularMDP:
        """Model ``m`` as a :class:`TabularMDP`."""
        return TabularMDP(self.P[m], self.r, self.H, self.s0, normalised=normalised)

    def index(self, **params) -> int:
        """The index of the model whose ``params`` match (floats compared to 1e-9)."""
        for m, p in enumerate(self.params):
            if all(np.allclose(p.get(k), v, atol=1e-9) if isinstance(v, float) else p.get(k) == v
                   for k, v in params.items()):
                return m
        keys = sorted(self.params[0]) if self.params else []
        raise KeyError(f"no model with {params}; parameters are {keys}")

    def _flat_counts(self, counts):
        counts = np.asarray(counts, dtype=float)
        if counts.shape[-3:] != (self.S, self.A, self.S):
            raise ValueError(f"counts must be [..., S, A, S] = [..., {self.S}, {self.A}, {self.S}], "
                             f"got {counts.shape}")
        return counts.reshape(counts.shape[:-3] + (-1,))

    def loglik(self, counts) -> np.ndarray:
        """``sum_{(s,a,s')} n(s,a,s') log P_m(s'|s,a)`` for every model: ``[..., M]`` (``-inf`` when
        a model forbids an observed transition). Vectorised over leading axes of ``counts``."""
        c = self._flat_counts(counts)
        ll = c @ self._logP
        return np.where(c @ self._zero > 0, -np.inf, ll)

    def version_space(self, counts, beta: float) -> np.ndarray:
        """Boolean mask ``[..., M]`` of ``P_hat = {P : L(P) >= max L - beta}``."""
        if beta < 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        ll = self.loglik(counts)
        return ll >= ll.max(-1, keepdims=True) - beta

    def mle(self, counts, rng=None) -> np.ndarray | int:
        """Index of a maximum-likelihood model (ties broken uniformly at random with ``rng``,
        else towards the lowest index)."""
        ll = self.loglik(counts)
        if rng is None:
            return ll.argmax(-1)
        return _random_argmax(ll, np.random.default_rng(rng))

    def beta(self, delta: float) -> float:
        """``log(M / delta)``, see :func:`default_beta`."""
        return default_beta(self.M, delta)

    def optimal(self):
        """Optimal values and policies of every model, ``V[M, H+1, S]``, ``pi[M, H, S]`` (cached)."""
        if self._opt is None:
            self._opt = value_iteration(self.P, self.r, self.H)
        return self._opt

    def values_in(self, pi) -> np.ndarray:
        """``V^pi_0(s0)`` of one policy in every model: ``[M]``."""
        return evaluate(self.P, self.r, pi, self.H)[:, 0, self.s0]


def _random_argmax(x: np.ndarray, rng: np.random.Generator, tol: float = 1e-12):
    """argmax over the last axis with uniform random tie-breaking."""
    top = x.max(-1, keepdims=True)
    ties = x >= top - tol
    ties &= np.isfinite(x) | np.isinf(top)
    noise = rng.random(x.shape)
    return np.where(ties, noise, -1.0).argmax(-1)


# --------------------------------------------------------------------------------------------
# The test-bed: a chain with a slip, a combination lock, and a gamble against a safe exit.
# --------------------------------------------------------------------------------------------

def _layout(L: int):
    return dict(gamble=L, goal=L + 1, trap=L + 2, exit=L + 3, S=L + 4)


def gamble_chain(q: float, *, slip: float = 0.0, rho: float = 0.5, lock=None, L: int = 2,
                 H: int = 16, normalised: bool = True) -> TabularMDP:
    return TabularMDP(*_gamble_chain_arrays(q, slip, rho, lock, L, H, normalised), H, 0,
                      normalised=normalised)


def _gamble_chain_arrays(q, slip, rho, lock, L, H, normalised):
    """The chapter's test-bed MDP (S = L + 4 states, A = 2 actions).

    * chain states ``0..L-1`` (start 0): the *correct* action ``lock[s]`` moves on with
      probability ``1 - slip`` and stays put otherwise (the slip); the other action resets to 0;
    * the gamble state ``L``: action 0 gambles, reaching the goal with probability ``q`` and a trap
      otherwise; action 1 takes the safe exit;
    * goal, trap and exit are absorbing and pay ``1``, ``0`` and ``rho`` per step, divided by ``H``
      when ``normalised`` (so every trajectory's total lies in [0, 1], the paper's assumption).

    With ``q`` and ``slip`` in {0, 1} the transitions are deterministic. Introduced in notebook
    ``04-mle-model-based-rl/01-mle-version-space``.
    """
    if L < 1:
        raise ValueError(f"chain length L must be >= 1, got {L}")
    for name, v in (("q", q), ("slip", slip), ("rho", rho)):
        if not 0 <= v <= 1:
            raise ValueError(f"{name} must lie in [0, 1], got {v}")
    if slip >= 1:
        raise ValueError("slip = 1 makes the gamble unreachable; use slip < 1")
    lock = (0,) * L if lock is None else tuple(int(a) for a in lock)
    if len(lock) != L or any(a not in (0, 1) for a in lock):
        raise ValueError(f"lock must be {L} actions in {{0, 1}}, got {lock}")
    ix = _layout(L)
    S, A = ix["S"], 2
    P = np.zeros((S, A, S))
    for s in range(L):
        good = lock[s]
        P[s, good, s + 1] += 1 - slip
        P[s, good, s] += slip
        P[s, 1 - good, 0] = 1.0
    g = ix["gamble"]
    P[g, 0, ix["goal"]] = q
    P[g, 0, ix["trap"]] = 1 - q
    P[g, 1, ix["exit"]] = 1.0
    for s in (ix["goal"], ix["trap"], ix["exit"]):
        P[s, :, s] = 1.0
    r = np.zeros((S, A))
    scale = 1.0 / H if normalised else 1.0
    r[ix["goal"]] = scale
    r[ix["exit"]] = rho * scale
    return P, r


gamble_chain.__doc__ = _gamble_chain_arrays.__doc__


def gamble_chain_class(q_grid, *, slip_grid=(0.0,), rho: float = 0.5, L: int = 2, H: int = 16,
                       normalised: bool = True, locks=None) -> FiniteModelClass:
    """The finite model class over the test-bed: every lock x slip x q on the given grids.

    ``|Pcal| = 2^L * len(slip_grid) * len(q_grid)``; the reward (``rho``, ``H``) is known and shared.
    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
    """
    q_grid = np.unique(np.asarray(q_grid, dtype=float))
    slip_grid = np.unique(np.asarray(slip_grid, dtype=float))
    if q_grid.size == 0 or slip_grid.size == 0:
        raise ValueError("q_grid and slip_grid must be non-empty")
    locks = list(product((0, 1), repeat=L)) if locks is None else [tuple(l) for l in locks]
    Ps, params = [], []
    r = None
    for lock in locks:
        for slip in slip_grid:
            for q in q_grid:
                P, r = _gamble_chain_arrays(float(q), float(slip), rho, lock, L, H, normalised)
                Ps.append(P)
                params.append({"lock": tuple(lock), "slip": float(slip), "q": float(q)})
    return FiniteModelClass(np.stack(Ps), r, H, 0, params)
