"""Sectors, d-vectors, escape neurons and the local-minimum certificate (paper, Secs. 3-4).

Notation (ours, following the paper's objects). The hyperplanes {w : w . x_n = 0} cut weight space
into open *sectors* (cones) S on which every activation pattern is fixed. For residuals
r_n = f(x_n) - y_n (rows of R, N x k) the *d-vector* of a sector is

    D_S = sum_n sigma'_S(x_n) x_n r_n^T        (d x k; a d-vector when k = 1),

where sigma'_S(x_n) is rho_pos if x_n lies on the positive side of S and rho_neg otherwise, and the
*correlation function* g(w) = sum_n r_n sigma(w . x_n) equals D_S^T w on the closure of S.

At a (directional) stationary point theta, a neuron with zero output weight h_j = 0 is an *escape
neuron* when g is not identically zero next to w_j, i.e. some open sector S adjacent to w_j has
D_S != 0. For such a neuron the straight line

    theta(eps) = theta + eps * v,   v = (dw_j = u, dh_j = -eta * D_S^T u),   u in S,

changes nothing but neuron j, so the loss along it is an exact quadratic in dh_j:
L(eps) - L(0) = (1/(N k)) (-2 eta eps^2 ||D_S^T u||^2 + eta^2 eps^2 ||D_S^T u||^2 ||sigma(X(w_j+eps u))||^2)
< 0 for eta ||sigma(X(w_j + eps u))||^2 < 2: the point is not a local minimum. Conversely the paper's
Theorem 4.2 says a stationary point without escape neurons is a local minimum. :func:`certify`
combines the two: directional stationarity (checked per neuron by small linear programs), then the
escape-neuron test, returning either "local minimum" or "saddle" with a descent direction that has
been followed and verified to lower the loss.

The escape-neuron condition here is our operational reading of the paper's first-order definition,
stated for the scalar-output case in which the paper proves both directions; for k > 1 a point
without escape neurons is reported as such, but not certified as a local minimum.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linprog

from .net import ShallowNet

__all__ = ["Sector", "sectors", "sectors_bruteforce", "d_vectors", "correlation",
           "Certificate", "certify", "perturbation_test", "PerturbationResult",
           "classify_neurons", "gamma", "cos_error_bound", "UNIT_ROUNDOFF"]

#: the unit roundoff of IEEE float64 (round to nearest)
UNIT_ROUNDOFF = 2.0 ** -53


def gamma(n: int) -> float:
    """gamma_n = n u / (1 - n u): the standard bound on the relative rounding error of ``n``
    floating-point operations in sequence (Higham, *Accuracy and Stability of Numerical
    Algorithms*, Sec. 3.1): |fl(sum_i a_i b_i) - sum_i a_i b_i| <= gamma_n sum_i |a_i b_i|."""
    nu = n * UNIT_ROUNDOFF
    if not 0 <= nu < 1:
        raise ValueError(f"gamma_n needs 0 <= n u < 1, got n = {n}")
    return nu / (1 - nu)


def cos_error_bound(d: int) -> float:
    """A bound on |fl(cos(w, x)) - cos(w, x)| for cos = (w . x) / (||w|| ||x||) computed in float64
    as :func:`classify_neurons` computes it (d-term dot product, two norms, a product and a
    quotient): gamma_d sum_a |w_a x_a| / (||w|| ||x||) + gamma_{2d+6} |cos| <= gamma_{3d+8}, since
    sum_a |w_a x_a| <= ||w|| ||x|| and |cos| <= 1. A float cosine beyond it has the sign of the exact
    one. Chapter 18, notebook ``02-escape-neurons``."""
    return gamma(3 * int(d) + 8)


@dataclass(frozen=True)
class Sector:
    """An open sector: its sign pattern (+1 / -1 for each x_n) and an interior unit vector."""

    signs: tuple[int, ...]
    u: np.ndarray = field(compare=False, repr=False)


def _interior_point(A: np.ndarray) -> tuple[float, np.ndarray]:
    """max t s.t. A u >= t, -1 <= u <= 1 (rows of A are sign-adjusted inputs). Returns (t, u)."""
    d = A.shape[1]
    c = np.zeros(d + 1)
    c[-1] = -1.0  # maximise t
    A_ub = np.hstack([-A, np.ones((len(A), 1))])  # t - A u <= 0
    b_ub = np.zeros(len(A))
    bounds = [(-1, 1)] * d + [(None, 1)]
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:
        return -np.inf, np.zeros(d)
    return -res.fun, res.x[:d]


def sectors(X: np.ndarray, tol: float = 1e-9) -> list[Sector]:
    """All open sectors of the arrangement {w : w . x_n = 0}, exactly (incremental LP splitting).

    Hyperplanes are added one at a time; a sector is split in two when both sides of the new
    hyperplane meet it in an open set (an LP finds a strictly interior point). Works for any d
    (the count grows like N^(d-1)); zero rows of ``X`` are ignored. Each sector carries an interior
    unit vector ``u``. Introduced in chapter 18, notebook ``02-escape-neurons``.
    """
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X, axis=1)
    Xn = X / np.where(norms > 0, norms, 1)[:, None]
    rows = [n for n in range(len(X)) if norms[n] > 0]
    regions: list[dict[int, int]] = [{}]
    for n in rows:
        new = []
        for reg in regions:
            for s in (1, -1):
                cand = {**reg, n: s}
                idx = list(cand)
                A = np.array([cand[i] * Xn[i] for i in idx])
                t, _ = _interior_point(A)
                if t > tol:
                    new.append(cand)
        regions = new
    out = []
    for reg in regions:
        signs = tuple(reg.get(n, 0) for n in range(len(X)))
        A = np.array([reg[i] * Xn[i] for i in reg]) if reg else np.zeros((0, X.shape[1]))
        if len(A):
            _, u = _interior_point(A)
        else:
            u = np.eye(X.shape[1])[0]
        out.append(Sector(signs, u / np.linalg.norm(u)))
    return sorted(out, key=lambda s: s.signs, reverse=True)


_SECTOR_CACHE: dict[bytes, list[Sector]] = {}


def _sectors_cached(X: np.ndarray) -> list[Sector]:
    """:func:`sectors` of ``X``, computed once per data set (certify is called many times)."""
    key = np.ascontiguousarray(X, dtype=np.float64).tobytes() + bytes(str(X.shape), "ascii")
    if key not in _SECTOR_CACHE:
        if len(_SECTOR_CACHE) > 64:
            _SECTOR_CACHE.clear()
        _SECTOR_CACHE[key] = sectors(X)
    return _SECTOR_CACHE[key]


def sectors_bruteforce(X: np.ndarray, n_samples: int = 200_000, seed: int = 0) -> set[tuple[int, ...]]:
    """Sign patterns seen on random directions: a check for :func:`sectors` (test oracle)."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((n_samples, X.shape[1]))
    S = np.sign(U @ np.asarray(X, dtype=np.float64).T).astype(int)
    return {tuple(r) for r in S}


