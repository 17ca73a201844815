"""Logic-Logit (Zhang, Ren & Li, ICLR 2025), as we reconstruct it: a mixture of preference types,
each an OR of AND-rules over predicates, fit by Frank-Wolfe over the mixing distribution with
column generation over rules.

Model (our reading; no official code exists). A type ``theta`` holds rules ``r_1..r_L`` (each a
conjunction of predicates) with weights ``w_l >= 0``; an item's utility is
``u_theta(x) = sum_l w_l r_l(x)`` (a soft OR: passing any rule makes an item more attractive) and

    P(j | S, theta) = exp u_theta(x_j) / sum_{s in S} exp u_theta(x_s)            (type logit)
    P(j | S)        = sum_k alpha_k P(j | S, theta_k),  alpha in the simplex      (mixture)

Estimation. The mean negative log-likelihood ``NLL(p) = -(1/n) sum_i log p_i`` is convex in the
vector ``p`` of chosen-item probabilities, so Frank-Wolfe applies over the convex hull of types:

1. support finding: ``theta* = argmax_theta (1/n) sum_i P_i(theta) / p_i`` (the linear minimisation
   step, since ``dNLL/dp_i = -1/(n p_i)``); the duality gap is ``F(theta*) - 1``;
2. fully corrective proportions: ``alpha = argmin_{alpha in simplex} NLL`` over all types found.

Support finding is combinatorial. It is solved greedily by column generation: start from an empty
rule set and repeatedly add the conjunction that most improves the support objective (beam search
over conjunctions up to ``max_len`` predicates, each scored with its best single weight on a grid,
:mod:`iclr25.logic_logit.scoring`), then refit all weights of the type by bounded L-BFGS.
After Frank-Wolfe, optional EM rounds refit each type's weights and the proportions jointly
(the rule structure stays fixed); EM never increases the NLL.

Introduced in ``01-logic-logit/01-consider-then-choose``; the solver is shown in
``02-inside-the-solver``.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from ..progress import progress
from .base import ChoiceModel, fit_mixture_weights, softmax
from .data import ChoiceData
from .predicates import PredicateLibrary, jaccard
from .scoring import BACKENDS, default_backend, pack_predicates, score_bits, score_rules

__all__ = ["LogicLogit", "LogicType", "match_rules"]


@dataclass
class LogicType:
    """One preference type: rules (predicate-index sets) and their weights."""

    rules: list = field(default_factory=list)
    weights: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def features(self, P: np.ndarray) -> np.ndarray:
        """``R[n, J, L]``: rule indicators of each item (float)."""
        if not self.rules:
            return np.zeros(P.shape[:2] + (0,))
        return np.stack([P[..., sorted(r)].all(-1) for r in self.rules], -1).astype(float)

    def utilities(self, P: np.ndarray) -> np.ndarray:
        R = self.features(P)
        return R @ self.weights if self.rules else np.zeros(P.shape[:2])


class LogicLogit(ChoiceModel):
    """Logic-Logit: a mixture of rule-based preference types (chapter 01).

    Parameters
    ----------
    max_types : most rule types Frank-Wolfe adds (the paper's number of types).
    max_rules : most rules per type (R; the interpretability budget).
    max_len : most predicates per rule (rule length cap).
    beam_width : conjunctions kept per level of the beam search.
    fw_iters : Frank-Wolfe iterations (default ``max_types``).
    refine_iters : EM rounds after Frank-Wolfe (0: none).
    n_bins : quantile bins per numeric feature when ``library`` is not given.
    library : a :class:`PredicateLibrary` (default: :meth:`PredicateLibrary.from_data` on the
        training data with ``n_bins``).
    w_max : upper bound of rule weights (weights lie in ``[0, w_max]``).
    n_grid : grid size for a candidate's weight.
    min_gain : stop adding rules to a type when the support objective improves by less.
    tol : stop Frank-Wolfe when the duality gap falls below ``tol``.
    prune : a rule one predicate longer replaces the best shorter rule only if it raises the
        support objective's gain by more than this share (parsimony; 0 keeps the raw best).
    backend : candidate scoring path, ``"numba"``, ``"numpy"`` or ``"reference"``
        (:func:`score_rules`; default :func:`default_backend`).
    """

    def __init__(self, max_types: int = 4, max_rules: int = 3, max_len: int = 3,
                 beam_width: int = 10, fw_iters: int | None = None, refine_iters: int = 5,
                 n_bins: int = 4, library: PredicateLibrary | None = None, w_max: float = 6.0,
                 n_grid: int = 13, min_gain: float = 1e-3, tol: float = 1e-4, prune: float = 0.02,
                 backend: str | None = None, show_progress: bool = False):
        checks = {"max_types": max_types, "max_rules": max_rules, "max_len": max_len,
                  "beam_width": beam_width, "n_bins": n_bins, "n_grid": n_grid}
        for k, v in checks.items():
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{k} must be a positive integer, got {v!r}")
        if fw_iters is not None and fw_iters < 1:
            raise ValueError(f"fw_iters must be a positive integer, got {fw_iters!r}")
        if refine_iters < 0:
            raise ValueError(f"refine_iters must be >= 0, got {refine_iters}")
        if not w_max > 0:
            raise ValueError(f"w_max must be > 0, got {w_max}")
        if backend is not None and backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
        self.max_types, self.max_rules, self.max_len, self.beam_width = (
            max_types, max_rules, max_len, beam_width)
        self.fw_iters = fw_iters
        self.refine_iters, self.n_bins, self.library = refine_iters, n_bins, library
        if prune < 0:
            raise ValueError(f"prune must be >= 0, got {prune}")
        self.w_max, self.n_grid, self.min_gain, self.tol = w_max, n_grid, min_gain, tol
        self.prune = prune
        self.backend, self.show_progress = backend, show_progress

    # ------------------------------------------------------------------ support objective
    def _refit_weights(self, R, mask, choice, coef, w0):
        """max_w sum_i coef_i P_i(w) with P the type logit on rule indicators R[n, J, L];
        coef = inv_p / n in support finding."""
        n = R.shape[0]
        idx = np.arange(n)

        def f(w):
            S = softmax(R @ w, mask)
            Pi = S[idx, choice]
            grad = (coef * Pi)[:, None] * (R[idx, choice] - np.einsum("nj,njl->nl", S, R))
            return -np.sum(coef * Pi), -grad.sum(0)

        res = minimize(f, w0, jac=True, method="L-BFGS-B", bounds=[(0.0, self.w_max)] * len(w0),
                       options={"maxiter": 200})
        return res.x if res.fun <= f(w0)[0] else w0

    def _beam_search(self, P, packed, S, choice, inv_p, existing):
        """Best conjunction to add to a type with within-type probabilities S (beam search)."""
        n, J, M = P.shape
        grid = np.linspace(0.0, self.w_max, self.n_grid)[1:]
        F0 = float(np.sum(inv_p * S[np.arange(n), choice]) / n)
        seen = {np.bitwise_and.reduce(packed[sorted(r)], axis=0).tobytes() for r in existing}
        best = (F0, None, 0.0)
        beam_rules = [()]
        beam_bits = [np.full(packed.shape[1], 255, np.uint8)]
        n_scored = 0
        for depth in range(self.max_len):
            rules, bits = [], []
            for r, b in zip(beam_rules, beam_bits):
                child = b[None, :] & packed                   # AND with every predicate
                for m in range(M):
                    if m in r:
                        continue
                    key = child[m].tobytes()
                    if key in seen or not child[m].any():
                        continue
                    seen.add(key)
                    rule = r + (m,)
                    # drop predicates the others imply (keep every rule in a minimal form)
                    for p in r:
                        rest = [q for q in rule if q != p]
                        if np.array_equal(np.bitwise_and.reduce(packed[rest], axis=0), child[m]):
                            rule = tuple(rest)
                    rules.append(tuple(sorted(rule)))
                    bits.append(child[m])
            if not rules:
                break
            backend = self.backend or default_backend()
            if backend != "reference":
                F, w = score_bits(np.stack(bits), S, choice, inv_p, grid, backend)
            else:
                F, w = score_rules(rules, P, S, choice, inv_p, grid, backend="reference")
            n_scored += len(rules)
            k = int(np.argmax(F))
            # a longer rule must beat the best shorter one by a share `prune` of its gain
            margin = 1e-12 if best[1] is None else self.prune * (best[0] - F0)
            if F[k] > best[0] + margin:
                best = (float(F[k]), frozenset(rules[k]), float(w[k]))
            order = np.argsort(-F, kind="stable")[: self.beam_width]
            beam_rules = [rules[i] for i in order]
            beam_bits = [bits[i] for i in order]
        return best[1], best[0] - F0, best[2], n_scored

    def _column_generate(self, P, packed, mask, choice, inv_p):
        """Greedy support finding: a new type built rule by rule."""
        n = P.shape[0]
        theta = LogicType()
        U = np.zeros(mask.shape)
        n_scored = 0
        for _ in range(self.max_rules):
            S = softmax(U, mask)
            rule, gain, w, k = self._beam_search(P, packed, S, choice, inv_p, theta.rules)
            n_scored += k
            if rule is None or gain < self.min_gain:
                break
            theta.rules.append(rule)
            R = theta.features(P)
            theta.weights = self._refit_weights(R, mask, choice, inv_p / n,
                                                np.append(theta.weights, w))
            U = R @ theta.weights
        S = softmax(U, mask)
        F = float(np.mean(inv_p * S[np.arange(n), choice]))
        return theta, F, n_scored

    # ------------------------------------------------------------------ fit / predict
    def fit(self, data: ChoiceData) -> "LogicLogit":
        """Frank-Wolfe with column generation, then EM refinement; fills ``types_``, ``alphas_``,
        ``history_`` (one row per iteration: phase, nll, gap, n_types, candidates, seconds)."""
        data = self._check_data(data)
        t_start = time.perf_counter()
        lib = self.library if self.library is not None else PredicateLibrary.from_data(data, self.n_bins)
        self.library_ = lib
        P = lib.evaluate(data)
        packed = pack_predicates(P)
        n, mask, choice = data.n_obs, data.mask, data.choice
        idx = np.arange(n)
        # theta_0: the empty type (uniform choice over the offer set) so that p_i > 0 from the start
        types = [LogicType()]
        Pch = softmax(np.zeros(mask.shape), mask)[idx, choice][:, None]
        alpha = np.ones(1)
        nll = float(-np.mean(np.log(Pch @ alpha)))
        hist = [{"phase": "init", "iter": 0, "nll": nll, "gap": np.nan, "n_types": 1,
                 "candidates": 0, "seconds": time.perf_counter() - t_start}]
        n_fw = self.fw_iters if self.fw_iters is not None else self.max_types
        bar = progress(total=n_fw, desc="Frank-Wolfe") if self.show_progress else None
        for it in range(1, n_fw + 1):
            if len(types) - 1 >= self.max_types:
                break
            inv_p = 1.0 / (Pch @ alpha)
            theta, F, n_scored = self._column_generate(P, packed, mask, choice, inv_p)
            gap = F - 1.0                                      # FW duality gap (heuristic oracle)
            hist[-1]["gap"] = gap
            if bar is not None:
                bar.update(1)
            if not theta.rules or gap < self.tol:
                hist[-1]["candidates_next"] = n_scored
                break
            types.append(theta)
            Pnew = softmax(theta.utilities(P), mask)[idx, choice]
            Pch = np.column_stack([Pch, Pnew])
            a_old = np.append(alpha, 0.0)
            a_new = fit_mixture_weights(Pch, 0.5 * a_old + 0.5 * np.eye(len(a_old))[-1])
            nll_new = float(-np.mean(np.log(Pch @ a_new)))
            alpha = a_new if nll_new <= nll else a_old             # safeguard: never increase
            nll = min(nll, nll_new)
            hist.append({"phase": "frank-wolfe", "iter": it, "nll": nll, "gap": np.nan,
                         "n_types": len(types), "candidates": n_scored,
                         "seconds": time.perf_counter() - t_start})
        if bar is not None:
            bar.close()
        # EM refinement of weights and proportions (rule structure fixed)
        for it in range(1, self.refine_iters + 1):
            joint = Pch * alpha
            resp = joint / joint.sum(1, keepdims=True)
            new_types = [types[0]]
            for k in range(1, len(types)):
                th = types[k]
                R = th.features(P)
                w = self._refit_em(R, mask, choice, resp[:, k], th.weights)
                new_types.append(LogicType(list(th.rules), w))
            Pc = np.column_stack([softmax(t.utilities(P), mask)[idx, choice] for t in new_types])
            a_new = resp.mean(0)
            nll_new = float(-np.mean(np.log(Pc @ a_new)))
            if nll_new > nll:        # cannot happen for exact EM; guard against optimiser noise
                break
            improvement = nll - nll_new
            types, Pch, alpha, nll = new_types, Pc, a_new, nll_new
            hist.append({"phase": "refine", "iter": it, "nll": nll, "gap": np.nan,
                         "n_types": len(types), "candidates": 0,
                         "seconds": time.perf_counter() - t_start})
            if improvement < 1e-7:
                break
        keep = alpha > 1e-8
        self.types_ = [t for t, k in zip(types, keep) if k]
        self.alphas_ = alpha[keep] / alpha[keep].sum()
        self.history_ = hist
        self.n_candidates_ = int(sum(h.get("candidates", 0) + h.get("candidates_next", 0) for h in hist))
        self.fit_seconds_ = time.perf_counter() - t_start
        self.fitted_ = True
        self._warn_capped()
        return self

    def _warn_capped(self) -> None:
        """Weights at ``w_max`` mean the bound, not the data, set them: say which and what to do."""
        capped = [(k, r) for k, t in enumerate(self.types_) for r, w in zip(t.rules, t.weights)
                  if w >= self.w_max * (1 - 1e-6)]
        if capped:
            names = "; ".join(f"type {k}: {self.library_.rule_str(r)}" for k, r in capped[:5])
            warnings.warn(f"{len(capped)} rule weight(s) sit at the bound w_max = {self.w_max:g} "
                          f"({names}{'; ...' if len(capped) > 5 else ''}): the fit wants larger "
                          "weights (a near-deterministic rule); refit with a larger w_max to "
                          "see them", UserWarning, stacklevel=3)

    def _refit_em(self, R, mask, choice, r, w0):
        """M-step: max_w sum_i r_i log P_i(w), bounded L-BFGS from the current weights."""
        n = R.shape[0]
        idx = np.arange(n)
        rs = r.sum() + 1e-300

        def f(w):
            U = R @ w
            S = softmax(U, mask)
            lp = np.log(np.maximum(S[idx, choice], 1e-300))
            grad = r[:, None] * (R[idx, choice] - np.einsum("nj,njl->nl", S, R))
            return -(r * lp).sum() / rs, -grad.sum(0) / rs

        res = minimize(f, w0, jac=True, method="L-BFGS-B", bounds=[(0.0, self.w_max)] * len(w0),
                       options={"maxiter": 200})
        return res.x if res.fun <= f(w0)[0] else w0

    def predict_proba(self, data: ChoiceData) -> np.ndarray:
        """``P(j | S_i) = sum_k alpha_k P(j | S_i, theta_k)``, ``[n_obs, max_items]``."""
        self._check_fitted()
        data = self._check_data(data)
        P = self.library_.evaluate(data)
        return sum(a * softmax(t.utilities(P), data.mask) for a, t in zip(self.alphas_, self.types_))

    def rules_table(self):
        """The learned types as a table: type, alpha, rule (readable), weight."""
        import pandas as pd

        self._check_fitted()
        rows = []
        for k, (a, t) in enumerate(zip(self.alphas_, self.types_)):
            if not t.rules:
                rows.append({"type": k, "alpha": a, "rule": "(uniform: no rule)", "weight": 0.0})
            for r, w in zip(t.rules, t.weights):
                rows.append({"type": k, "alpha": a, "rule": self.library_.rule_str(r), "weight": w})
        return pd.DataFrame(rows, columns=["type", "alpha", "rule", "weight"])

    def __str__(self) -> str:
        if not getattr(self, "fitted_", False):
            return "LogicLogit (not fitted)"
        lines = []
        for k, (a, t) in enumerate(zip(self.alphas_, self.types_)):
            body = " OR ".join(f"[{self.library_.rule_str(r)}] (w={w:.2f})"
                               for r, w in zip(t.rules, t.weights)) or "uniform"
            lines.append(f"type {k} (alpha={a:.3f}): {body}")
        return "\n".join(lines)


def match_rules(learned: list, planted: list) -> list[dict]:
    """For each planted rule, the learned rule (of any type) with the highest Jaccard similarity
    of predicate sets (chapter 01, ``01-consider-then-choose``)."""
    flat = [(k, r) for k, rules in enumerate(learned) for r in rules]
    out = []
    for pk, rules in enumerate(planted):
        for r in rules:
            if flat:
                scores = [jaccard(r, lr) for _, lr in flat]
                i = int(np.argmax(scores))
                out.append({"planted_type": pk, "planted": r, "learned_type": flat[i][0],
                            "learned": flat[i][1], "jaccard": scores[i]})
            else:
                out.append({"planted_type": pk, "planted": r, "learned_type": None,
                            "learned": frozenset(), "jaccard": 0.0})
    return out
