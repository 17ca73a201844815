"""LiCE: the most likely valid counterfactual within distance, by MIO (chapter 14, notebook 02).

``LiCE(spn, mlp, handler).explain(x0, mode=...)`` builds one SCIP model with the input encoding,
the classifier and (unless ``mode="mio"``) the SPN, and solves

* ``mode="mio"``:       min cost                       (the paper's MIO baseline, no SPN);
* ``mode="threshold"``: min cost  s.t.  l_root >= theta (LiCE median / quartile / sample);
* ``mode="optimize"``:  min cost - alpha l_root          (LiCE optimize, alpha = 0.1);

always with the validity constraint sign * logit >= 1e-4. ``n > 1`` counterfactuals come from
re-solving with a no-good cut on the discrete pattern (category, binary and histogram-bin
choices; not the sum-node choices, which can change without x changing) of each previous
solution -- SCIP has no Gurobi solution pool. So two counterfactuals differ in a category or in
a histogram bin of some feature.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pyscipopt import quicksum

from . import mio
from .features import DataHandler
from .model import predict_logit
from .spn import SPN

__all__ = ["LiCE", "Explanation", "MODES", "thresholds"]

MODES = ("mio", "threshold", "optimize")
COLLECT = ("nogood", "pool")
VALIDITY_MARGIN = 1e-4
START_TOL = 1e-6     # relative: a solution must beat the shared start by this much (issue 65)


@dataclass
class Explanation:
    """Counterfactuals (raw frame, best first), their encodings, and solve statistics."""

    counterfactuals: pd.DataFrame
    encoded: np.ndarray
    stats: dict = field(default_factory=dict)

    @property
    def found(self) -> bool:
        return len(self.counterfactuals) > 0


def thresholds(spn: SPN, S_train: np.ndarray) -> dict[str, float]:
    """The paper's thresholds from training LLs: ``median`` and ``quartile`` (the 25th
    percentile; the official script computes the 0.25th percentile, which we take for a slip)."""
    lls = spn.log_likelihood(S_train)
    return {"median": float(np.median(lls)), "quartile": float(np.quantile(lls, 0.25))}


class LiCE:
    """Likely counterfactual explanations by MIO over an SPN (notebook 14/02).

    Parameters
    ----------
    spn : the SPN learned on the handler's SPN matrix (target last); ``None`` allows only mode "mio".
    mlp : the ReLU MLP classifier on the handler's encoding (one logit).
    handler : the fitted :class:`~iclr25.lice.DataHandler`.
    sum_approx : "lower" (max, the paper) or "upper" (max + log #children).
    M_sum : constant big-M for sum nodes (official: 100); ``None`` derives one per node from bounds.
    """

    def __init__(self, spn: SPN | None, mlp, handler: DataHandler, *, sum_approx: str = "lower",
                 M_sum: float | None = None) -> None:
        if not isinstance(handler, DataHandler):
            raise TypeError("handler must be a DataHandler")
        if spn is not None and spn.n_vars != handler.n_spn:
            raise ValueError(f"the SPN has {spn.n_vars} variables, the handler {handler.n_spn}")
        self.spn, self.mlp, self.handler = spn, mlp, handler
        self.layers = mio.mlp_layers(mlp)
        if self.layers[0][0].shape[1] != handler.n_encoded:
            raise ValueError(f"the classifier reads {self.layers[0][0].shape[1]} inputs, the "
                             f"handler encodes {handler.n_encoded}")
        self.sum_approx, self.M_sum = sum_approx, M_sum

    def explain(self, x0: pd.DataFrame, target: int | None = None, *, mode: str = "optimize",
                alpha: float = 0.1, theta: float | None = None, n: int = 1,
                node_limit: int | None = None, lp_iterlim: int | None = None,
                time_limit: float = 600.0, seed: int = 0, separating: str = "fast",
                collect: str = "nogood", start: pd.DataFrame | None = None,
                heuristics: str = "default") -> Explanation:
        """Counterfactuals for the one-row frame ``x0`` towards class ``target`` (default: the
        class the classifier does not predict). See the module docstring for the modes.

        ``n`` counterfactuals come from ``n`` solves, each adding a no-good cut on the previous
        discrete pattern (and, after an optimal solve, the bound objective >= its optimum).
        The budget is deterministic: ``node_limit`` branch-and-bound nodes for all ``n`` solves
        together (``None``: solve each to optimality; each solve may use what the previous ones
        left, so fewer than ``n`` come back when it runs out), with at most ``lp_iterlim``
        simplex iterations per LP; a solve the limit stops returns its best incumbent
        (``stats["optimal"]`` says which were proven optimal, ``stats["nodes"]`` how many nodes
        each took). The same call gives the same result on any machine and under any load.
        ``time_limit`` (SCIP CPU seconds for all ``n`` solves) is only a safety net; when it
        stops a solve, the result depends on the machine, and ``stats["hit_time_limit"]`` is
        True. ``separating`` and ``heuristics``: SCIP's cutting-plane effort and primal-heuristics
        emphasis (see :func:`~iclr25.lice.mio.new_model`).

        ``collect="pool"`` is the official code's protocol (one Gurobi solve whose solution pool
        holds the ``n`` best): ONE solve within ``node_limit`` nodes, and the ``n`` best distinct
        counterfactuals (distinct decoded inputs, ranked by the program's objective at the decoded
        point, :meth:`value`) among all solutions SCIP found and kept in its solution storage. Unlike Gurobi's ``PoolSearchMode=2`` SCIP does not
        search for the n-th best; it keeps what its heuristics and the tree found on the way.
        ``collect="nogood"``: ``n`` re-solves with no-good cuts, as described above. With a
        ``start``, the pool keeps only solutions strictly better than the start in the program's
        objective (``stats["beat_start"]`` counts them), and the best solution (the start, or
        one as good) when none is: the start is a floor every method gets, not its answer.

        ``start``: a one-row raw frame given to SCIP as a (partial) starting solution on the
        input variables: the rest (ReLU, SPN and change variables) is completed by solving the
        program with the inputs fixed (outside the node budget, ``stats["start_time"]``), and the
        complete solution is handed to SCIP. ``stats["start_accepted"]``: SCIP ended with a
        solution at least as good as the start in this program's objective. See :func:`~iclr25.lice.warm_start`
        for one that every MIO-based method can share."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; valid: {MODES}")
        if mode != "mio" and self.spn is None:
            raise ValueError(f"mode {mode!r} needs an SPN; only mode 'mio' works without one")
        if mode == "threshold" and theta is None:
            raise ValueError("mode 'threshold' needs theta (e.g. thresholds(spn, S)['median'])")
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if collect not in COLLECT:
            raise ValueError(f"unknown collect {collect!r}; valid: {COLLECT}")
        if start is not None and (not isinstance(start, pd.DataFrame) or len(start) != 1):
            raise ValueError("start must be None or a one-row DataFrame of raw features")
        if not isinstance(x0, pd.DataFrame) or len(x0) != 1:
            raise ValueError("x0 must be a one-row DataFrame of raw features")
        h = self.handler
        e0 = h.encode(x0)[0]
        if target is None:
            target = int(predict_logit(self.mlp, e0[None])[0] <= 0)
        if target not in (0, 1):
            raise ValueError(f"target must be 0 or 1, got {target}")
        t0 = time.perf_counter()
        m = mio.new_model(time_limit, seed, node_limit=node_limit, lp_iterlim=lp_iterlim,
                          separating=separating, heuristics=heuristics)
        fv = mio.encode_features(m, e0, h)
        groups = [info["cols"] if info["kind"] == "cat" else info["cols"][1:]
                  for info in h.info.values() if info["kind"] in ("cat", "mixed")]
        logit, _ = mio.encode_relu_mlp(m, self.layers, fv.z, fv.lb, fv.ub, onehot_groups=groups)
        sign = 1.0 if target == 1 else -1.0
        m.addCons(sign * logit >= VALIDITY_MARGIN)
        root = None
        pattern = list(fv.binaries)
        if mode != "mio":
            spn_in = list(fv.spn_in) + [("fixed", target)]
            ll, bits = mio.encode_spn(m, self.spn, spn_in, sum_approx=self.sum_approx, M_sum=self.M_sum)
            root = ll[-1]
            pattern += bits
            if mode == "threshold":
                m.addCons(root >= float(theta))
        obj = fv.cost - float(alpha) * root if mode == "optimize" else fv.cost
        m.setObjective(obj, "minimize")
        e_s, stats_start = None, {"time": 0.0}
        if start is not None:
            e_s = h.encode(start)[0]
            # the start's value in this program: its cost (minus alpha times the SPN's
            # max-approximation there, the root LL the program can reach at that point)
            obj_s = float(h.distance(e0, e_s)[0])
            if mode == "optimize":
                obj_s -= float(alpha) * float(self.spn.max_approx(h.spn_matrix(start, target),
                                                                  self.sum_approx)[0])
            self._add_start(m, fv, e_s, stats_start)
        build = time.perf_counter() - t0
        rows, stats = [], {"mode": mode, "target": target, "build_time": build, "solve_time": 0.0,
                           "start_time": stats_start["time"],
                           "status": [], "optimal": [], "mio_ll": [], "cost": [], "objective": [],
                           "gap": [], "nodes": [], "hit_time_limit": False, "collect": collect,
                           "start_given": start is not None, "start_accepted": None,
                           "n_stored": 0, "beat_start": None}
        if collect == "pool":
            return self._pool(m, fv, root, e0, obj_s if e_s is not None else None, n, node_limit,
                              time_limit, stats, t0, mode, alpha, target)
        stats["round_time"], stats["round_status"] = [], []
        stats["start_objective"] = obj_s if e_s is not None else None
        stats["stopped_at_start"] = False
        # the shared start is a floor: a round whose optimum does not beat it by a relative 1e-6
        # ends the enumeration (near-start solutions are never reported; issue 65)
        floor = None if e_s is None else obj_s - START_TOL * (1.0 + abs(obj_s))
        spent = 0.0  # SCIP CPU seconds over all solves: the safety net ``time_limit`` is for all n
        seen: set = set()
        for k in range(2 * n):  # n distinct points; a round that decodes to a seen point is skipped
            if len(rows) >= n:
                break
            left = time_limit - spent
            if left <= 0.01:
                stats["hit_time_limit"] = True
                break
            if node_limit is not None:
                nodes_left = node_limit - sum(stats["nodes"])
                if nodes_left < 1:
                    break
                mio.set_node_limit(m, nodes_left)
            m.setParam("limits/time", left)
            m.optimize()
            if k == 0:
                stats["start_accepted"] = self._has_start(m, obj_s if e_s is not None else None)
            st = m.getStatus()
            spent += m.getSolvingTime()
            stats["round_time"].append(m.getSolvingTime())
            stats["round_status"].append(st)
            stats["solve_time"] = spent
            stats["status"].append(st)
            stats["nodes"].append(int(m.getNTotalNodes()))
            if st == "timelimit":
                stats["hit_time_limit"] = True
            if m.getNSols() == 0:
                break
            sol = m.getBestSol()
            best = float(m.getSolObjVal(sol))
            if floor is not None and best >= floor:
                stats["stopped_at_start"] = True
                break
            z = np.array([float(m.getSolVal(sol, v)) if not isinstance(v, float) else v for v in fv.z])
            key = tuple(h.encode(h.decode(z[None]))[0].round(6))
            if key not in seen:
                seen.add(key)
                rows.append(z)
                stats["optimal"].append(st == "optimal")
                stats["mio_ll"].append(float(m.getSolVal(sol, root)) if root is not None else np.nan)
                stats["cost"].append(float(h.distance(e0, rows[-1])[0]))
                stats["objective"].append(best)
                stats["gap"].append(float(m.getGap()))
            if len(rows) < n:
                vals = [round(m.getSolVal(sol, b)) for b in pattern]
                m.freeTransform()
                m.addCons(quicksum((1 - b) if v == 1 else b for b, v in zip(pattern, vals)) >= 1)
                if st == "optimal":
                    # the next pattern cannot beat this optimum: a valid bound that lets SCIP stop
                    # as soon as it finds a solution within its gap of it
                    m.addCons(obj >= best - 1e-6 * (1.0 + abs(best)))
        stats["total_time"] = time.perf_counter() - t0
        E = np.array(rows).reshape(-1, h.n_encoded)
        cfs = h.decode(E) if len(E) else pd.DataFrame(columns=h.names)
        return Explanation(cfs, E, stats)

    @staticmethod
    def _add_start(m, fv, e_s, info: dict) -> None:
        """Complete the start: fix the inputs to ``e_s``, solve the (then trivial) program to
        optimality without node limit, restore the inputs' bounds and hand the complete solution
        to SCIP (checked when the solve begins). ``info["time"]``: seconds it took."""
        t0 = time.perf_counter()
        zs = [(v, float(e_s[c])) for c, v in enumerate(fv.z) if not isinstance(v, float)]
        bounds = [(v.getLbOriginal(), v.getUbOriginal()) for v, _ in zs]
        nodes, tnodes = m.getParam("limits/nodes"), m.getParam("limits/totalnodes")
        for v, val in zs:
            val = min(max(val, v.getLbOriginal()), v.getUbOriginal())
            m.chgVarLb(v, val)
            m.chgVarUb(v, val)
        m.setParam("limits/nodes", -1)
        m.setParam("limits/totalnodes", -1)
        m.optimize()
        vals = None
        if m.getNSols() > 0:
            sol = m.getBestSol()
            vals = [(v, float(m.getSolVal(sol, v))) for v in m.getVars()]
        m.freeTransform()
        for (v, _), (lb, ub) in zip(zs, bounds):
            m.chgVarLb(v, lb)
            m.chgVarUb(v, ub)
        m.setParam("limits/nodes", nodes)
        m.setParam("limits/totalnodes", tnodes)
        if vals is not None:
            sol = m.createSol()
            for v, val in vals:
                m.setSolVal(sol, v, val)
            m.addSol(sol)
        info["time"] = time.perf_counter() - t0

    @staticmethod
    def _has_start(m, obj_s) -> bool | None:
        """Whether SCIP ended with a solution at least as good as the start's objective."""
        if obj_s is None:
            return None
        return m.getNSols() > 0 and m.getSolObjVal(m.getBestSol()) <= obj_s + 1e-6 * (1 + abs(obj_s))

    def value(self, x0_enc: np.ndarray, cfs: pd.DataFrame, target: int, mode: str,
              alpha: float = 0.1) -> np.ndarray:
        """The program's objective at decoded counterfactuals ``cfs`` (the best value it can
        give each point): the inverse-MAD cost, minus ``alpha`` times the SPN's
        max-approximation for mode "optimize". A stored solution's own objective can be higher
        (a non-optimal solution may carry slack, e.g. both d+ and d- positive)."""
        v = self.handler.distance(x0_enc, self.handler.encode(cfs))
        if mode == "optimize":
            v = v - float(alpha) * self.spn.max_approx(self.handler.spn_matrix(cfs, target), self.sum_approx)
        return v

    def _pool(self, m, fv, root, e0, obj_s, n, node_limit, time_limit, stats, t0, mode, alpha,
              target) -> Explanation:
        """One solve; the ``n`` best distinct counterfactuals of SCIP's solution storage, ranked
        by the program's objective at the decoded point (:meth:`value`)."""
        h = self.handler
        if node_limit is not None:
            mio.set_node_limit(m, node_limit)
        m.setParam("limits/time", time_limit)
        m.optimize()
        stats["start_accepted"] = self._has_start(m, obj_s)
        st = m.getStatus()
        stats["solve_time"] = m.getSolvingTime()
        stats["hit_time_limit"] = st == "timelimit"
        stats["status"].append(st)
        stats["nodes"].append(int(m.getNTotalNodes()))
        sols = m.getSols()
        stats["n_stored"] = len(sols)
        Z, lls, seen = [], [], set()
        for sol in sols:  # distinct decoded inputs
            z = np.array([float(m.getSolVal(sol, v)) if not isinstance(v, float) else v for v in fv.z])
            cf = h.decode(z[None])
            key = tuple(h.encode(cf)[0].round(6))
            if key in seen:
                continue
            seen.add(key)
            Z.append(z)
            lls.append(float(m.getSolVal(sol, root)) if root is not None else np.nan)
        rows = []
        if Z:
            Z = np.array(Z)
            val = self.value(e0, h.decode(Z), target, mode, alpha)
            order = np.argsort(val, kind="stable")
            if obj_s is not None:
                # the shared start is a floor, not an answer of the method: keep what beats it,
                # and the best point (the start, or one as good) only when nothing does
                tol = 1e-6 * (1 + abs(obj_s))
                better = [k for k in order if val[k] < obj_s - tol]
                stats["beat_start"] = len(better)
                order = better if better else order[:1]
            for j, k in enumerate(order[:n]):
                rows.append(Z[k])
                stats["optimal"].append(st == "optimal" and j == 0)
                stats["mio_ll"].append(lls[k])
                stats["cost"].append(float(h.distance(e0, Z[k])[0]))
                stats["objective"].append(float(val[k]))
                stats["gap"].append(float(m.getGap()))
        stats["total_time"] = time.perf_counter() - t0
        E = np.array(rows).reshape(-1, h.n_encoded)
        cfs = h.decode(E) if len(E) else pd.DataFrame(columns=h.names)
        return Explanation(cfs, E, stats)
