"""The escape-neuron certificate in exact arithmetic: the reference for :func:`~.landscape.certify`
(chapter 18, issue 60).

:func:`~.landscape.certify` is the fast path: float64 arithmetic, and an LP (HiGHS) per direction
group for the one-sided derivatives. :func:`certify_exact` evaluates the same rules in exact
rational arithmetic (:class:`fractions.Fraction`) on the float64 values of the weights and the
data, which are dyadic rationals:

- the pre-activations w_j . x_n, the residuals r_n, the d-vectors D_S, the correlations g(w_j) and
  the loss are exact;
- every comparison that involves a norm compares squares (|cos(w, x)| <= b_tol becomes
  (w . x)^2 <= b_tol^2 ||w||^2 ||x||^2), so no square root is taken;
- the minimum one-sided derivative min_u phi(u) over the box ||u||_inf <= 1 cut by the kinks is
  the exact minimum over the vertices of each cell (a linear function attains its minimum over a
  bounded polytope at a vertex; each vertex solves d independent active constraints);
- the loss change along the descent direction is exact.

So dead-cone membership (every w_j . x_n < 0) and the signs of w_j . x_n are decided exactly, with
no margin, and no comparison depends on a rounding error. What stays a parameter is the
idealisation itself: ``h_tol`` (which neurons have not grown: h_j -> 0), ``b_tol`` (which kinks a
neuron sits on), ``d_tol`` and ``stat_tol`` (relative to ||X|| ||Y||). A plateau is a stationary
point only in the vanishing-initialisation limit, so these define the point that is certified;
notebook 02 measures how the verdicts depend on them.

:func:`float_decided` says where the fast path can be trusted without the reference: for each
comparison :func:`~.landscape.certify` makes, it bounds the float64 rounding error of the compared
quantity with the standard model of floating-point arithmetic (:func:`~.landscape.gamma`;
for the LP's optimum, the solver's feasibility tolerance) and reports whether every quantity lies
farther from its threshold than its bound. Where it does, both certificates must give the same
verdict (tested, and checked in notebook 02 at every certified point).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .landscape import (Certificate, _adjacent_patterns, _min_directional, _sectors_cached, certify,
                        cos_error_bound, d_vectors, gamma)
from .net import ShallowNet

__all__ = ["certify_exact", "min_directional_exact", "float_decided", "Decided", "LP_TOL",
           "exact_signs"]

#: HiGHS's default primal and dual feasibility tolerance: the error bound we allow the LP optimum
#: of the fast path (per unit of the objective's 1-norm), since the LP's error is the solver's,
#: not a rounding error
LP_TOL = 1e-7


# -- exact arithmetic on small arrays -----------------------------------------------------------------

def _q(a) -> np.ndarray:
    """The exact rational values of a float64 array (an object array of Fractions)."""
    a = np.asarray(a, dtype=np.float64)
    out = np.empty(a.shape, dtype=object)
    for idx, v in np.ndenumerate(a):
        out[idx] = Fraction(float(v))
    return out


def _mm(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Exact matrix product of object arrays."""
    n, p = A.shape
    p2, q = B.shape
    assert p == p2
    out = np.empty((n, q), dtype=object)
    for i in range(n):
        for j in range(q):
            s = Fraction(0)
            for t in range(p):
                s += A[i, t] * B[t, j]
            out[i, j] = s
    return out


def _act(Z: np.ndarray, rp: Fraction, rn: Fraction) -> np.ndarray:
    out = np.empty(Z.shape, dtype=object)
    for idx, z in np.ndenumerate(Z):
        out[idx] = rp * z if z > 0 else rn * z
    return out


def _sq(v) -> Fraction:
    return sum((x * x for x in np.ravel(v)), Fraction(0))


def _solve(M: list[list[Fraction]], b: list[Fraction]) -> list[Fraction] | None:
    """Exact Gaussian elimination; None when M is singular."""
    n = len(M)
    A = [list(M[i]) + [b[i]] for i in range(n)]
    for col in range(n):
        piv = next((r for r in range(col, n) if A[r][col] != 0), None)
        if piv is None:
            return None
        A[col], A[piv] = A[piv], A[col]
        p = A[col][col]
        for r in range(n):
            if r != col and A[r][col] != 0:
                f = A[r][col] / p
                A[r] = [x - f * y for x, y in zip(A[r], A[col])]
    return [A[i][n] / A[i][i] for i in range(n)]


