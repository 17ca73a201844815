"""Finite-horizon tabular MDPs: exact values, exact return variance, occupancies, rollouts.

Notation follows Wang, Zhou, Lui & Sun (ICLR 2025): a time-homogeneous MDP with transition
``P[s, a, s']``, a known reward ``r[s, a]``, horizon ``H`` and start state ``s0``. A policy is a
table ``pi[h, s, a]`` of action probabilities (a deterministic policy is ``pi[h, s]`` of actions and
is converted with :func:`as_probs`). Every function here takes a *stack* of models
``P[M, S, A, S]`` where that helps, so that one call plans or evaluates in many models at once.

Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TabularMDP", "as_probs", "check_transitions", "value_iteration", "evaluate",
           "return_moments", "occupancy", "rollout", "max_total_reward", "VI_BACKENDS"]

VI_BACKENDS = ("auto", "numba", "batched", "loop")

from ..jit import available as _numba_available
from ..jit import numba as _numba  # None without numba: the batched path and the loop need nothing


def _vi_one_model(Pm, rf, H, V, pi):
    """Backward induction in one model ``Pm`` [S, A, S], into ``V`` [H+1, S] and ``pi`` [H, S].

    Also validates ``Pm`` on the way and returns False if a row has a negative (or NaN) entry or
    does not sum to 1 within ``np.allclose``'s tolerance, so the fast path reads P only once.
    """
    S, A, _ = Pm.shape
    SA = S * A
    Pf = Pm.reshape(SA, S)
    Pt = np.empty((S, SA))      # next-state major: the inner loop runs over (s, a), vectorised
    Q = np.empty(SA)
    v_next = np.zeros(S)
    ok = True
    for j in range(SA):
        total = 0.0
        for t in range(S):
            p = Pf[j, t]
            ok = ok and p >= -1e-12
            total += p
            Pt[t, j] = p
        ok = ok and abs(total - 1.0) <= 1e-8 + 1e-5
    for h in range(H - 1, -1, -1):
        for j in range(SA):
            Q[j] = rf[j]
        for t in range(S):       # Q += P[:, :, t] * V_{h+1}(t)
            v = v_next[t]
            for j in range(SA):
                Q[j] += Pt[t, j] * v
        for s in range(S):
            best = Q[s * A]
            arg = 0
            for a in range(1, A):
                if Q[s * A + a] > best:  # strict: ties go to the lowest action, as elsewhere
                    best = Q[s * A + a]
                    arg = a
            v_next[s] = best
            V[h, s] = best
            pi[h, s] = arg
    return ok


def _vi_numba_kernel(P, r, H):
    M, S, A, _ = P.shape
    V = np.zeros((M, H + 1, S))
    pi = np.zeros((M, H, S), dtype=np.int64)
    rf = r.reshape(S * A)
    ok = True
    for m in range(M):
        ok = _vi_one(P[m], rf, H, V[m], pi[m]) and ok
    return V, pi, ok


# One thread: a threaded version (numba prange over models) measured no faster on the book's
# 2-vCPU machines. Fast-math without "no NaNs / no infs", so the validation
# still sees a NaN; values agree with the numpy paths to rounding, not bit for bit.
_FASTMATH = {"reassoc", "contract", "nsz", "arcp", "afn"}
if _numba is not None:
    _vi_one = _numba.njit(cache=True, fastmath=_FASTMATH, error_model="numpy")(_vi_one_model)
    _vi_numba = _numba.njit(cache=True, fastmath=_FASTMATH, error_model="numpy")(_vi_numba_kernel)
else:  # pragma: no cover
    _vi_numba = None

_BAD_P = "{name}[..., s, a, :] must be probability vectors (non-negative, summing to 1)"


def check_transitions(P: np.ndarray, *, name: str = "P") -> np.ndarray:
    """``P`` as a float array of shape ``[..., S, A, S]`` whose rows are distributions (else ValueError).

    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
    """
    P = np.asarray(P, dtype=float)
    if P.ndim < 3 or P.shape[-1] != P.shape[-3]:
        raise ValueError(f"{name} must have shape [..., S, A, S] (next-state axis last, same S), "
                         f"got {P.shape}")
    if np.any(P < -1e-12) or not np.allclose(P.sum(-1), 1.0, atol=1e-8):
        raise ValueError(_BAD_P.format(name=name))
    return P


def _check_reward(r: np.ndarray, S: int, A: int) -> np.ndarray:
    r = np.asarray(r, dtype=float)
    if r.shape != (S, A):
        raise ValueError(f"reward r must have shape [S, A] = [{S}, {A}], got {r.shape}")
    return r


def as_probs(pi: np.ndarray, A: int) -> np.ndarray:
    """A policy as action probabilities ``[..., H, S, A]``.

    ``pi`` is either deterministic, integer actions ``[..., H, S]``, or already probabilities
    ``[..., H, S, A]`` (returned as is after a check).

    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
    """
    pi = np.asarray(pi)
    if np.issubdtype(pi.dtype, np.integer):
        if pi.size and (pi.min() < 0 or pi.max() >= A):
            raise ValueError(f"deterministic policy actions must lie in 0..{A - 1}")
        return np.eye(A)[pi]
    if pi.shape[-1] != A:
        raise ValueError(f"a stochastic policy must have shape [..., H, S, A={A}], got {pi.shape}")
    if not np.allclose(pi.sum(-1), 1.0, atol=1e-8) or np.any(pi < -1e-12):
        raise ValueError("policy rows pi[h, s, :] must be probability vectors")
    return pi.astype(float)


def max_total_reward(P: np.ndarray, r: np.ndarray, H: int) -> float:
    """The largest total reward any trajectory of length ``H`` can collect (over reachable paths).

    Dynamic programming with a max over actions *and* over next states in the support of ``P``.

    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
    """
    P = check_transitions(P)
    r = _check_reward(r, P.shape[0], P.shape[1])
    support = P > 0
    U = np.zeros(P.shape[0])
    for _ in range(H):
        nxt = np.where(support, U[None, None, :], -np.inf).max(-1)
        U = (r + nxt).max(-1)
    return float(U.max())


@dataclass
class TabularMDP:
    """A finite-horizon tabular MDP with known reward (the paper's setting).

    Parameters
    ----------
    P : ``[S, A, S]`` transition probabilities.
    r : ``[S, A]`` reward (deterministic, known).
    H : horizon (number of decisions per episode).
    s0 : start state.
    normalised : if True (the paper's assumption), check that every trajectory's total reward
        lies in [0, 1] and raise ``ValueError`` otherwise.

    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
    """

    P: np.ndarray
    r: np.ndarray
    H: int
    s0: int = 0
    normalised: bool = True

    def __post_init__(self) -> None:
        self.P = check_transitions(self.P)
        if self.P.ndim != 3:
            raise ValueError(f"TabularMDP.P must be [S, A, S], got {self.P.shape}")
        self.r = _check_reward(self.r, self.S, self.A)
        if int(self.H) != self.H or self.H < 1:
            raise ValueError(f"horizon H must be a positive integer, got {self.H}")
        self.H = int(self.H)
        if not 0 <= self.s0 < self.S:
            raise ValueError(f"start state s0 must lie in 0..{self.S - 1}, got {self.s0}")
        if self.normalised:
            top = max_total_reward(self.P, self.r, self.H)
            if self.r.min() < 0 or top > 1 + 1e-9:
                raise ValueError(
                    f"normalised=True needs every trajectory's total reward in [0, 1]; the largest "
                    f"is {top:.4g} (min reward {self.r.min():.3g}). Scale r by 1/H or pass normalised=False")

    @property
    def S(self) -> int:
        return self.P.shape[0]

    @property
    def A(self) -> int:
        return self.P.shape[1]

    def optimal(self):
        """``(V*[H+1, S], pi*[H, S])`` by value iteration."""
        V, pi = value_iteration(self.P[None], self.r, self.H)
        return V[0], pi[0]

    def value(self, pi) -> float:
        """``V^pi_0(s0)``, exact."""
        return float(evaluate(self.P[None], self.r, pi, self.H)[0, 0, self.s0])

    def return_variance(self, pi) -> float:
        """``Var[sum_h r_h]`` under ``pi`` from ``s0``, exact (second-moment recursion)."""
        return float(return_moments(self.P[None], self.r, pi, self.H)[1][0, self.s0])

    def rollout(self, pi, n: int, rng):
        """``n`` episodes under ``pi``: ``(states[n, H+1], actions[n, H])``."""
        return rollout(self.P, pi, self.H, self.s0, n, rng)


def _vi_batched(P, r, H):
    M, S, A, _ = P.shape
    Pf = P.reshape(M, S * A, S)
    V = np.zeros((M, H + 1, S))
    pi = np.zeros((M, H, S), dtype=np.int64)
    v_next = np.zeros((M, S, 1))          # contiguous V_{h+1}: matmul's fast path needs it
    for h in range(H - 1, -1, -1):
        # Q_h(s, a) = r(s, a) + sum_s' P(s'|s, a) V_{h+1}(s')   (Bellman optimality, batched over M)
        Q = np.matmul(Pf, v_next).reshape(M, S, A)
        Q += r
        a = Q.argmax(-1)
        pi[:, h] = a
        v = np.take_along_axis(Q, a[..., None], -1)
        V[:, h] = v[..., 0]
        v_next = v
    return V, pi


def _vi_loop(P, r, H):
    M, S, A, _ = P.shape
    V = np.zeros((M, H + 1, S))
    pi = np.zeros((M, H, S), dtype=np.int64)
    for m in range(M):
        for h in range(H - 1, -1, -1):
            Q = r + P[m] @ V[m, h + 1]
            pi[m, h] = Q.argmax(-1)
            V[m, h] = Q.max(-1)
    return V, pi


def value_iteration(P: np.ndarray, r: np.ndarray, H: int, *, backend: str = "auto"):
    """Finite-horizon value iteration in ``M`` models at once.

    Parameters
    ----------
    P : ``[M, S, A, S]`` a stack of transition models (``[S, A, S]`` is treated as ``M = 1``).
    r : ``[S, A]`` the known reward, shared by all models.
    H : horizon.
    backend : ``"numba"`` (compiled loop over models, states and actions; the fast path), ``"batched"`` (one
        numpy batched mat-vec per step over all models), ``"loop"`` (the plain reference: one model
        at a time), or ``"auto"`` (numba when installed, else batched). All break ties towards the
        lowest action index and agree to rounding.

    Returns
    -------
    ``V[M, H+1, S]`` (with ``V[:, H] = 0``) and the greedy policy ``pi[M, H, S]``.

    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``; benchmarked in
    ``benchmarks/bench_mle_model_based_rl.py``.
    """
    if backend == "auto":
        backend = "numba" if _vi_numba is not None and _numba_available() else "batched"
    if backend not in VI_BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(VI_BACKENDS)}")
    if backend == "numba" and _vi_numba is None:
        raise ValueError("backend 'numba' needs numba installed; use 'batched'")
    # the compiled path checks the rows of P inside its kernel, in the same pass that reads them
    P = np.asarray(P, dtype=float) if backend == "numba" else check_transitions(P)
    if P.ndim == 3:
        P = P[None]
    if P.ndim != 4 or P.shape[-1] != P.shape[-3]:
        raise ValueError(f"P must be [M, S, A, S] or [S, A, S], got {P.shape}")
    r = _check_reward(r, P.shape[1], P.shape[2])
    if int(H) != H or H < 1:
        raise ValueError(f"horizon H must be a positive integer, got {H}")
    if backend == "numba":
        V, pi, ok = _vi_numba(np.ascontiguousarray(P), np.ascontiguousarray(r), int(H))
        if not ok:
            raise ValueError(_BAD_P.format(name="P"))
        return V, pi
    if backend == "batched":
        return _vi_batched(P, r, int(H))
    return _vi_loop(P, r, int(H))


def _policy_stack(pi, M, H, S, A):
    probs = as_probs(pi, A)
    if probs.shape[-3:] != (H, S, A):
        raise ValueError(f"policy must be [H={H}, S={S}] actions or [H, S, A={A}] probabilities "
                         f"(optionally with a leading model axis M={M}), got {np.shape(pi)}")
    if probs.ndim == 3:
        probs = np.broadcast_to(probs, (M, H, S, A))
    elif probs.shape[0] != M:
        raise ValueError(f"a per-model policy needs a leading axis of size M={M}, got {probs.shape[0]}")
    return probs


def evaluate(P: np.ndarray, r: np.ndarray, pi, H: int) -> np.ndarray:
    """``V^pi_h(s)`` in each of ``M`` models: ``[M, H+1, S]``.

    ``pi`` is one policy (``[H, S]`` actions or ``[H, S, A]`` probabilities) used in every model, or
    one policy per model (a leading axis of size ``M``).

    Introduced in notebook ``04-mle-model-based-rl/02-online-optimism``.
    """
    P = check_transitions(P)
    if P.ndim == 3:
        P = P[None]
    M, S, A, _ = P.shape
    r = _check_reward(r, S, A)
    probs = _policy_stack(pi, M, H, S, A)
    Pf = P.reshape(M, S * A, S)
    V = np.zeros((M, H + 1, S))
    for h in range(H - 1, -1, -1):
        Q = r[None] + np.matmul(Pf, V[:, h + 1, :, None]).reshape(M, S, A)
        V[:, h] = (probs[:, h] * Q).sum(-1)
    return V


def return_moments(P: np.ndarray, r: np.ndarray, pi, H: int):
    """Mean and variance of the return ``G = sum_h r(s_h, a_h)`` from every start state.

    Second-moment dynamic programming: with ``V_h`` the mean and ``W_h = E[G_h^2]``,
    ``W_h(s) = sum_a pi(a|s) [ r^2 + 2 r (P V_{h+1})(s, a) + (P W_{h+1})(s, a) ]`` and
    ``Var_h(s) = W_h(s) - V_h(s)^2``. This is ``VaR^pi`` of the paper's second-order bounds.

    Returns ``(mean[M, S], var[M, S])`` at ``h = 0``. Introduced in notebook
    ``04-mle-model-based-rl/02-online-optimism``.
    """
    P = check_transitions(P)
    if P.ndim == 3:
        P = P[None]
    M, S, A, _ = P.shape
    r = _check_reward(r, S, A)
    probs = _policy_stack(pi, M, H, S, A)
    Pf = P.reshape(M, S * A, S)
    V = np.zeros((M, S))
    W = np.zeros((M, S))
    for h in range(H - 1, -1, -1):
        PV = np.matmul(Pf, V[:, :, None]).reshape(M, S, A)
        PW = np.matmul(Pf, W[:, :, None]).reshape(M, S, A)
        V_new = (probs[:, h] * (r[None] + PV)).sum(-1)
        W = (probs[:, h] * (r[None] ** 2 + 2 * r[None] * PV + PW)).sum(-1)
        V = V_new
    return V, np.maximum(W - V ** 2, 0.0)


def occupancy(P: np.ndarray, pi, H: int, s0: int) -> np.ndarray:
    """State-action occupancy ``d^pi_h(s, a) = Pr(s_h = s, a_h = a)``: ``[H, S, A]``.

    Introduced in notebook ``04-mle-model-based-rl/03-offline-pessimism``.
    """
    P = check_transitions(P)
    if P.ndim != 3:
        raise ValueError(f"occupancy needs one model P[S, A, S], got {P.shape}")
    S, A, _ = P.shape
    probs = as_probs(pi, A)
    if probs.shape != (H, S, A):
        raise ValueError(f"policy must be [H={H}, S={S}] or [H, S, A={A}], got {np.shape(pi)}")
    d = np.zeros((H, S, A))
    ds = np.zeros(S)
    ds[s0] = 1.0
    for h in range(H):
        d[h] = ds[:, None] * probs[h]
        ds = np.einsum("sa,sat->t", d[h], P)
    return d


def rollout(P: np.ndarray, pi, H: int, s0: int, n: int, rng):
    """Sample ``n`` episodes in model ``P[S, A, S]``; vectorised over episodes.

    ``pi`` is one policy (``[H, S]`` or ``[H, S, A]``) or one per episode (leading axis ``n``).
    Returns ``states[n, H+1]`` and ``actions[n, H]`` (int arrays).

    Introduced in notebook ``04-mle-model-based-rl/01-mle-version-space``.
    """
    P = check_transitions(P)
    S, A, _ = P.shape
    probs = as_probs(pi, A)
    if probs.ndim == 3:
        probs = np.broadcast_to(probs, (n,) + probs.shape)
    if probs.shape != (n, H, S, A):
        raise ValueError(f"policy must be [H={H}, S={S}(, A)] or have a leading axis n={n}, "
                         f"got {np.shape(pi)}")
    rng = np.random.default_rng(rng)
    cumP = P.cumsum(-1)
    states = np.zeros((n, H + 1), dtype=np.int64)
    actions = np.zeros((n, H), dtype=np.int64)
    states[:, 0] = s0
    idx = np.arange(n)
    for h in range(H):
        s = states[:, h]
        cpi = probs[idx, h, s].cumsum(-1)
        a = np.minimum((rng.random(n)[:, None] >= cpi).sum(-1), A - 1)
        actions[:, h] = a
        c = cumP[s, a]
        states[:, h + 1] = np.minimum((rng.random(n)[:, None] >= c).sum(-1), S - 1)
    return states, actions
