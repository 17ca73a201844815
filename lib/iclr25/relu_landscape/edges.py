"""The certificate at its edges: tolerance sensitivity, the margins that decide a verdict, and
certificates along a whole run (chapter 18, issue 39).

:func:`~.landscape.certify` turns a numerical point into an idealised stationary point with five
tolerances (which neurons count as zero-output, dead, on a hyperplane, which d-vectors count as
non-zero, how small a stationarity gap must be). A verdict is only as good as the distance between
those tolerances and the quantities they threshold. This module measures both:

- :func:`certificate_margins`: the quantities themselves (the stationarity gap, the weakest and
  strongest escape neuron's ||D_S||, the alive / zero contributions either side of ``h_tol``, the
  near-dead neuron closest to a hyperplane), i.e. where each tolerance would flip a label;
- :func:`tolerance_sweep` and :func:`verdict_flips`: the verdict re-computed while one tolerance at
  a time runs over a grid of decades, and the grid intervals in which it changes;
- :func:`decade_flips`: whether the verdict survives each tolerance moved one decade either way;
- :func:`certify_run`: a certificate at the middle of every plateau of a trajectory and at its end.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from .landscape import certify, cos_error_bound
from .net import ShallowNet

__all__ = ["TOLERANCES", "DEFAULT_TOLERANCES", "default_tolerances", "tolerance_grid",
           "tolerance_sweep", "verdict_flips", "decade_flips", "certificate_margins", "certify_run"]

#: the tolerances of :func:`~.landscape.certify` and their defaults; ``dead_margin`` is derived
#: (``None``: the cosine's rounding-error bound, :func:`~.landscape.cos_error_bound`, ~1.6e-15 for
#: d = 2), see :func:`default_tolerances`
DEFAULT_TOLERANCES = {"h_tol": 1e-4, "b_tol": 1e-4, "d_tol": 1e-3, "stat_tol": 1e-4,
                      "dead_margin": None}
TOLERANCES = tuple(DEFAULT_TOLERANCES)


def default_tolerances(d: int) -> dict[str, float]:
    """:data:`DEFAULT_TOLERANCES` with the derived ``dead_margin`` resolved for inputs of dimension
    ``d``."""
    return {**DEFAULT_TOLERANCES, "dead_margin": cos_error_bound(d)}


def tolerance_grid(lo: int = -12, hi: int = 0, step: int = 1,
                   names: Iterable[str] = TOLERANCES, d: int = 2) -> dict[str, list[float]]:
    """Decades 10^lo .. 10^hi (every ``step``-th) for each tolerance, plus its default value
    (:func:`default_tolerances` for inputs of dimension ``d``)."""
    names = list(names)
    bad = sorted(set(names) - set(TOLERANCES))
    if bad:
        raise ValueError(f"unknown tolerance(s) {', '.join(bad)}; valid: {', '.join(TOLERANCES)}")
    if hi < lo or step < 1:
        raise ValueError(f"need lo <= hi and step >= 1, got lo={lo}, hi={hi}, step={step}")
    decades = [10.0 ** e for e in range(lo, hi + 1, step)]
    defaults = default_tolerances(d)
    return {n: sorted(set(decades) | {defaults[n]}) for n in names}


def tolerance_sweep(net: ShallowNet, X: np.ndarray, Y: np.ndarray,
                    grid: Mapping[str, Iterable[float]] | None = None, **fixed) -> list[dict]:
    """Certify ``net`` once per grid value, varying one tolerance at a time (the others at their
    defaults, or at ``fixed``). Returns one row per call: tolerance, value, verdict, escape neurons,
    stationarity gap and the neuron label counts.

    Introduced in chapter 18, notebook ``02-escape-neurons``.
    """
    grid = tolerance_grid() if grid is None else grid
    bad = sorted((set(grid) | set(fixed)) - set(TOLERANCES))
    if bad:
        raise ValueError(f"unknown tolerance(s) {', '.join(bad)}; valid: {', '.join(TOLERANCES)}")
    rows = []
    defaults = default_tolerances(np.asarray(X).shape[1])
    for name, values in grid.items():
        for v in sorted(values):
            if v <= 0:
                raise ValueError(f"tolerance {name} must be > 0, got {v}")
            kw = {**defaults, **fixed, name: float(v)}
            c = certify(net, X, Y, **kw)
            rows.append({"tolerance": name, "value": float(v), "default": name not in fixed and
                         v == defaults[name], "verdict": c.verdict,
                         "escape": len(c.escape), "gap": c.stationarity_gap,
                         **{lab: int(np.sum(c.labels == lab)) for lab in ("alive", "zero", "dead")}})
    return rows


def verdict_flips(rows: list[dict]) -> list[dict]:
    """Where a sweep's verdict changes: for each tolerance, each pair of neighbouring grid values
    with different verdicts (``below`` is the larger value still giving ``verdict_below``)."""
    out = []
    for name in dict.fromkeys(r["tolerance"] for r in rows):
        rs = sorted((r for r in rows if r["tolerance"] == name), key=lambda r: r["value"])
        for a, b in zip(rs, rs[1:]):
            if a["verdict"] != b["verdict"]:
                out.append({"tolerance": name, "below": a["value"], "above": b["value"],
                            "verdict_below": a["verdict"], "verdict_above": b["verdict"]})
    return out


def decade_flips(net: ShallowNet, X: np.ndarray, Y: np.ndarray, factor: float = 10.0) -> list[dict]:
    """The verdict at the default tolerances, and at each tolerance alone moved to ``default /
    factor`` and ``default * factor``: one row per move that changes the verdict (empty when the
    verdict has a decade of room in every direction).

    Introduced in chapter 18, notebook ``02-escape-neurons``.
    """
    if not factor > 1:
        raise ValueError(f"factor must be > 1, got {factor}")
    defaults = default_tolerances(np.asarray(X).shape[1])
    base = certify(net, X, Y, **defaults).verdict
    out = []
    for name, v0 in defaults.items():
        for v in (v0 / factor, v0 * factor):
            verdict = certify(net, X, Y, **{**defaults, name: v}).verdict
            if verdict != base:
                out.append({"tolerance": name, "default": v0, "value": v,
                            "verdict_default": base, "verdict": verdict})
    return out


def certificate_margins(net: ShallowNet, X: np.ndarray, Y: np.ndarray, **tols) -> dict[str, float]:
    """The data-side quantities each tolerance of :func:`certify` is compared with, at ``net``.

    - ``gap``: the stationarity gap (``stat_tol`` below it gives "not stationary");
    - ``escape_min`` / ``escape_max``: the smallest and largest ||D_S|| / (||X|| ||Y||) over the escape
      neurons (``d_tol`` above ``escape_max`` hides every escape neuron; nan if there is none), and
      ``still_max``: the largest such norm over zero neurons that are not escape neurons;
    - ``alive_contrib_min`` / ``zero_contrib_max``: the smallest relative contribution
      ||h_j|| ||sigma(X w_j)|| / ||Y|| of an alive neuron and the largest of a zero neuron
      (``h_tol`` between them keeps the labels);
    - ``near_dead``: the relative distance -max_n cos(w_j, x_n) of the neuron that is closest to
      leaving the dead cone (``dead_margin`` above it turns that neuron from dead to zero); nan for
      leaky ReLU or when no neuron is (nearly) dead.

    Introduced in chapter 18, notebook ``02-escape-neurons``.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
    kw = {**default_tolerances(X.shape[1]), **tols}
    c = certify(net, X, Y, **kw)
    esc = [c.sector_norms[j] for j in c.escape if j in c.sector_norms]
    still = [v for j, v in c.sector_norms.items() if j not in c.escape]
    contrib = (np.linalg.norm(net.H, axis=1) * np.linalg.norm(net.act(X @ net.W.T), axis=0)
               / max(np.linalg.norm(Y), 1e-300))
    alive, zero = c.labels == "alive", c.labels == "zero"
    near_dead = np.nan
    if net.rho_neg == 0:
        Wn = np.linalg.norm(net.W, axis=1)
        cos = net.W @ X.T / np.maximum(Wn[:, None] * np.linalg.norm(X, axis=1)[None, :], 1e-300)
        top = cos.max(axis=1)
        cand = top[(top < 0) & (Wn > 0)]
        near_dead = float(-cand.max()) if len(cand) else np.nan
    return {"gap": c.stationarity_gap,
            "escape_min": float(min(esc)) if esc else np.nan,
            "escape_max": float(max(esc)) if esc else np.nan,
            "still_max": float(max(still)) if still else np.nan,
            "alive_contrib_min": float(contrib[alive].min()) if alive.any() else np.nan,
            "zero_contrib_max": float(contrib[zero].max()) if zero.any() else np.nan,
            "near_dead": near_dead}


