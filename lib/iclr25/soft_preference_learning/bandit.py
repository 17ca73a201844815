"""The exact bandit: K responses, a population preference p, Bradley-Terry comparisons, and the
policy that SPL or DPO learns from them, against the closed form (chapter 17, notebook 01).

With preferences Bradley-Terry in the reward r = log p (a rater prefers y_i to y_j with
probability p_i / (p_i + p_j)), the SPL optimum is

    pi*(y) ∝ pi_ref(y)^(beta/alpha) p(y)^(1/alpha)

(DPO: alpha = beta, pi* ∝ pi_ref p^(1/beta), which piles onto the majority as beta falls; SPL with
alpha = 1 and beta -> 0 gives pi* = p, proportional representation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .losses import check_coefficients, spl_loss

__all__ = ["closed_form_policy", "sample_comparisons", "Comparisons", "fit_policy", "tv_distance",
           "entropy", "temperature_scale"]


def _as_prob(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1 or len(a) < 2:
        raise ValueError(f"{name} must be a 1-D array of at least 2 probabilities, got shape {a.shape}")
    if np.any(a < 0) or not np.isclose(a.sum(), 1.0, atol=1e-6):
        raise ValueError(f"{name} must be non-negative and sum to 1 (sum {a.sum():.6g})")
    return a


def closed_form_policy(pi_ref, p, alpha: float, beta: float) -> np.ndarray:
    """``pi* ∝ pi_ref^(beta/alpha) p^(1/alpha)``, normalised (chapter 17; the SPL optimum under
    Bradley-Terry preferences with reward ``log p``). Computed in log space."""
    check_coefficients(alpha, beta)
    pi_ref, p = _as_prob(pi_ref, "pi_ref"), _as_prob(p, "p")
    if pi_ref.shape != p.shape:
        raise ValueError(f"pi_ref and p must have the same length, got {len(pi_ref)} and {len(p)}")
    with np.errstate(divide="ignore"):
        logit = (beta / alpha) * np.log(pi_ref) + np.log(p) / alpha
    logit -= logit.max()
    w = np.exp(logit)
    return w / w.sum()


def temperature_scale(pi, T: float) -> np.ndarray:
    """``pi^(1/T)`` normalised: temperature scaling of a categorical policy (chapter 17)."""
    if not T > 0:
        raise ValueError(f"temperature must be > 0, got {T!r}")
    pi = _as_prob(pi, "pi")
    with np.errstate(divide="ignore"):
        lg = np.log(pi) / T
    lg -= lg.max()
    w = np.exp(lg)
    return w / w.sum()


def tv_distance(a, b) -> float:
    """Total variation distance ``0.5 * sum |a - b|`` (chapter 17)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"distributions must have one shape, got {a.shape} and {b.shape}")
    return float(0.5 * np.abs(a - b).sum())


def entropy(pi) -> float:
    """Shannon entropy in nats (chapter 17)."""
    pi = np.asarray(pi, dtype=np.float64)
    nz = pi[pi > 0]
    return float(-(nz * np.log(nz)).sum())