def _min_linear(a: list[Fraction], A: list[list[Fraction]]) -> Fraction:
    """min a . u over {u : ||u||_inf <= 1, A u >= 0} (rows of A), exactly, by vertex enumeration.
    The set contains 0, is bounded, and a linear function attains its minimum at a vertex."""
    d = len(a)
    if not A:
        return -sum((abs(x) for x in a), Fraction(0))
    rows: list[tuple[list[Fraction], Fraction, int]] = []
    for i in range(d):
        e = [Fraction(int(i == t)) for t in range(d)]
        rows += [(e, Fraction(1), i), (e, Fraction(-1), i)]
    rows += [(list(r), Fraction(0), -1) for r in A]
    best = None
    for combo in itertools.combinations(range(len(rows)), d):
        box = [rows[c][2] for c in combo if rows[c][2] >= 0]
        if len(box) != len(set(box)):  # u_i = 1 and u_i = -1 at once
            continue
        u = _solve([rows[c][0] for c in combo], [rows[c][1] for c in combo])
        if u is None or any(abs(x) > 1 for x in u):
            continue
        if any(sum((r[t] * u[t] for t in range(d)), Fraction(0)) < 0 for r in A):
            continue
        v = sum((a[t] * u[t] for t in range(d)), Fraction(0))
        best = v if best is None or v < best else best
    assert best is not None  # u = 0 is a vertex of the cones' intersection or lies on an edge
    return best


def min_directional_exact(c, X, w, boundary, rho_pos: float = 1.0, rho_neg: float = 0.0) -> Fraction:
    """The exact counterpart of the fast path's LPs: min over ||u||_inf <= 1 of
    phi(u) = sum_n c_n sigma'(w . x_n; u . x_n), the one-sided derivative of the correlation
    sum_n c_n sigma(w . x_n) in direction u, with the inputs in ``boundary`` treated as kinks
    (sigma'(0; t) = rho_pos t for t > 0, rho_neg t otherwise) and the others at the exact sign of
    w . x_n. ``c``, ``X``, ``w`` may be floats (taken exactly) or Fractions.

    Introduced in chapter 18, notebook ``02-escape-neurons``.
    """
    Xq = X if np.asarray(X).dtype == object else _q(X)
    cq = c if np.asarray(c).dtype == object else _q(c)
    wq = w if np.asarray(w).dtype == object else _q(w)
    rp, rn = Fraction(rho_pos), Fraction(rho_neg)
    N, d = Xq.shape
    B = [int(n) for n in boundary]
    z = [sum((wq[t] * Xq[n, t] for t in range(d)), Fraction(0)) for n in range(N)]
    base = [Fraction(0)] * d
    for n in range(N):
        if n in B:
            continue
        slope = rp if z[n] > 0 else rn
        base = [base[t] + cq[n] * slope * Xq[n, t] for t in range(d)]
    if not B:
        return _min_linear(base, [])
    best = None
    for signs in itertools.product((1, -1), repeat=len(B)):
        a = list(base)
        for s, n in zip(signs, B):
            slope = rp if s > 0 else rn
            a = [a[t] + cq[n] * slope * Xq[n, t] for t in range(d)]
        v = _min_linear(a, [[s * Xq[n, t] for t in range(d)] for s, n in zip(signs, B)])
        best = v if best is None or v < best else best
    return best


def exact_signs(W, X) -> np.ndarray:
    """sign(w_j . x_n), decided exactly: an (m, N) integer array of -1, 0, +1."""
    Z = _mm(_q(np.atleast_2d(W)), _q(X).T)
    return np.array([[(z > 0) - (z < 0) for z in row] for row in Z], dtype=int)


# -- the reference certificate ------------------------------------------------------------------------

def _verified_sectors(X: np.ndarray, Xq: np.ndarray):
    """The sectors of the arrangement (computed by LP in :func:`~.landscape.sectors`), each
    interior point verified exactly to lie strictly inside its sector."""
    secs = _sectors_cached(X)
    d = X.shape[1]
    for S in secs:
        uq = _q(S.u)
        for n, s in enumerate(S.signs):
            if s == 0:
                continue
            z = sum((uq[t] * Xq[n, t] for t in range(d)), Fraction(0))
            if not (s * z > 0):
                raise ArithmeticError(f"sector {S.signs}: its interior point is not strictly inside "
                                      f"(input {n}); the LP arrangement is not exact here")
    return secs