def certify_run(traj, X: np.ndarray, Y: np.ndarray, plateaus, *, exact: bool = False,
                **tols) -> list[dict]:
    """A certificate at the middle of every plateau and at the final point (a plateau that lasts
    until the end of the run is represented by the final point alone).

    ``plateaus`` come from :func:`~.dynamics.find_plateaus`; ``exact=True`` certifies with the
    reference, :func:`~.exact.certify_exact` (which takes no ``dead_margin``). Each row: point,
    step, loss, verdict, escape (count), alive / zero / dead counts, stationarity gap, loss change
    along the certified descent direction (saddles only), the certificate itself (key ``cert``) and
    the network certified (key ``net``).

    Introduced in chapter 18, notebook ``02-escape-neurons``.
    """
    from .exact import certify_exact

    last = int(traj.steps[-1])
    points = [(f"plateau {i + 1}", p.mid, traj.at_step(p.mid)) for i, p in enumerate(plateaus)
              if p.end < last]
    points.append(("final", int(traj.steps[-1]), traj.net))
    rows = []
    for name, step, net in points:
        c = certify_exact(net, X, Y, **tols) if exact else certify(net, X, Y, **tols)
        rows.append({"point": name, "step": step, "loss": c.loss, "verdict": c.verdict,
                     "escape": len(c.escape),
                     **{lab: int(np.sum(c.labels == lab)) for lab in ("alive", "zero", "dead")},
                     "gap": c.stationarity_gap, "loss_drop": c.loss_drop, "cert": c, "net": net})
    return rows