def d_vectors(X: np.ndarray, R: np.ndarray, signs: np.ndarray, rho_pos: float = 1.0,
              rho_neg: float = 0.0) -> np.ndarray:
    """D_S = sum_n sigma'_S(x_n) x_n r_n^T for each sign pattern (rows of ``signs``).

    Returns an array of shape (n_sectors, d, k). Introduced in chapter 18, ``02-escape-neurons``.
    """
    signs = np.atleast_2d(signs)
    slope = np.where(signs > 0, rho_pos, rho_neg)  # (S, N)
    R = np.asarray(R, dtype=np.float64).reshape(len(X), -1)
    return np.einsum("sn,nd,nk->sdk", slope, X, R)


def correlation(net: ShallowNet, X: np.ndarray, R: np.ndarray, W: np.ndarray) -> np.ndarray:
    """g(w) = sum_n r_n sigma(w . x_n) for each row of ``W``: shape (len(W), k)."""
    return net.act(np.atleast_2d(W) @ X.T) @ R


def classify_neurons(net: ShallowNet, X: np.ndarray, Y: np.ndarray | None = None, *,
                     h_tol: float = 1e-4, dead_margin: float | None = None,
                     copy_deg: float = 0.5) -> np.ndarray:
    """Label each neuron ``"dead"``, ``"zero"`` or ``"alive"``.

    dead (ReLU only, rho_neg = 0): every input strictly on the negative side of w_j, so a
        neighbourhood of the neuron contributes nothing. The float cosines must lie below
        ``-dead_margin``; the default (``None``) is :func:`cos_error_bound`, the rounding error of
        the cosine itself, so a neuron is dead exactly when its exact cosines are all negative
        (up to cosines within that bound of 0, which stay undecided and count as not dead). A
        hand-chosen margin (the old default 1e-6) moved neurons that sit a hair inside the dead
        cone out of it (chapter 18, issue 60);
    zero: its contribution ||h_j|| ||sigma(X w_j)|| is at most ``h_tol * ||Y||`` (or ``h_tol`` when
        ``Y`` is not given): a neuron still near the origin, idealised to h_j = 0 (a plateau of the
        saddle-to-saddle dynamics is a stationary point in this vanishing-scale limit) -- unless it
        points along an alive neuron (within ``copy_deg`` degrees) with an output weight of the same
        sign: then it is a small split copy of that neuron (Sec. 5) and counts as alive;
    alive: the rest.
    """
    X = np.asarray(X, dtype=np.float64)
    labels = np.full(net.width, "alive", dtype=object)
    contrib = np.linalg.norm(net.H, axis=1) * np.linalg.norm(net.act(X @ net.W.T), axis=0)
    ref = np.linalg.norm(Y) if Y is not None else 1.0
    labels[contrib <= h_tol * ref] = "zero"
    alive = np.flatnonzero(labels == "alive")
    if len(alive):
        Wu = net.W / np.maximum(np.linalg.norm(net.W, axis=1, keepdims=True), 1e-300)
        Hu = net.H / np.maximum(np.linalg.norm(net.H, axis=1, keepdims=True), 1e-300)
        cos_w = Wu @ Wu[alive].T
        cos_h = Hu @ Hu[alive].T
        copy = np.any((cos_w >= np.cos(np.radians(copy_deg))) & (cos_h >= np.cos(np.radians(copy_deg))), axis=1)
        labels[(labels == "zero") & copy] = "alive"
    if net.rho_neg == 0:
        if dead_margin is None:
            dead_margin = cos_error_bound(X.shape[1])
        Wn = np.linalg.norm(net.W, axis=1)
        Z = net.W @ X.T / np.maximum(Wn[:, None] * np.linalg.norm(X, axis=1)[None, :], 1e-300)
        dead = np.all(Z < -dead_margin, axis=1) & (Wn > 0)
        labels[dead] = "dead"
    return labels


