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
VALIDITY_MARGIN = 1e-4


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
                time_limit: float = 600.0, seed: int = 0, separating: str = "fast") -> Explanation:
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
        True. ``separating``: SCIP's cutting-plane effort (see :func:`~iclr25.lice.mio.new_model`)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; valid: {MODES}")
        if mode != "mio" and self.spn is None:
            raise ValueError(f"mode {mode!r} needs an SPN; only mode 'mio' works without one")
        if mode == "threshold" and theta is None:
            raise ValueError("mode 'threshold' needs theta (e.g. thresholds(spn, S)['median'])")
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
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
                          separating=separating)
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
        build = time.perf_counter() - t0
        rows, stats = [], {"mode": mode, "target": target, "build_time": build, "solve_time": 0.0,
                           "status": [], "optimal": [], "mio_ll": [], "cost": [], "objective": [],
                           "gap": [], "nodes": [], "hit_time_limit": False}
        spent = 0.0  # SCIP CPU seconds over all solves: the safety net ``time_limit`` is for all n
        for k in range(n):
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
            st = m.getStatus()
            spent += m.getSolvingTime()
            stats["solve_time"] = spent
            stats["status"].append(st)
            stats["nodes"].append(int(m.getNTotalNodes()))
            if st == "timelimit":
                stats["hit_time_limit"] = True
            if m.getNSols() == 0:
                break
            sol = m.getBestSol()
            rows.append(np.array([float(m.getSolVal(sol, v)) if not isinstance(v, float) else v
                                  for v in fv.z]))
            stats["optimal"].append(st == "optimal")
            stats["mio_ll"].append(float(m.getSolVal(sol, root)) if root is not None else np.nan)
            stats["cost"].append(float(h.distance(e0, rows[-1])[0]))
            stats["objective"].append(float(m.getSolObjVal(sol)))
            stats["gap"].append(float(m.getGap()))
            if k + 1 < n:
                vals = [round(m.getSolVal(sol, b)) for b in pattern]
                best = stats["objective"][-1]
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
