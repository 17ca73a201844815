"""The mixed-integer encodings of LiCE in SCIP (pyscipopt) (chapter 14, notebooks 01-02).

Three blocks share one model:

* :func:`encode_features` -- the counterfactual's encoded inputs, the change variables
  x = x0 + d+ - d-, one-hot / binary change bits, actionability rules and the inverse-MAD cost;
* :func:`encode_relu_mlp` -- a ReLU MLP with big-M constants from interval arithmetic;
* :func:`encode_spn` -- the SPN's log-likelihood with sum nodes replaced by max: one real
  variable per node, binaries that choose a histogram bin and the tight child of a sum node, and
  a big-M per child derived from node-wise LL bounds (the official code uses the constant 100).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from pyscipopt import Model, quicksum

from .features import DataHandler
from .spn import SPN, Leaf, Product, Sum, VARIANTS

__all__ = ["FeatureVars", "new_model", "set_node_limit", "encode_features", "encode_relu_mlp", "encode_spn",
           "spn_value_at", "mlp_layers"]

EPS_CHANGE = 1e-4   # minimal change that counts as an increase (causal rules)
EPS_BIN = 1e-6      # half-open histogram bins (LiCE.MIO_EPS)


def new_model(time_limit: float | None = None, seed: int = 0, verbose: bool = False,
              presolve: bool = False, separating: str = "fast", node_limit: int | None = None,
              lp_iterlim: int | None = None, heuristics: str = "default") -> Model:
    """A fresh single-threaded SCIP model with a fixed seed (``randomization/randomseedshift``).

    Limits that a result may depend on are deterministic: ``node_limit`` (branch-and-bound nodes,
    ``limits/nodes`` and ``limits/totalnodes``) and ``lp_iterlim`` (simplex iterations per LP
    solve, ``lp/iterlim``). With the same model, settings and SCIP build, a solve returns the
    same solution on any machine and under any load. ``time_limit`` (CPU seconds,
    ``limits/time``) is meant only as a safety net: when it is hit the result depends on the
    machine, and callers record that (status ``"timelimit"``). Presolving is off by default: on
    these models it costs more time than it saves (measured in notebook 14/03's setup).
    ``separating`` ("default", "fast", "off"): SCIP's cutting-plane effort; "fast" cut the median
    solve of LiCE (optimize) on credit with the [20, 10] MLP from 3.6 s to 2.5 s and of MIO from
    1.7 s to 0.4 s (our measurement, chapter 14's rerun). ``heuristics`` ("default",
    "aggressive", "fast", "off"): SCIP's primal-heuristics emphasis; "aggressive" fills the
    solution pool of a 100-node solve (e.g. LiCE (median) on credit: 10 counterfactuals instead of
    1-5) at about the same CPU time (chapter 14, issue 32)."""
    from pyscipopt import SCIP_PARAMSETTING
    settings = {"default": SCIP_PARAMSETTING.DEFAULT, "fast": SCIP_PARAMSETTING.FAST,
                "off": SCIP_PARAMSETTING.OFF}
    if separating not in settings:
        raise ValueError(f"unknown separating {separating!r}; valid: {sorted(settings)}")
    heur = dict(settings, aggressive=SCIP_PARAMSETTING.AGGRESSIVE)
    if heuristics not in heur:
        raise ValueError(f"unknown heuristics {heuristics!r}; valid: {sorted(heur)}")
    m = Model()
    if not verbose:
        m.hideOutput()
    if time_limit is not None:
        if time_limit <= 0:
            raise ValueError(f"time_limit must be positive, got {time_limit}")
        m.setParam("limits/time", float(time_limit))
    set_node_limit(m, node_limit)
    if lp_iterlim is not None:
        if lp_iterlim < 1:
            raise ValueError(f"lp_iterlim must be a positive integer, got {lp_iterlim}")
        m.setParam("lp/iterlim", int(lp_iterlim))
        m.setParam("lp/rootiterlim", int(lp_iterlim))
    m.setParam("randomization/randomseedshift", int(seed))
    m.setParam("parallel/maxnthreads", 1)
    m.setParam("lp/threads", 1)
    m.setParam("numerics/feastol", 1e-7)
    m.setParam("timing/clocktype", 1)  # CPU time for the safety net
    if not presolve:
        m.setParam("presolving/maxrounds", 0)
    if separating != "default":
        m.setSeparating(settings[separating])
    if heuristics != "default":
        m.setHeuristics(heur[heuristics])
    return m


def set_node_limit(m: Model, node_limit: int | None) -> None:
    """Set SCIP's deterministic node limits (``None``: unlimited)."""
    if node_limit is None:
        node_limit = -1
    elif int(node_limit) != node_limit or node_limit < 1:
        raise ValueError(f"node_limit must be a positive integer or None, got {node_limit!r}")
    m.setParam("limits/nodes", int(node_limit))
    m.setParam("limits/totalnodes", int(node_limit))


@dataclass
class FeatureVars:
    """The variables of one counterfactual: ``z`` per encoded column, ``spn_in`` per SPN variable
    (("cont", var) or ("cat", [expressions of the one-hot])), the cost expression, the binaries
    that define the discrete pattern (for no-good cuts) and the column bounds."""

    z: list
    spn_in: list
    cost: Any
    binaries: list = field(default_factory=list)
    lb: np.ndarray | None = None
    ub: np.ndarray | None = None


def encode_features(m: Model, x0_enc: np.ndarray, handler: DataHandler) -> FeatureVars:
    """Add the input encoding of a counterfactual of the encoded factual ``x0_enc`` to ``m``.

    Continuous: x = x0 + d+ - d- with d+ in [0, 1-x0], d- in [0, x0] (d- = 0 when monotone
    increasing, both 0 when immutable); a discrete feature gets an integer shadow k with
    x (hi - lo) + lo = k. Binary and categorical: one-hot bits; a change costs 1/MAD per column
    that moves. Cost = sum of changes / MAD (notebook 14/02)."""
    x0 = np.asarray(x0_enc, dtype=float).ravel()
    if x0.shape != (handler.n_encoded,):
        raise ValueError(f"x0_enc must have {handler.n_encoded} entries, got {x0.shape}")
    if x0.min() < -1e-9 or x0.max() > 1 + 1e-9:
        raise ValueError("the factual lies outside the handler's bounds (encoded values must be in "
                         "[0, 1]); build the DataHandler with bounds that cover it")
    x0 = np.clip(x0, 0.0, 1.0)
    z: list = [None] * handler.n_encoded
    lb, ub = np.zeros(handler.n_encoded), np.ones(handler.n_encoded)
    cost_terms, spn_in, binaries = [], [], []
    up: dict[str, Any] = {}       # expression that is > 0 iff the feature increases
    up_ub: dict[str, float] = {}  # its largest value
    mad = handler.mad

    def continuous(name, c, s, discrete, lo_raw, hi_raw, cap=None):
        v0 = x0[c]
        inc_ok = s.mutable and s.monotone != "decreasing"
        dec_ok = s.mutable and s.monotone != "increasing"
        dp = m.addVar(f"{name}_dp", lb=0.0, ub=(1.0 - v0) if inc_ok else 0.0)
        dm = m.addVar(f"{name}_dm", lb=0.0, ub=v0 if dec_ok else 0.0)
        x = m.addVar(f"{name}_x", lb=0.0 if dec_ok else v0, ub=1.0 if inc_ok else v0)
        m.addCons(x == v0 + dp - dm)
        if discrete:
            k = m.addVar(f"{name}_k", vtype="I", lb=lo_raw, ub=hi_raw)
            m.addCons(x * (hi_raw - lo_raw) + lo_raw == k)
        if cap is not None:
            m.addCons(x <= cap)
        cost_terms.append((dp + dm) * (1.0 / mad[c]))
        lb[c], ub[c] = (0.0 if dec_ok else v0), (1.0 if inc_ok else v0)
        return x, dp

    def onehot(name, cols, s, ordered):
        i0 = int(np.argmax(x0[cols]))
        bits = []
        for j, c in enumerate(cols):
            allowed = s.mutable or j == i0
            if ordered and s.monotone == "increasing" and j < i0:
                allowed = False
            if ordered and s.monotone == "decreasing" and j > i0:
                allowed = False
            o = m.addVar(f"{name}_o{j}", vtype="B", lb=0, ub=1 if allowed else 0)
            bits.append(o)
            binaries.append(o)
            z[c] = o
            ub[c] = 1.0 if allowed else 0.0
            cost_terms.append(((1 - o) if j == i0 else o) * (1.0 / mad[c]))
        m.addCons(quicksum(bits) == 1)
        return bits, i0

    for s in handler.specs:
        info = handler.info[s.name]
        cols = info["cols"]
        if info["kind"] == "cont":
            x, dp = continuous(s.name, cols[0], s, s.discrete, info["lo"], info["hi"])
            z[cols[0]] = x
            spn_in.append(("cont", x))
            up[s.name], up_ub[s.name] = dp, 1.0 - x0[cols[0]]
        elif info["kind"] == "bin":
            b0 = int(round(x0[cols[0]]))
            fixed = (not s.mutable or (s.monotone == "increasing" and b0 == 1)
                     or (s.monotone == "decreasing" and b0 == 0))
            b = m.addVar(f"{s.name}_b", vtype="B", lb=b0 if fixed else 0, ub=b0 if fixed else 1)
            binaries.append(b)
            z[cols[0]] = b
            lb[cols[0]], ub[cols[0]] = (b0, b0) if fixed else (0, 1)
            cost_terms.append((b if b0 == 0 else 1 - b) * (1.0 / mad[cols[0]]))
            spn_in.append(("cat", [1 - b, b]))
            up[s.name], up_ub[s.name] = (b, 1.0) if b0 == 0 else (0.0, 0.0)
        elif info["kind"] == "cat":
            bits, i0 = onehot(s.name, cols, s, s.ordered)
            spn_in.append(("cat", bits))
            up[s.name] = quicksum(bits[i0 + 1:]) if s.ordered else 0.0
            up_ub[s.name] = 1.0 if s.ordered and i0 + 1 < len(bits) else 0.0
        else:  # mixed: one-hot over codes + is_cont, value 0 unless is_cont
            bits, _ = onehot(s.name, cols[1:], s, False)
            x, _ = continuous(s.name, cols[0], s, False, info["lo"], info["hi"], cap=bits[-1])
            z[cols[0]] = x
            spn_in.append(("cat", bits))
            spn_in.append(("cont", x))

    # causal increase: cause goes up => effect goes up (by at least EPS_CHANGE)
    for cause, effect in handler.causal_inc:
        a = m.addVar(f"causal_{cause}_{effect}", vtype="B")
        if up_ub.get(cause, 0.0) > 0:
            m.addCons(up[cause] <= up_ub[cause] * a)
        if up_ub.get(effect, 0.0) > 0:
            m.addCons(up[effect] >= EPS_CHANGE * a)
        else:
            m.chgVarUb(a, 0)
    for a_name, b_name in handler.greater_than:
        ia, ib = handler.info[a_name], handler.info[b_name]
        xa, xb = z[ia["cols"][0]], z[ib["cols"][0]]
        m.addCons(xa * (ia["hi"] - ia["lo"]) + ia["lo"] >= xb * (ib["hi"] - ib["lo"]) + ib["lo"])
    return FeatureVars(z=z, spn_in=spn_in, cost=quicksum(cost_terms), binaries=binaries, lb=lb, ub=ub)


def mlp_layers(mlp) -> list[tuple[np.ndarray, np.ndarray]]:
    """(W, b) of each ``torch.nn.Linear`` of a Sequential ReLU MLP (ReLU between layers)."""
    import torch
    layers = [(l.weight.detach().double().numpy(), l.bias.detach().double().numpy())
              for l in mlp.modules() if isinstance(l, torch.nn.Linear)]
    if not layers:
        raise ValueError("the classifier has no torch.nn.Linear layers")
    return layers


def encode_relu_mlp(m: Model, layers: Sequence[tuple[np.ndarray, np.ndarray]], in_vars: Sequence,
                    lb: np.ndarray, ub: np.ndarray, prefix: str = "nn",
                    onehot_groups: Sequence[Sequence[int]] = ()) -> tuple[Any, tuple[float, float]]:
    """Encode a ReLU MLP (hidden ReLU layers, linear output of size 1) on ``in_vars``.

    Pre-activation bounds [l, u] come from interval arithmetic over the input box [lb, ub]. A
    neuron with u <= 0 is 0, one with l >= 0 is linear, the others get a binary s and the big-M
    constraints h >= a, h <= a - l (1 - s), h <= u s (notebook 14/02). ``onehot_groups`` (input
    columns of which exactly one is 1) tighten the first layer's bounds: such a block adds one of
    its allowed weights, not any subset. Returns the logit expression and its bounds."""
    h = list(in_vars)
    lo, hi = np.asarray(lb, float), np.asarray(ub, float)
    if len(h) != layers[0][0].shape[1]:
        raise ValueError(f"the classifier expects {layers[0][0].shape[1]} inputs, got {len(h)}")
    for li, (W, b) in enumerate(layers):
        Wp, Wn = np.clip(W, 0, None), np.clip(W, None, 0)
        pre_lo = Wp @ lo + Wn @ hi + b
        pre_hi = Wp @ hi + Wn @ lo + b
        if li == 0:
            for g in onehot_groups:
                g = np.asarray(g)
                allowed = g[hi[g] > 0.5]
                if len(allowed) == 0:
                    raise ValueError("a one-hot group has no allowed value")
                pre_lo += W[:, allowed].min(axis=1) - (Wp[:, g] @ lo[g] + Wn[:, g] @ hi[g])
                pre_hi += W[:, allowed].max(axis=1) - (Wp[:, g] @ hi[g] + Wn[:, g] @ lo[g])
        pre = [quicksum(float(W[j, i]) * h[i] for i in range(len(h)) if W[j, i] != 0) + float(b[j])
               for j in range(W.shape[0])]
        if li == len(layers) - 1:
            if W.shape[0] != 1:
                raise ValueError("the classifier must have a single output logit")
            return pre[0], (float(pre_lo[0]), float(pre_hi[0]))
        out = []
        for j in range(W.shape[0]):
            l, u = float(pre_lo[j]), float(pre_hi[j])
            if u <= 0:
                out.append(0.0)
                continue
            y = m.addVar(f"{prefix}{li}_{j}", lb=max(l, 0.0), ub=u)
            if l >= 0:
                m.addCons(y == pre[j])
            else:
                s = m.addVar(f"{prefix}{li}_{j}_on", vtype="B")
                m.addCons(y >= pre[j])
                m.addCons(y <= pre[j] - l * (1 - s))
                m.addCons(y <= u * s)
            out.append(y)
        h = out
        lo, hi = np.maximum(pre_lo, 0), np.maximum(pre_hi, 0)
    raise AssertionError("unreachable")


def encode_spn(m: Model, spn: SPN, spn_in: Sequence, *, sum_approx: str = "lower",
               M_sum: float | None = None, prefix: str = "spn") -> tuple[list, list]:
    """Encode ``spn`` on the inputs ``spn_in`` (("cont", var) or ("cat", one-hot list) or
    ("fixed", category index)). Returns (node LL variables, the histogram-bin binaries).

    Histogram leaf: bin bits b_k, sum b_k = 1, sum b_k br_k <= x <= sum b_k (br_{k+1} - eps),
    l = sum b_k log d_k. Categorical leaf: l = sum_v o_v log p_v. Product: l = sum of children.
    Sum (as max): bits s_c (1 = child not chosen), sum s_c = n - 1,
    l <= l_c + log w_c + M_c s_c with M_c = hi(node) - (log w_c + lo(child)) from node bounds, or
    the constant ``M_sum`` if given. Only upper bounds: the root LL must be pushed up by the
    objective or an LL >= theta constraint. ``sum_approx="upper"`` adds log(#children) to each
    log weight (notebook 14/01)."""
    if sum_approx not in VARIANTS:
        raise ValueError(f"unknown sum_approx {sum_approx!r}; valid: {VARIANTS}")
    if len(spn_in) != spn.n_vars:
        raise ValueError(f"the SPN has {spn.n_vars} variables, got {len(spn_in)} inputs")
    lo, hi = spn.bounds(sum_approx)
    ll: list = []
    bits: list = []
    for node in spn.nodes:
        i = node.id
        v = m.addVar(f"{prefix}_l{i}", lb=float(lo[i]) - 1e-6, ub=float(hi[i]) + 1e-6)
        if isinstance(node, Leaf):
            kind, inp = spn_in[node.var]
            if kind == "fixed":
                m.addCons(v == float(node.logv[int(inp)]))
            elif node.kind == "cat":
                if kind != "cat" or len(inp) != len(node.logv):
                    raise ValueError(f"SPN variable {node.var} needs a one-hot of {len(node.logv)}")
                m.addCons(v == quicksum(float(p) * o for p, o in zip(node.logv, inp)))
            else:
                if kind != "cont":
                    raise ValueError(f"SPN variable {node.var} needs a continuous input")
                K = len(node.logv)
                br = node.breaks
                b = [m.addVar(f"{prefix}_h{i}_{k}", vtype="B") for k in range(K)]
                bits.extend(b)
                m.addCons(quicksum(b) == 1)
                m.addCons(inp >= quicksum(float(br[k]) * b[k] for k in range(K)))
                m.addCons(inp <= quicksum(float(br[k + 1] - (EPS_BIN if k < K - 1 else 0.0)) * b[k]
                                          for k in range(K)))
                m.addCons(v == quicksum(float(node.logv[k]) * b[k] for k in range(K)))
        elif isinstance(node, Product):
            m.addCons(v == quicksum(ll[c] for c in node.children))
        else:
            shift = np.log(len(node.children)) if sum_approx == "upper" else 0.0
            s = [m.addVar(f"{prefix}_s{i}_{c}", vtype="B") for c in node.children]
            m.addCons(quicksum(s) == len(s) - 1)
            for c, lw, sc in zip(node.children, node.log_w, s):
                w = float(lw + shift)
                M = float(M_sum) if M_sum is not None else float(hi[i] - (w + lo[c])) + 1e-6
                m.addCons(v <= ll[c] + w + M * sc)
        ll.append(v)
    return ll, bits


def spn_value_at(spn: SPN, x_spn: np.ndarray, *, sum_approx: str = "lower",
                 M_sum: float | None = None, time_limit: float = 30.0) -> float:
    """Maximise the MIO root LL with the SPN's inputs fixed to ``x_spn`` (one SPN row). Equals
    ``spn.max_approx(x_spn, sum_approx)`` when the encoding is right (notebook 14/01)."""
    x = np.asarray(x_spn, dtype=float).ravel()
    if x.shape != (spn.n_vars,):
        raise ValueError(f"x_spn must have {spn.n_vars} entries, got {x.shape}")
    m = new_model(time_limit)
    m.setParam("numerics/feastol", 1e-9)  # the check is to 1e-6; violations add up over depth
    kinds = {}
    for node in spn.nodes:
        if isinstance(node, Leaf):
            kinds[node.var] = (node.kind, len(node.logv))
    spn_in = []
    for j in range(spn.n_vars):
        kind, n = kinds[j]
        if kind == "cat":
            spn_in.append(("fixed", int(round(x[j]))))
        else:
            v = m.addVar(f"x{j}", lb=float(x[j]), ub=float(x[j]))
            spn_in.append(("cont", v))
    ll, _ = encode_spn(m, spn, spn_in, sum_approx=sum_approx, M_sum=M_sum)
    m.setObjective(ll[-1], "maximize")
    m.optimize()
    if m.getStatus() != "optimal":
        raise RuntimeError(f"SCIP status {m.getStatus()} for the fixed-input SPN model")
    return float(m.getObjVal())