def _adjacent_patterns(w: np.ndarray, X: np.ndarray, b_tol: float, all_sectors: list[Sector]
                       ) -> tuple[list[Sector], np.ndarray]:
    """Sectors whose closure contains w (boundary within relative tolerance b_tol), and the boundary set."""
    wn = np.linalg.norm(w)
    if wn == 0:
        return list(all_sectors), np.arange(len(X))
    z = X @ w / (wn * np.maximum(np.linalg.norm(X, axis=1), 1e-300))
    boundary = np.abs(z) <= b_tol
    s0 = np.sign(z).astype(int)
    adj = [S for S in all_sectors
           if all(S.signs[n] == s0[n] for n in range(len(X)) if not boundary[n] and S.signs[n] != 0)]
    return adj, np.flatnonzero(boundary)


def _min_directional(c: np.ndarray, X: np.ndarray, w: np.ndarray, boundary: np.ndarray,
                     rho_pos: float, rho_neg: float) -> float:
    """min over ||u||_inf <= 1 of phi(u) = sum_n c_n sigma'(w.x_n; u.x_n) (one-sided derivative).

    Off the boundary sigma'(w.x_n; t) = slope_n t; on it, rho_pos t for t > 0 and rho_neg t else. The
    minimum is taken over each orthant of boundary signs (a small LP each).
    """
    z = X @ w
    off = np.setdiff1d(np.arange(len(X)), boundary)
    base = (c[off] * np.where(z[off] > 0, rho_pos, rho_neg)) @ X[off] if len(off) else np.zeros(X.shape[1])
    best = np.inf
    B = list(boundary)
    if not B:  # no kink: the minimum of a linear function over the box, in closed form
        return float(-np.abs(base).sum())
    for mask in range(2 ** len(B)):
        s = np.array([1 if (mask >> i) & 1 else -1 for i in range(len(B))])
        a = base.copy()
        for i, n in enumerate(B):
            a += c[n] * (rho_pos if s[i] > 0 else rho_neg) * X[n]
        A_ub = -(s[:, None] * X[B]) if B else None
        res = linprog(a, A_ub=A_ub, b_ub=np.zeros(len(B)) if B else None,
                      bounds=[(-1, 1)] * X.shape[1], method="highs")
        if res.status == 0:
            best = min(best, res.fun)
    return float(best)


