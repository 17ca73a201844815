"""Online model-based RL: O-MBRL (the paper's Algorithm 1) and the baselines, run over many seeds.

O-MBRL, episode k:
  1. ``P_hat_k = {P : L_k(P) >= max L_k - beta}`` (the MLE version space of the data so far);
  2. ``(pi_k, P_k) = argmax_{pi, P in P_hat_k} V^pi_{0;P}(s0)`` (optimism; our planning oracle is exact:
     value iteration in every model of the finite class, done once, then a max over the version space);
  3. roll out ``pi_k`` in the true MDP and add its transitions to the data.

Baselines: ``greedy`` plans in the maximum-likelihood model (no optimism); ``eps_greedy`` does the
same but takes a uniformly random action with probability ``eps`` at every step.

Regret is exact: ``V^{pi*}(s0) - V^{pi_k}(s0)`` computed by dynamic programming in the true model,
not from sampled returns. Every seed runs in the same vectorised loop.

Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..progress import progress
from .mdp import evaluate, return_moments, rollout
from .models import FiniteModelClass, _random_argmax

__all__ = ["ALGORITHMS", "OnlineResult", "run_online"]

ALGORITHMS = ("optimistic", "greedy", "eps_greedy")


@dataclass
class OnlineResult:
    """Per-episode results of :func:`run_online` (arrays are ``[n_seeds, K]``).

    Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
    """

    algorithm: str
    regret: np.ndarray        # V* - V^{pi_k}, exact
    variance: np.ndarray      # VaR^{pi_k}: variance of the return of pi_k in the true model
    covered: np.ndarray       # P* in the version space at episode k
    vs_size: np.ndarray       # |P_hat_k|
    v_star: float             # V^{pi*}(s0) in the true model
    beta: float

    @property
    def cum_regret(self) -> np.ndarray:
        return self.regret.cumsum(-1)


def run_online(cls: FiniteModelClass, true_index: int, K: int, *, algorithm: str = "optimistic",
               beta: float | None = None, delta: float = 0.1, eps: float = 0.1, n_seeds: int = 10,
               seed: int = 0, show_progress: bool = True) -> OnlineResult:
    """Run ``algorithm`` for ``K`` episodes in the true model ``cls.P[true_index]``, ``n_seeds`` times.

    Parameters
    ----------
    cls : the finite model class (realizable: it contains the true model).
    true_index : which model of ``cls`` is the environment.
    algorithm : ``"optimistic"`` (O-MBRL), ``"greedy"`` (MLE plug-in) or ``"eps_greedy"``.
    beta : version-space radius; default ``log(|Pcal| / delta)``.
    eps : exploration rate of ``eps_greedy``.

    Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; valid: {', '.join(ALGORITHMS)}")
    if not 0 <= true_index < cls.M:
        raise ValueError(f"true_index must lie in 0..{cls.M - 1}, got {true_index}")
    if K < 1 or n_seeds < 1:
        raise ValueError(f"K and n_seeds must be >= 1, got K={K}, n_seeds={n_seeds}")
    if not 0 <= eps <= 1:
        raise ValueError(f"eps must lie in [0, 1], got {eps}")
    beta = cls.beta(delta) if beta is None else float(beta)
    rng = np.random.default_rng(seed)
    M, S, A, H, s0 = cls.M, cls.S, cls.A, cls.H, cls.s0
    V_all, pi_all = cls.optimal()
    v_opt = V_all[:, 0, s0]                                   # V*_P(s0) for every P in the class
    probs = np.eye(A)[pi_all]                                 # [M, H, S, A]
    if algorithm == "eps_greedy":
        probs = (1 - eps) * probs + eps / A
    P_true = cls.P[true_index]
    stack = np.broadcast_to(P_true, (M,) + P_true.shape)
    # the true value and return variance of the policy each model would make us play
    v_true = evaluate(stack, cls.r, probs, H)[:, 0, s0]
    var_true = return_moments(stack, cls.r, probs, H)[1][:, s0]
    v_star = float(V_all[true_index, 0, s0])

    ll = np.zeros((n_seeds, M))          # finite part of the log-likelihood
    bad = np.zeros((n_seeds, M), bool)   # the model forbids an observed transition
    out = {k: np.zeros((n_seeds, K)) for k in ("regret", "variance", "vs_size")}
    covered = np.zeros((n_seeds, K), bool)
    logP, zero = cls._logP, cls._zero
    episodes = progress(range(K), desc=f"{algorithm} episodes") if show_progress else range(K)
    for k in episodes:
        L = np.where(bad, -np.inf, ll)
        vs = L >= L.max(-1, keepdims=True) - beta
        covered[:, k] = vs[:, true_index]
        out["vs_size"][:, k] = vs.sum(-1)
        if algorithm == "optimistic":
            chosen = _random_argmax(np.where(vs, v_opt[None], -np.inf), rng)
        else:
            chosen = _random_argmax(L, rng)
        out["regret"][:, k] = v_star - v_true[chosen]
        out["variance"][:, k] = var_true[chosen]
        states, actions = rollout(P_true, probs[chosen], H, s0, n_seeds, rng)
        flat = (states[:, :-1] * A + actions) * S + states[:, 1:]
        c = np.zeros((n_seeds, S * A * S))
        np.add.at(c, (np.repeat(np.arange(n_seeds), H), flat.ravel()), 1.0)
        ll += c @ logP
        bad |= (c @ zero) > 0
    return OnlineResult(algorithm, out["regret"], out["variance"], covered, out["vs_size"],
                        v_star, beta)