@dataclass
class Comparisons:
    """Pairwise comparison counts: ``wins[i, j]`` = how often ``i`` was preferred to ``j``."""

    wins: np.ndarray

    @property
    def n(self) -> int:
        return int(self.wins.sum())

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(winner, loser, count)`` of every ordered pair that occurred."""
        w, l = np.nonzero(self.wins)
        return w, l, self.wins[w, l]


def sample_comparisons(p, n: int, seed: int = 0, pair_probs=None) -> Comparisons:
    """Draw ``n`` Bradley-Terry comparisons (chapter 17): a pair ``{i, j}`` (uniform over the
    ``K (K-1) / 2`` pairs, or ``pair_probs`` a ``K x K`` symmetric weight matrix), then ``i`` wins
    with probability ``p_i / (p_i + p_j)``."""
    p = _as_prob(p, "p")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    K = len(p)
    iu, ju = np.triu_indices(K, 1)
    if pair_probs is None:
        q = np.full(len(iu), 1.0 / len(iu))
    else:
        pp = np.asarray(pair_probs, dtype=np.float64)
        if pp.shape != (K, K):
            raise ValueError(f"pair_probs must be {K} x {K}, got {pp.shape}")
        q = pp[iu, ju] + pp[ju, iu]
        q = q / q.sum()
    rng = np.random.default_rng(seed)
    per_pair = rng.multinomial(n, q)
    wins = np.zeros((K, K), dtype=np.int64)
    i_wins = rng.binomial(per_pair, p[iu] / (p[iu] + p[ju]))
    wins[iu, ju] = i_wins
    wins[ju, iu] = per_pair - i_wins
    return Comparisons(wins)


def fit_policy(comparisons: Comparisons, pi_ref, alpha: float, beta: float, *,
               max_iter: int = 500, tol: float = 1e-12) -> np.ndarray:
    """The softmax policy that minimises the SPL loss on ``comparisons`` (chapter 17).

    The policy is ``softmax(z)`` with free logits ``z`` (a tabular policy); the loss is the
    count-weighted mean of :func:`spl_loss` over the observed pairs, minimised by L-BFGS in
    float64 from ``z = log pi_ref``. Returns the learned ``pi``.
    """
    pi_ref = _as_prob(pi_ref, "pi_ref")
    if comparisons.wins.shape != (len(pi_ref), len(pi_ref)):
        raise ValueError(f"comparisons are over {comparisons.wins.shape[0]} responses, pi_ref over "
                         f"{len(pi_ref)}")
    if comparisons.n == 0:
        raise ValueError("no comparisons to learn from")
    return fit_policies(comparisons.wins[None], pi_ref[None], alpha, beta, max_iter=max_iter,
                        tol=tol)[0]


def fit_policies(wins, pi_ref, alpha: float, beta: float, *, max_iter: int = 500,
                 tol: float = 1e-12) -> np.ndarray:
    """:func:`fit_policy` for ``M`` independent bandits at once (chapter 17): ``wins`` is
    ``(M, K, K)`` counts, ``pi_ref`` ``(M, K)``; returns the ``(M, K)`` learned policies. The
    bandits share nothing, so the summed loss separates and one L-BFGS run fits them all."""
    check_coefficients(alpha, beta)
    wins = np.asarray(wins, dtype=np.float64)
    pi_ref = np.asarray(pi_ref, dtype=np.float64)
    if wins.ndim != 3 or wins.shape[1] != wins.shape[2] or pi_ref.shape != wins.shape[:2]:
        raise ValueError(f"wins must be (M, K, K) and pi_ref (M, K), got {wins.shape}, {pi_ref.shape}")
    m, w, l = np.nonzero(wins)
    cnt = torch.as_tensor(wins[m, w, l])
    totals = torch.as_tensor(wins.sum((1, 2)))[m].clamp(min=1)
    m_t, w_t, l_t = (torch.as_tensor(a) for a in (m, w, l))
    ref = torch.as_tensor(np.log(np.clip(pi_ref, 1e-300, None)), dtype=torch.float64)
    z = ref.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([z], lr=1.0, max_iter=max_iter, tolerance_grad=tol,
                            tolerance_change=tol, history_size=50, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        logpi = torch.log_softmax(z, -1)
        per = spl_loss(logpi[m_t, w_t], logpi[m_t, l_t], ref[m_t, w_t], ref[m_t, l_t], alpha,
                       beta, reduction="none")
        loss = (per * cnt / totals).sum()    # the sum of each bandit's count-weighted mean loss
        loss.backward()
        return loss

    for _ in range(5):   # L-BFGS restarts until the gradient is flat
        opt.step(closure)
        if z.grad is not None and float(z.grad.abs().max()) < 1e-9:
            break
    return torch.softmax(z.detach(), -1).numpy()
