"""Scoring candidate rules: the inner loop of column generation (the chapter's hot path).

A type under construction has utilities ``U[n, J]`` and within-type choice probabilities
``S = softmax(U)`` over each offer set. Adding a rule ``c`` (a Boolean ``[n, J]``) with weight ``w``
changes the probability of the chosen item ``y_i`` to

    P_i(w) = S_{i,y_i} e^{w c_{i,y_i}} / (1 - a_i + a_i e^w),    a_i = sum_j S_ij c_ij

so a candidate needs only two numbers per observation: ``a_i`` (a per-offer-set sum) and
``c_{i,y_i}``. The support-finding objective of Frank-Wolfe is ``F = (1/n) sum_i P_i / p_i`` with
``p_i`` the current mixture's probability of the chosen item; a candidate's score is
``max_w F(w) - F(0)`` over a grid of weights.

Three paths behind :func:`score_rules`: ``"reference"`` (plain Python loops, per candidate and per
observation), ``"numpy"`` (bit-packed predicates, ``np.bitwise_and`` to form conjunctions,
vectorised per-offer-set sums and weight grid) and ``"numba"`` (the default when numba imports:
one compiled pass per candidate that reads the packed bits directly, sums each offer set once and
skips offer sets the rule does not touch). ``benchmarks/bench_logic_logit.py`` times them; set
``ICLR25_NO_NUMBA=1`` to make ``"numpy"`` the default. Introduced in
``01-logic-logit/02-inside-the-solver``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["BACKENDS", "default_backend", "pack_predicates", "rule_bits", "score_rules",
           "score_bits", "unpack"]


from ..jit import available as _numba_available
from ..jit import numba  # None without numba: numpy and the reference run without it

BACKENDS = ("numba", "numpy", "reference")
_CHUNK = 256


def default_backend() -> str:
    """``"numba"`` when available (``ICLR25_NO_NUMBA=1`` forces ``"numpy"``), else ``"numpy"``."""
    return "numba" if _numba_available() else "numpy"


if numba is not None:

    @numba.njit(cache=True)
    def _score_kernel(bits, S, choice, coef, grid, ew, out_F, out_w):  # pragma: no cover - compiled
        K, nbytes = bits.shape
        n, J = S.shape
        G = ew.shape[0]
        acc = np.empty(G)
        a = np.zeros(n)                      # a_i = sum_j S_ij c_ij, built from the set bits only
        hit = np.zeros(n, np.bool_)
        touched = np.empty(n, np.int64)
        total = 0.0
        for i in range(n):
            total += coef[i]
        for k in range(K):
            nt = 0
            for b in range(nbytes):          # conjunctions are sparse: skip zero bytes
                byte = bits[k, b]
                if byte == 0:
                    continue
                for t in range(8):
                    if (byte >> t) & 1:
                        pos = b * 8 + t
                        i = pos // J
                        if not hit[i]:
                            hit[i] = True
                            touched[nt] = i
                            nt += 1
                        a[i] += S[i, pos - i * J]
            base = total                     # offer sets the rule does not touch keep coef_i
            for g in range(G):
                acc[g] = 0.0
            for t in range(nt):
                i = touched[t]
                base -= coef[i]
                pos = i * J + choice[i]
                cy = (bits[k, pos >> 3] >> (pos & 7)) & 1
                ai = a[i]
                for g in range(G):
                    e = ew[g]
                    num = coef[i] * e if cy else coef[i]
                    acc[g] += num / (1.0 + ai * (e - 1.0))
                a[i] = 0.0
                hit[i] = False
            best = -np.inf
            bw = 0.0
            for g in range(G):
                v = base + acc[g]
                if v > best:
                    best = v
                    bw = grid[g]
            out_F[k] = best
            out_w[k] = bw


def pack_predicates(P: np.ndarray) -> np.ndarray:
    """Bit-pack a predicate tensor ``[n, J, M]`` into ``[M, ceil(n*J/8)]`` uint8 rows."""
    n, J, M = P.shape
    return np.packbits(P.reshape(n * J, M).T, axis=1, bitorder="little")


def unpack(bits: np.ndarray, n: int, J: int) -> np.ndarray:
    """Inverse of :func:`pack_predicates` for candidate rows: ``[K, nbytes]`` -> bool ``[K, n, J]``."""
    return np.unpackbits(bits, axis=-1, count=n * J, bitorder="little").reshape(-1, n, J).astype(bool)


def rule_bits(packed: np.ndarray, rules: Sequence[Sequence[int]]) -> np.ndarray:
    """Packed truth values ``[K, nbytes]`` of each rule (the AND of its predicates' rows)."""
    out = np.empty((len(rules), packed.shape[1]), np.uint8)
    for k, r in enumerate(rules):
        r = list(r)
        if not r:
            raise ValueError("a rule needs at least one predicate")
        out[k] = np.bitwise_and.reduce(packed[r], axis=0) if len(r) > 1 else packed[r[0]]
    return out


def _check(S, choice, inv_p, grid):
    S = np.asarray(S, float)
    if S.ndim != 2:
        raise ValueError(f"S must be [n_obs, max_items], got shape {S.shape}")
    n = S.shape[0]
    if np.shape(choice) != (n,) or np.shape(inv_p) != (n,):
        raise ValueError(f"choice and inv_p must have shape ({n},)")
    grid = np.asarray(grid, float)
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError("grid must be a non-empty 1-D array of candidate weights")
    return S, np.asarray(choice), np.asarray(inv_p, float), grid


def score_bits(bits: np.ndarray, S: np.ndarray, choice: np.ndarray, inv_p: np.ndarray,
               grid: np.ndarray, backend: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Packed candidates ``[K, nbytes]`` -> ``(F_best[K], w_best[K])``: the best support objective
    over ``grid`` and its weight (``backend``: ``"numba"`` or ``"numpy"``; default
    :func:`default_backend`)."""
    backend = backend or default_backend()
    if backend == "numba":
        if numba is None:  # pragma: no cover
            raise ValueError("backend 'numba' needs numba installed; valid here: numpy, reference")
        n = S.shape[0]
        F = np.empty(bits.shape[0])
        w = np.empty(bits.shape[0])
        # F(w) = sum_i coef_i e^{w c_iy} / (1 - a_i + a_i e^w),  coef_i = S_{i,y_i} / (n p_i)
        coef = np.ascontiguousarray(inv_p * S[np.arange(n), choice] / n, dtype=np.float64)
        grid = np.ascontiguousarray(grid, dtype=np.float64)
        _score_kernel(np.ascontiguousarray(bits), np.ascontiguousarray(S, dtype=np.float64),
                      np.ascontiguousarray(choice, dtype=np.int64), coef, grid, np.exp(grid), F, w)
        return F, w
    n, J = S.shape
    K = bits.shape[0]
    s_ch = S[np.arange(n), choice]
    coef = inv_p * s_ch / n                       # F(w) = sum_i coef_i e^{w c_iy} / (1 - a_i + a_i e^w)
    Sf = S.astype(np.float32).reshape(n * J)
    flat_ch = np.arange(n) * J + choice
    ew = np.exp(grid)
    best_F = np.full(K, -np.inf)
    best_w = np.zeros(K)
    for lo in range(0, K, _CHUNK):
        c = np.unpackbits(bits[lo:lo + _CHUNK], axis=-1, count=n * J, bitorder="little")
        a = (c * Sf).reshape(-1, n, J).sum(-1, dtype=np.float64)      # a_i: per-offer-set sum
        cy = c[:, flat_ch].astype(bool)                                # c_{i, y_i}
        for w, e in zip(grid, ew):
            F = (np.where(cy, coef * e, coef) / (1.0 + a * (e - 1.0))).sum(1)
            better = F > best_F[lo:lo + _CHUNK]
            best_F[lo:lo + _CHUNK][better] = F[better]
            best_w[lo:lo + _CHUNK][better] = w
    return best_F, best_w


def _score_reference(rules, P, S, choice, inv_p, grid):
    """Plain Python: for each candidate, for each observation, loop over the offered items."""
    import math

    n, J = S.shape
    K = len(rules)
    best_F, best_w = np.full(K, -np.inf), np.zeros(K)
    Pl, Sl = P.tolist(), S.tolist()
    for k, rule in enumerate(rules):
        rule = list(rule)
        a, cy = [], []
        for i in range(n):
            ai = 0.0
            for j in range(J):
                if all(Pl[i][j][m] for m in rule):
                    ai += Sl[i][j]
            a.append(ai)
            cy.append(all(Pl[i][int(choice[i])][m] for m in rule))
        for w in grid:
            e = math.exp(w)
            F = 0.0
            for i in range(n):
                num = Sl[i][int(choice[i])] * (e if cy[i] else 1.0)
                F += inv_p[i] * num / (1.0 - a[i] + a[i] * e)
            F /= n
            if F > best_F[k]:
                best_F[k], best_w[k] = F, w
    return best_F, best_w


def score_rules(rules: Sequence[Sequence[int]], P: np.ndarray, S: np.ndarray, choice: np.ndarray,
                inv_p: np.ndarray, grid: Sequence[float], backend: str | None = None,
                packed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Score candidate rules for adding to a type (chapter 01, ``02-inside-the-solver``).

    Parameters
    ----------
    rules : K rules, each a sequence of predicate indices (AND).
    P : bool ``[n, J, M]`` predicate tensor (:meth:`PredicateLibrary.evaluate`).
    S : ``[n, J]`` the type's current within-type choice probabilities (zero on padding).
    choice : ``[n]`` chosen slots; inv_p : ``[n]`` 1 / mixture probability of the chosen item.
    grid : candidate rule weights ``w``.
    backend : ``"numba"`` (compiled), ``"numpy"`` (bit-packed, vectorised) or ``"reference"``
        (plain loops); default :func:`default_backend`.
    packed : optional :func:`pack_predicates` of ``P`` (saves re-packing).

    Returns ``(F, w)``: each candidate's best support objective ``F`` over the grid, and its weight.
    """
    backend = backend or default_backend()
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    S, choice, inv_p, grid = _check(S, choice, inv_p, grid)
    P = np.asarray(P, bool)
    if P.shape[:2] != S.shape:
        raise ValueError(f"P must be [n, J, M] with [n, J] = {S.shape}, got {P.shape}")
    M = P.shape[2]
    for r in rules:
        if len(r) == 0 or min(r) < 0 or max(r) >= M:
            raise ValueError(f"rule {tuple(r)} must hold predicate indices in [0, {M - 1}]")
    if backend == "reference":
        return _score_reference(rules, P, S, choice, inv_p, grid)
    if packed is None:
        packed = pack_predicates(P)
    return score_bits(rule_bits(packed, rules), S, choice, inv_p, grid, backend)