def certify_exact(net: ShallowNet, X: np.ndarray, Y: np.ndarray, *, h_tol: float = 1e-4,
                  b_tol: float = 1e-4, d_tol: float = 1e-3, stat_tol: float = 1e-4,
                  copy_deg: float = 0.5) -> Certificate:
    """:func:`~.landscape.certify` in exact rational arithmetic (the reference; see the module
    docstring): the same labels, idealisation, escape-neuron test, directional stationarity and
    verified descent, with dead-cone membership decided by the exact signs of w_j . x_n.

    Returns a :class:`~.landscape.Certificate` whose numbers (loss, gap, sector norms, loss drop)
    are the exact values rounded to float64 once; the descent direction is stored rounded to
    float64 too (its loss drop is the exact one of the exact direction).

    Introduced in chapter 18, notebook ``02-escape-neurons``.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
    m, d = net.W.shape
    N, k = Y.shape
    Xq, Yq, Wq, Hq = _q(X), _q(Y), _q(net.W), _q(net.H)
    rp, rn = Fraction(net.rho_pos), Fraction(net.rho_neg)
    h_tol2, b_tol2 = Fraction(h_tol) ** 2, Fraction(b_tol) ** 2
    d_tol2, stat_tol2 = Fraction(d_tol) ** 2, Fraction(stat_tol) ** 2
    X2 = [_sq(Xq[n]) for n in range(N)]
    Y2 = _sq(Yq)
    scale2 = sum(X2, Fraction(0)) * Y2
    if scale2 == 0:
        raise ValueError("certify_exact needs X and Y that are not all zero")

    # (1) labels, as classify_neurons, every comparison exact
    Z = _mm(Wq, Xq.T)
    A = _act(Z, rp, rn)
    W2 = [_sq(Wq[j]) for j in range(m)]
    H2 = [_sq(Hq[j]) for j in range(m)]
    labels = np.full(m, "alive", dtype=object)
    for j in range(m):
        if H2[j] * _sq(A[j]) <= h_tol2 * Y2:
            labels[j] = "zero"
    alive = [j for j in range(m) if labels[j] == "alive"]
    c2 = Fraction(math.cos(math.radians(copy_deg))) ** 2
    for i in range(m):
        if labels[i] != "zero" or W2[i] == 0 or H2[i] == 0:
            continue
        for a in alive:
            if W2[a] == 0 or H2[a] == 0:
                continue
            dw = sum((Wq[i, t] * Wq[a, t] for t in range(d)), Fraction(0))
            dh = sum((Hq[i, t] * Hq[a, t] for t in range(k)), Fraction(0))
            if dw >= 0 and dh >= 0 and dw * dw >= c2 * W2[i] * W2[a] and dh * dh >= c2 * H2[i] * H2[a]:
                labels[i] = "alive"
                break
    if rn == 0:
        for j in range(m):
            if W2[j] > 0 and all(z < 0 for z in Z[j]):
                labels[j] = "dead"

    # (2) the idealised point and its escape neurons
    Wi, Hi = Wq.copy(), Hq.copy()
    zero = [j for j in range(m) if labels[j] == "zero"]
    for j in zero:
        Hi[j] = [Fraction(0)] * k
    R = _mm(A.T, Hi) - Yq  # zero neurons no longer contribute (A is unchanged: W is)
    secs = _verified_sectors(X, Xq)

    def adjacent(j: int, Wrows: np.ndarray):
        w2 = _sq(Wrows[j])
        if w2 == 0:
            return list(secs), list(range(N))
        z = [sum((Wrows[j, t] * Xq[n, t] for t in range(d)), Fraction(0)) for n in range(N)]
        boundary = [n for n in range(N) if z[n] * z[n] <= b_tol2 * w2 * X2[n]]
        s0 = [(zn > 0) - (zn < 0) for zn in z]
        adj = [S for S in secs if all(S.signs[n] == s0[n] for n in range(N)
                                      if n not in boundary and S.signs[n] != 0)]
        return adj, boundary

    def dvec(signs) -> np.ndarray:
        D = np.full((d, k), Fraction(0), dtype=object)
        for n in range(N):
            slope = rp if signs[n] > 0 else rn
            for t in range(d):
                for o in range(k):
                    D[t, o] += slope * Xq[n, t] * R[n, o]
        return D

    escape, best, sector_norms = [], None, {}
    for j in zero:
        adj, _ = adjacent(j, Wi)
        if not adj:
            continue
        Ds = [dvec(S.signs) for S in adj]
        n2 = [_sq(D) for D in Ds]
        i = max(range(len(adj)), key=lambda t: n2[t])
        sector_norms[int(j)] = math.sqrt(float(n2[i] / scale2))
        if n2[i] > d_tol2 * scale2:
            escape.append(int(j))
            Wi[j] = [Fraction(0)] * d
            if best is None or n2[i] > best[0]:
                best = (n2[i], int(j), adj[i], Ds[i])

    # (3) directional stationarity: g(w_j) = 0 for every neuron, one-sided derivatives >= 0
    Zi = _mm(Wi, Xq.T)
    Ai = _act(Zi, rp, rn)
    G = _mm(Ai, R)
    stationary = all(g * g <= stat_tol2 * scale2 for g in G.ravel())
    gap = math.sqrt(float(max(g * g for g in G.ravel()) / scale2)) if m else 0.0
    memo: dict[tuple, Fraction] = {}
    for j in range(m):
        if labels[j] != "alive":
            continue
        _, boundary = adjacent(j, Wi)
        if k == 1:
            sgn = 1 if Hi[j, 0] > 0 else -1
            key = (tuple((z > 0) - (z < 0) for z in Zi[j]), tuple(boundary), sgn)
            if key not in memo:
                memo[key] = min_directional_exact(_col(R[:, 0], sgn), Xq, Wi[j], boundary, rp, rn)
            mj = abs(Hi[j, 0]) * memo[key]
        else:
            c = np.array([sum((R[n, o] * Hi[j, o] for o in range(k)), Fraction(0)) for n in range(N)],
                         dtype=object)
            mj = min_directional_exact(c, Xq, Wi[j], boundary, rp, rn)
        if mj < 0:
            if mj * mj > stat_tol2 * scale2 * H2[j]:
                stationary = False
            gap = max(gap, math.sqrt(float(mj * mj / (scale2 * H2[j]))))

    def loss_of(Wr, Hr) -> Fraction:
        Rr = _mm(_act(_mm(Xq, Wr.T), rp, rn), Hr) - Yq
        return _sq(Rr) / (N * k)

    loss0 = _sq(R) / (N * k)
    direction = step = drop = None
    if not stationary:
        verdict = "not stationary"
    elif escape:
        verdict = "saddle"
        _, j, S, D = best
        Df = np.array(D, dtype=float)
        col = Df[:, int(np.argmax(np.linalg.norm(Df, axis=0)))]
        col = col / np.linalg.norm(col)
        cands = [c / np.linalg.norm(c) for c in ((1 - t) * S.u + t * col for t in (0.0, 0.1, 0.25, 0.5))]
        inside = []
        for cf in cands:
            cq = _q(cf)
            zs = [sum((cq[t] * Xq[n, t] for t in range(d)), Fraction(0)) for n in range(N)]
            if all(((z > 0) - (z < 0)) == S.signs[n] for n, z in enumerate(zs) if S.signs[n] != 0):
                inside.append(cq)
        u = max(inside, key=lambda cq: _sq(_mm(D.T, cq.reshape(d, 1))))
        gam = _mm(D.T, u.reshape(d, 1)).ravel()
        a2 = _sq(_act(_mm(Xq, Wi[j].reshape(d, 1)), rp, rn)) + _sq(_act(_mm(Xq, u.reshape(d, 1)), rp, rn))
        eta = Fraction(1, 2) / a2
        dW = np.full((m, d), Fraction(0), dtype=object)
        dH = np.full((m, k), Fraction(0), dtype=object)
        dW[j] = u
        dH[j] = [-eta * g for g in gam]
        eps = Fraction(1)
        for _ in range(60):
            d_loss = loss_of(Wi + eps * dW, Hi + eps * dH) - loss0
            if d_loss < 0:
                break
            eps /= 2
        direction = (np.array(dW, dtype=float), np.array(dH, dtype=float))
        step, drop = float(eps), float(d_loss)
        if d_loss >= 0:  # pragma: no cover - would contradict the construction
            verdict = "saddle (descent not verified)"
    elif k == 1:
        verdict = "local minimum"
    else:
        verdict = "no escape neuron"
    ideal = ShallowNet(np.array(Wi, dtype=float), np.array(Hi, dtype=float), net.rho_pos, net.rho_neg)
    return Certificate(verdict, float(loss0), float(gap), labels, escape, sector_norms, direction,
                       step, drop, ideal)


def _col(v: np.ndarray, sgn: int) -> np.ndarray:
    return np.array([sgn * x for x in v], dtype=object)


# -- where the fast path is decided -------------------------------------------------------------------

@dataclass
class Decided:
    """Whether every comparison :func:`~.landscape.certify` made at a point lies farther from its
    threshold than the rounding-error bound of the compared quantity.

    decided : True when all do (then the fast path's verdict must equal the exact one).
    slack : min over the comparisons of |quantity - threshold| / bound (> 1: decided).
    tightest : the comparison with that smallest ratio (``dead``, ``boundary``, ``zero``, ``copy``,
        ``escape``, ``gap``, ``descent``).
    """

    decided: bool
    slack: float
    tightest: str


def float_decided(net: ShallowNet, X: np.ndarray, Y: np.ndarray, *, h_tol: float = 1e-4,
                  b_tol: float = 1e-4, d_tol: float = 1e-3, stat_tol: float = 1e-4,
                  dead_margin: float | None = None, copy_deg: float = 0.5) -> Decided:
    """For each comparison of the fast path at ``net`` (dead-cone membership, kinks, zero neurons,
    split copies, escape neurons, the stationarity gap, the sign of the loss drop), the margin
    |quantity - threshold| against a first-order bound on the quantity's float64 rounding error
    (:func:`~.landscape.gamma` bounds; the LP optimum also gets :data:`LP_TOL` times its
    objective's 1-norm). Chapter 18, notebook ``02-escape-neurons``.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
    m, d = net.W.shape
    N, k = Y.shape
    tols = dict(h_tol=h_tol, b_tol=b_tol, d_tol=d_tol, stat_tol=stat_tol, dead_margin=dead_margin)
    cert = certify(net, X, Y, **tols)
    ratios: list[tuple[float, str]] = []

    def add(q, thr, bound, name):
        q, bound = np.atleast_1d(np.asarray(q, float)), np.atleast_1d(np.asarray(bound, float))
        if q.size:
            r = np.abs(q - thr) / np.maximum(bound, 1e-300)
            i = int(np.argmin(r))
            ratios.append((float(r[i]), name))

    rho = max(abs(net.rho_pos), abs(net.rho_neg))
    Xn = np.linalg.norm(X, axis=1)
    scale = np.linalg.norm(X) * np.linalg.norm(Y)
    e_cw, e_ch = cos_error_bound(d), cos_error_bound(k)

    def cosines(W):
        Wn = np.linalg.norm(W, axis=1)
        return W @ X.T / np.maximum(Wn[:, None] * Xn[None, :], 1e-300), Wn

    # dead-cone membership and kinks, on the point as given
    C, Wn = cosines(net.W)
    if net.rho_neg == 0:
        dm = cos_error_bound(d) if dead_margin is None else dead_margin
        live = Wn > 0
        add(C[live].max(axis=1) if live.any() else [], -dm, e_cw, "dead")
    nd = cert.labels != "dead"
    add(np.abs(C[nd]).ravel(), b_tol, e_cw, "boundary")
    # zero neurons (the contribution ||h_j|| ||sigma(X w_j)|| / ||Y||)
    S = np.abs(net.W) @ np.abs(X).T  # (m, N): sum_a |w_ja x_na|
    act = net.act(X @ net.W.T).T  # (m, N)
    hn = np.linalg.norm(net.H, axis=1)
    an = np.linalg.norm(act, axis=1)
    contrib = hn * an / np.linalg.norm(Y)
    e_contrib = (hn * rho * gamma(d + 1) * np.linalg.norm(S, axis=1) / np.linalg.norm(Y)
                 + gamma(2 * N + k + N * k + 10) * contrib)
    add(contrib, h_tol, e_contrib, "zero")
    # split copies: cos(w_i, w_a) and cos(h_i, h_a) against cos(copy_deg), zero i vs alive a
    z_idx = np.flatnonzero(contrib <= h_tol)
    a_idx = np.flatnonzero(contrib > h_tol)
    if len(z_idx) and len(a_idx):
        def ucos(V):
            Vn = np.linalg.norm(V, axis=1, keepdims=True)
            U = V / np.maximum(Vn, 1e-300)
            return U[z_idx] @ U[a_idx].T
        cw, ch = ucos(net.W), ucos(net.H)
        c0 = math.cos(math.radians(copy_deg))
        sure_true = (cw >= c0 + e_cw) & (ch >= c0 + e_ch)
        sure_false = (cw < c0 - e_cw) | (ch < c0 - e_ch)
        unsure = ~(sure_true | sure_false)
        if unsure.any():
            ratios.append((0.0, "copy"))

    # residuals of the idealised point and their bounds
    ideal = cert.net_ideal
    Zi = X @ ideal.W.T                       # (N, m)
    Si = np.abs(X) @ np.abs(ideal.W).T       # (N, m)
    Ai = ideal.act(Zi)
    R = Ai @ ideal.H - Y                     # (N, k)
    E_R = (rho * gamma(d + 1) * Si) @ np.abs(ideal.H) + gamma(m + 2) * (np.abs(Ai) @ np.abs(ideal.H) + np.abs(Y))

    # escape neurons: ||D_S|| / scale of the sectors next to each zero neuron, against d_tol
    all_sec = _sectors_cached(X)
    qs, es = [], []
    for j in np.flatnonzero(cert.labels == "zero"):
        adj, _ = _adjacent_patterns(net.W[j], X, b_tol, all_sec)
        for Sct in adj:
            sig = np.array(Sct.signs)
            slope = np.where(sig > 0, ideal.rho_pos, ideal.rho_neg)
            D = d_vectors(X, R, sig[None], ideal.rho_pos, ideal.rho_neg)[0]
            E_D = (np.abs(slope)[:, None] * np.abs(X)).T @ (E_R + gamma(N + 2) * np.abs(R))
            nD = np.linalg.norm(D)
            qs.append(nD / scale)
            es.append((np.linalg.norm(E_D) + gamma(d * k + 2) * nD) / scale
                      + gamma(2 * N * (d + k) + 8) * nD / scale)
    add(qs, d_tol, es, "escape")

    # the stationarity gap: |g(w_j)| / scale and the LP optima, against stat_tol
    G = Ai.T @ R                             # (m, k)
    E_G = (np.abs(Ai).T @ E_R + (rho * gamma(d + 1) * Si).T @ np.abs(R)
           + gamma(N + 2) * np.abs(Ai).T @ np.abs(R))
    qg = (np.abs(G) / scale).ravel()
    eg = (E_G / scale + gamma(2 * N * (d + k) + 8) * np.abs(G) / scale).ravel()
    for j in np.flatnonzero(cert.labels == "alive"):
        w = ideal.W[j]
        _, boundary = _adjacent_patterns(w, X, b_tol, all_sec)
        hnj = max(np.linalg.norm(ideal.H[j]), 1e-300)
        c = R @ (ideal.H[j] / hnj)
        e_c = (E_R @ np.abs(ideal.H[j]) + gamma(k + 2) * np.abs(R) @ np.abs(ideal.H[j])) / hnj
        mj = _min_directional(c, X, w, boundary, ideal.rho_pos, ideal.rho_neg)
        a_abs = (np.abs(c)[:, None] * rho * np.abs(X)).sum(axis=0)  # |objective| per coordinate
        e_obj = ((e_c[:, None] * rho * np.abs(X)).sum() + gamma(N + 2) * a_abs.sum()
                 + LP_TOL * a_abs.sum())
        qg = np.append(qg, -mj / scale)
        eg = np.append(eg, e_obj / scale + gamma(8) * abs(mj) / scale)
    over = qg - eg > stat_tol
    under = qg + eg <= stat_tol
    if over.any():
        ratios.append((float("inf"), "gap"))
    elif under.all():
        add(qg, stat_tol, eg, "gap")
    else:
        ratios.append((0.0, "gap"))

    # the sign of the loss drop along the descent direction
    if cert.direction is not None:
        dW, dH = cert.direction
        moved = ShallowNet(ideal.W + cert.step * dW, ideal.H + cert.step * dH, ideal.rho_pos, ideal.rho_neg)

        def loss_bound(nt):
            Zm = X @ nt.W.T
            Am = nt.act(Zm)
            Rm = Am @ nt.H - Y
            ERm = ((rho * gamma(d + 3) * (np.abs(X) @ np.abs(nt.W).T)) @ np.abs(nt.H)
                   + gamma(m + 2) * (np.abs(Am) @ np.abs(nt.H) + np.abs(Y)))
            L = float(np.mean(Rm ** 2))
            return (2 * np.abs(Rm) * ERm).mean() + gamma(N * k + 2) * L

        add(cert.loss_drop, 0.0, loss_bound(moved) + loss_bound(ideal), "descent")

    slack, name = min(ratios) if ratios else (float("inf"), "none")
    return Decided(bool(slack > 1), float(slack), name)