@dataclass
class Certificate:
    """What :func:`certify` finds at a point theta.

    verdict : ``"local minimum"``, ``"saddle"`` or ``"not stationary"`` (or ``"no escape neuron"``
        for k > 1, where the paper proves only one direction).
    stationarity_gap : the most negative one-sided directional derivative (per unit inf-norm step) of
        the loss over all neurons, and the largest |dL/dh_j|; ~0 at a stationary point.
    labels : per-neuron ``alive`` / ``zero`` / ``dead``.
    escape : indices of escape neurons.
    direction : (dW, dH) of a verified descent direction (saddle only), acting on ``net_ideal``.
    step, loss_drop : the step length eps tried and L(theta + eps v) - L(theta) (< 0).
    net_ideal : the point certified: theta with h_j = 0 for zero neurons, and w_j = 0 too for the
        escape neurons among them.
    """

    verdict: str
    loss: float
    stationarity_gap: float
    labels: np.ndarray
    escape: list[int]
    sector_norms: dict
    direction: tuple[np.ndarray, np.ndarray] | None
    step: float | None
    loss_drop: float | None
    net_ideal: ShallowNet

    @property
    def is_local_min(self) -> bool:
        return self.verdict == "local minimum"

    def summary(self) -> str:
        counts = {lab: int(np.sum(self.labels == lab)) for lab in ("alive", "zero", "dead")}
        s = (f"{self.verdict}: loss {self.loss:.6g}, stationarity gap {self.stationarity_gap:.2e}, "
             f"neurons {counts}, escape neurons {len(self.escape)}")
        if self.loss_drop is not None:
            s += f", loss drop {self.loss_drop:.3e} along the descent direction (eps={self.step:.2g})"
        return s


def certify(net: ShallowNet, X: np.ndarray, Y: np.ndarray, *, h_tol: float = 1e-4,
            b_tol: float = 1e-4, d_tol: float = 1e-3, stat_tol: float = 1e-4,
            dead_margin: float | None = None) -> Certificate:
    """Certify a (near-)stationary point: local minimum, or saddle with a descent direction.

    Steps: (1) label neurons (:func:`classify_neurons`) and set h_j = 0 for zero ones; (2) for each
    zero neuron, compute D_S of the sectors next to w_j; ``||D_S|| > d_tol`` makes it an escape
    neuron, idealised to w_j = 0; (3) check directional stationarity of every neuron
    (``stationarity_gap <= stat_tol``); (4) for an escape neuron build the direction v of the module docstring and
    verify the loss drops along it. Tolerances are relative: ``b_tol`` to the angle between w_j and
    a hyperplane, ``d_tol`` and ``stat_tol`` to ``||X|| ||Y||``. ``h_tol``, ``b_tol``, ``d_tol``
    and ``stat_tol`` define the idealised point (a plateau is a stationary point only in the
    vanishing-initialisation limit); dead-cone membership needs no tolerance: ``dead_margin=None``
    decides it up to the cosine's own rounding error (:func:`classify_neurons`).

    This is the fast path: float64 arithmetic and LPs. The reference,
    :func:`~iclr25.relu_landscape.exact.certify_exact`, evaluates the same rules in exact rational
    arithmetic; the two agree wherever this one's margins exceed their rounding-error bounds
    (:func:`~iclr25.relu_landscape.exact.float_decided`).

    Introduced in chapter 18, notebook ``02-escape-neurons``.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
    labels = classify_neurons(net, X, Y, h_tol=h_tol, dead_margin=dead_margin)
    ideal = net.copy()
    zero = labels == "zero"
    ideal.H[zero] = 0.0
    R = ideal.residuals(X, Y)  # zero neurons no longer contribute
    N, k = R.shape
    scale = max(np.linalg.norm(X) * np.linalg.norm(Y), 1e-300)  # relative to the data
    all_sec = _sectors_cached(X)

    # (2) escape neurons: zero neurons with a nonzero D_S in a sector next to w_j. Such a neuron is
    # idealised to w_j = 0 (the vanishing-scale limit in which a plateau is a stationary point; the
    # sectors next to w_j stay next to 0). A zero neuron with D_S = 0 all around keeps its w_j.
    escape, best = [], None
    sector_norms = {}
    for j in np.flatnonzero(zero):
        adj, _ = _adjacent_patterns(ideal.W[j], X, b_tol, all_sec)
        if not adj:
            continue
        D = d_vectors(X, R, np.array([S.signs for S in adj]), ideal.rho_pos, ideal.rho_neg)
        norms = np.linalg.norm(D.reshape(len(adj), -1), axis=1) / scale
        sector_norms[int(j)] = float(norms.max())
        if norms.max() > d_tol:
            escape.append(int(j))
            ideal.W[j] = 0.0
            i = int(np.argmax(norms))
            cand = (norms[i], int(j), adj[i], D[i])
            if best is None or cand[0] > best[0]:
                best = cand

    # (3) directional stationarity, per neuron (the loss derivative is separable over neurons):
    # dL/dh_j = (2/(N k)) g(w_j) must vanish, and the one-sided derivative in w_j must be >= 0
    G = correlation(ideal, X, R, ideal.W)
    gap = float(np.max(np.abs(G))) / scale if len(G) else 0.0
    # For k = 1 the derivative is linear in h_j, so neurons with the same activation pattern, the
    # same kinks and the same sign of h_j share one LP (a direction group is solved once).
    memo: dict[tuple, float] = {}
    for j in np.flatnonzero(labels == "alive"):
        w = ideal.W[j]
        _, boundary = _adjacent_patterns(w, X, b_tol, all_sec)
        hn = max(np.linalg.norm(ideal.H[j]), 1e-300)
        if k == 1:
            key = (tuple(np.sign(X @ w).astype(int)), tuple(boundary), bool(ideal.H[j, 0] > 0))
            if key not in memo:
                c = R @ (ideal.H[j] / hn)
                memo[key] = _min_directional(c, X, w, boundary, ideal.rho_pos, ideal.rho_neg)
            m = memo[key] * hn
        else:
            c = R @ ideal.H[j]  # c_n = r_n . h_j
            m = _min_directional(c, X, w, boundary, ideal.rho_pos, ideal.rho_neg)
        gap = max(gap, -m / (scale * hn))

    loss0 = ideal.loss(X, Y)
    direction = step = drop = None
    if gap > stat_tol:
        verdict = "not stationary"
    elif escape:
        verdict = "saddle"
        _, j, S, D = best
        w = ideal.W[j]
        # a direction u inside S with the largest ||D^T u||: S's interior point, moved part of the
        # way towards D's dominant column as far as S allows
        col = D[:, int(np.argmax(np.linalg.norm(D, axis=0)))]
        col = col / np.linalg.norm(col)
        inside = [c / np.linalg.norm(c) for c in ((1 - t) * S.u + t * col for t in (0.0, 0.1, 0.25, 0.5))
                  if all(np.sign(X[n] @ c) == S.signs[n] for n in range(len(X)) if S.signs[n] != 0)]
        u = max(inside, key=lambda c: np.linalg.norm(D.T @ c))
        gamma = D.T @ u
        a2 = np.sum(ideal.act(X @ w) ** 2) + np.sum(ideal.act(X @ u) ** 2)
        eta = 0.5 / max(a2, 1e-300)
        dW = np.zeros_like(ideal.W); dH = np.zeros_like(ideal.H)
        dW[j] = u
        dH[j] = -eta * gamma
        # the largest eps <= 1 (halving) that keeps w_j + eps u in S's closure and lowers the loss
        eps = 1.0
        for _ in range(60):
            moved = ShallowNet(ideal.W + eps * dW, ideal.H + eps * dH, ideal.rho_pos, ideal.rho_neg)
            d_loss = moved.loss(X, Y) - loss0
            if d_loss < 0:
                break
            eps /= 2
        direction, step, drop = (dW, dH), eps, d_loss
        if drop >= 0:  # pragma: no cover - would contradict the construction
            verdict = "saddle (descent not verified)"
    elif k == 1:
        verdict = "local minimum"
    else:
        verdict = "no escape neuron"
    return Certificate(verdict, loss0, float(gap), labels, escape, sector_norms, direction, step,
                       drop, ideal)


@dataclass
class PerturbationResult:
    """The paper's numerical test (Fig. 10): loss changes under random perturbations."""

    amplitude: float
    loss_changes: np.ndarray

    @property
    def min_change(self) -> float:
        return float(self.loss_changes.min())

    @property
    def n_descents(self) -> int:
        return int(np.sum(self.loss_changes < 0))


def perturbation_test(net: ShallowNet, X: np.ndarray, Y: np.ndarray, *, n: int = 5000,
                      amplitude: float | None = None, exclude: np.ndarray | None = None,
                      seed: int = 0, max_amplitude: float = 1.0,
                      cumulative: bool = False) -> PerturbationResult:
    """Perturb all (non-excluded) parameters by i.i.d. U(-a, a) noise ``n`` times, record L change.

    As in the paper's Fig. 10: ``a`` = min |parameter| over the neurons not excluded, divided by 10,
    capped at ``max_amplitude``; excluded (dead) neurons are not perturbed. By default each
    perturbation starts from ``net``. ``cumulative=True`` reproduces the official helper, which adds
    each perturbation to the already perturbed network (a random walk of ``n`` steps) and reports
    the loss change from ``net`` at every step. Vectorised over the ``n`` samples.
    Introduced in chapter 18, notebook ``02-escape-neurons``.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    keep = np.ones(net.width, bool) if exclude is None else ~np.asarray(exclude, bool)
    if keep.shape != (net.width,):
        raise ValueError(f"exclude must have one entry per neuron ({net.width}), got {keep.shape}")
    if amplitude is None:
        vals = np.abs(np.concatenate([net.W[keep].ravel(), net.H[keep].ravel()]))
        amplitude = min(max_amplitude, float(vals.min()) / 10) if len(vals) else max_amplitude
    if not amplitude > 0:
        raise ValueError(f"amplitude must be > 0, got {amplitude}")
    rng = np.random.default_rng(seed)
    base = net.loss(X, Y)
    changes = np.empty(n)
    batch = 1000
    offW, offH = np.zeros_like(net.W), np.zeros_like(net.H)  # the walk so far (cumulative)
    for i0 in range(0, n, batch):
        b = min(batch, n - i0)
        dW = rng.uniform(-amplitude, amplitude, (b,) + net.W.shape) * keep[None, :, None]
        dH = rng.uniform(-amplitude, amplitude, (b,) + net.H.shape) * keep[None, :, None]
        if cumulative:
            dW = offW + np.cumsum(dW, axis=0)
            dH = offH + np.cumsum(dH, axis=0)
            offW, offH = dW[-1], dH[-1]
        Wp, Hp = net.W[None] + dW, net.H[None] + dH
        Z = np.einsum("nd,bmd->bnm", X, Wp)
        A = np.where(Z > 0, net.rho_pos * Z, net.rho_neg * Z)
        F = np.einsum("bnm,bmk->bnk", A, Hp)
        changes[i0:i0 + b] = np.mean((F - Y[None]) ** 2, axis=(1, 2)) - base
    return PerturbationResult(float(amplitude), changes)
