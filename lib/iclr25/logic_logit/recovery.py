"""Scoring rule recovery as a choice modeller would (chapter 01, ``01-consider-then-choose``).

A learned Logic-Logit model and a planted population are both mixtures of types, each type a set
of weighted rules. Recovery is scored in two levels of one-to-one (Hungarian) matching:

1. **rules within a pair of types**: the similarity of two rules is the Jaccard similarity of the
   *items they select* on a data set (``|A ∩ B| / |A ∪ B|`` over offered items), so rules written
   over different predicate libraries (the generator's thresholds and the learned model's data
   quantiles) can be compared; the rules of two types are matched one-to-one by the Hungarian
   algorithm, and the *type similarity* is the matched rules' total similarity divided by the
   larger rule count (1 only when both types hold the same number of identical rules);
2. **types**: planted and learned types are matched one-to-one by the Hungarian algorithm on the
   type similarity; a learned type left over (or matched with similarity 0) is spurious, a
   planted type left over is missed.

A planted rule is *recovered* when its matched learned rule (inside matched types) has similarity
at least ``threshold``. Then **recall** = recovered / planted rules, **precision** = recovered /
learned rules (every learned rule that recovers nothing is spurious, including the rules of
spurious types and duplicates of a type that Frank-Wolfe split), the **weight error** is the mean
absolute difference of the weights of recovered rules, and the **proportion error** is the total
variation distance between the planted and learned type proportions under the type matching
(unmatched types count with their whole proportion).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

__all__ = ["rule_truth", "rule_similarity", "match_rule_sets", "match_types", "RecoveryReport", "recovery_run", "recovery_row", "LIBRARIES",
           "recovery_report", "random_types", "chance_recovery"]


def rule_truth(library, rules: Sequence, data) -> np.ndarray:
    """Bool ``[len(rules), n_offered]``: whether each rule (a set of predicate indices of
    ``library``) holds on each offered item of ``data`` (items in ``data.mask`` order)."""
    P = library.evaluate(data)[data.mask]                      # [N, M]
    out = np.empty((len(rules), P.shape[0]), bool)
    for k, r in enumerate(rules):
        r = sorted(r)
        if not r:
            raise ValueError("a rule needs at least one predicate")
        if max(r) >= P.shape[1] or min(r) < 0:
            raise ValueError(f"rule {tuple(r)} has predicate indices outside [0, {P.shape[1] - 1}]")
        out[k] = P[:, r].all(1)
    return out


def rule_similarity(truth_a: np.ndarray, truth_b: np.ndarray) -> np.ndarray:
    """Jaccard similarity ``[Ka, Kb]`` of the item sets of two lists of rules (rows of
    :func:`rule_truth` on the same data); two rules that select nothing have similarity 1."""
    A = np.asarray(truth_a, bool).astype(np.float64)
    B = np.asarray(truth_b, bool).astype(np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[1]:
        raise ValueError(f"truth tables must be [K, N] on the same items, got {A.shape} and {B.shape}")
    inter = A @ B.T
    union = A.sum(1)[:, None] + B.sum(1)[None, :] - inter
    return np.where(union > 0, inter / np.maximum(union, 1), 1.0)


def match_rule_sets(sim: np.ndarray) -> tuple[list[tuple[int, int]], float]:
    """One-to-one matching of the rows (planted rules) and columns (learned rules) of ``sim`` that
    maximises the total similarity (Hungarian algorithm). Returns the pairs and the *set
    similarity*: total matched similarity / ``max(rows, cols)`` (0 if either side is empty)."""
    sim = np.asarray(sim, float)
    if sim.ndim != 2:
        raise ValueError(f"sim must be a 2-D matrix, got shape {sim.shape}")
    if 0 in sim.shape:
        return [], 0.0
    r, c = linear_sum_assignment(sim, maximize=True)
    return list(zip(r.tolist(), c.tolist())), float(sim[r, c].sum() / max(sim.shape))


def match_types(planted: Sequence[Sequence[int]], learned: Sequence[Sequence[int]], sim: np.ndarray):
    """Two-level Hungarian matching. ``planted`` / ``learned``: each type as a list of rule indices
    into the rows / columns of ``sim`` (rule similarities). Returns ``(type_pairs, type_sim)``:
    ``type_pairs`` a list of ``(planted type, learned type, rule pairs)`` for the matched types
    with positive similarity (rule pairs as ``(row, col)`` of ``sim``), ``type_sim`` the
    ``[len(planted), len(learned)]`` matrix of type similarities."""
    sim = np.asarray(sim, float)
    T = np.zeros((len(planted), len(learned)))
    inner = {}
    for a, pa in enumerate(planted):
        for b, lb in enumerate(learned):
            pairs, s = match_rule_sets(sim[np.ix_(list(pa), list(lb))])
            T[a, b] = s
            inner[a, b] = [(pa[i], lb[j]) for i, j in pairs]
    if 0 in T.shape:
        return [], T
    ra, cb = linear_sum_assignment(T, maximize=True)
    return [(int(a), int(b), inner[a, b]) for a, b in zip(ra, cb) if T[a, b] > 0], T


@dataclass
class RecoveryReport:
    """The result of :func:`recovery_report`: ``types`` and ``rules`` tables and the summary
    numbers (``precision``, ``recall``, ``f1``, ``weight_mae``, ``alpha_tv``, counts)."""

    types: object
    rules: object
    precision: float
    recall: float
    f1: float
    weight_mae: float
    alpha_tv: float
    n_planted: int
    n_learned: int
    n_recovered: int

    def summary(self) -> dict:
        """The summary numbers as a dict."""
        return {k: getattr(self, k) for k in ("precision", "recall", "f1", "weight_mae", "alpha_tv",
                                              "n_planted", "n_learned", "n_recovered")}


def recovery_report(model, planted_library, planted_rules: Sequence[Sequence], planted_alphas,
                    planted_weights, data, threshold: float = 0.67) -> RecoveryReport:
    """Score how well a fitted :class:`~iclr25.logic_logit.LogicLogit` recovers a planted
    population (chapter 01, ``01-consider-then-choose``); see the module docstring.

    Parameters
    ----------
    model : a fitted LogicLogit (its ``types_``, ``alphas_`` and ``library_``); its rule-free
        (uniform) type, if kept, is a learned type without rules (it matches nothing).
    planted_library : the :class:`PredicateLibrary` the planted rules are written in.
    planted_rules : per planted type, its rules as predicate-index sets of ``planted_library``.
    planted_alphas, planted_weights : per planted type, its proportion and its rules' weights.
    data : the choices whose offered items define the rules' item sets (held-out data).
    threshold : a planted rule counts as recovered when its matched rule's similarity is at least this.
    """
    import pandas as pd

    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if not getattr(model, "fitted_", False):
        raise ValueError("recovery_report needs a fitted LogicLogit (call fit first)")
    if not (len(planted_rules) == len(planted_alphas) == len(planted_weights)):
        raise ValueError("planted_rules, planted_alphas and planted_weights need one entry per type")
    p_flat = [(k, r, w) for k, (rs, ws) in enumerate(zip(planted_rules, planted_weights))
              for r, w in zip(rs, ws)]
    l_flat = [(k, r, w) for k, t in enumerate(model.types_) for r, w in zip(t.rules, t.weights)]
    sim = rule_similarity(rule_truth(planted_library, [r for _, r, _ in p_flat], data),
                          rule_truth(model.library_, [r for _, r, _ in l_flat], data)
                          if l_flat else np.zeros((0, int(data.mask.sum())), bool))
    planted_types = [[i for i, (k, _, _) in enumerate(p_flat) if k == a] for a in range(len(planted_rules))]
    learned_types = [[j for j, (k, _, _) in enumerate(l_flat) if k == b] for b in range(len(model.types_))]
    type_pairs, Tsim = match_types(planted_types, learned_types, sim)
    rec = [(a, b, i, j) for a, b, pairs in type_pairs for i, j in pairs if sim[i, j] >= threshold]
    alpha_l = np.asarray(model.alphas_, float)
    alpha_p = np.asarray(planted_alphas, float)
    matched_l = {b: a for a, b, _ in type_pairs}
    diff = sum(abs(alpha_p[a] - alpha_l[b]) for a, b, _ in type_pairs)
    diff += sum(alpha_p[a] for a in range(len(alpha_p)) if a not in {x for x, _, _ in type_pairs})
    diff += sum(alpha_l[b] for b in range(len(alpha_l)) if b not in matched_l)
    trows = []
    for a, b, _ in type_pairs:
        trows.append({"planted type": a, "learned type": b, "type similarity": Tsim[a, b],
                      "alpha planted": alpha_p[a], "alpha learned": alpha_l[b]})
    for a in range(len(alpha_p)):
        if a not in {x for x, _, _ in type_pairs}:
            trows.append({"planted type": a, "learned type": None, "type similarity": 0.0,
                          "alpha planted": alpha_p[a], "alpha learned": 0.0})
    for b in range(len(alpha_l)):
        if b not in matched_l:
            trows.append({"planted type": None, "learned type": b, "type similarity": 0.0,
                          "alpha planted": 0.0, "alpha learned": alpha_l[b]})
    pair_of = {i: (b, j) for a, b, pairs in type_pairs for i, j in pairs}
    rec_set = {(i, j) for _, _, i, j in rec}
    rrows = []
    for i, (a, r, w) in enumerate(p_flat):
        b, j = pair_of.get(i, (None, None))
        rrows.append({"planted type": a, "planted rule": planted_library.rule_str(r), "weight planted": w,
                      "learned type": b,
                      "learned rule": model.library_.rule_str(l_flat[j][1]) if j is not None else "(none)",
                      "weight learned": l_flat[j][2] if j is not None else np.nan,
                      "similarity": sim[i, j] if j is not None else 0.0,
                      "recovered": (i, j) in rec_set})
    used = {j for _, j in pair_of.values()}
    for j, (b, r, w) in enumerate(l_flat):
        if j not in used:                                  # matched to no planted rule: spurious
            rrows.append({"planted type": None, "planted rule": "(spurious)", "weight planted": np.nan,
                          "learned type": b, "learned rule": model.library_.rule_str(r),
                          "weight learned": w, "similarity": 0.0, "recovered": False})
    n_rec, n_p, n_l = len(rec), len(p_flat), len(l_flat)
    precision = n_rec / n_l if n_l else 0.0
    recall = n_rec / n_p if n_p else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    werr = [abs(p_flat[i][2] - l_flat[j][2]) for _, _, i, j in rec]
    return RecoveryReport(pd.DataFrame(trows), pd.DataFrame(rrows), precision, recall, f1,
                          float(np.mean(werr)) if werr else float("nan"), 0.5 * float(diff),
                          n_p, n_l, n_rec)


def random_types(library, shapes: Sequence[Sequence[int]], seed: int = 0) -> list[list[frozenset]]:
    """Random rules with the given shapes (per type, the length of each rule), each a set of
    distinct predicates of ``library`` drawn uniformly (the chance baseline of recovery)."""
    rng = np.random.default_rng(seed)
    M = len(library)
    out = []
    for lens in shapes:
        out.append([frozenset(rng.choice(M, size=min(int(n), M), replace=False).tolist()) for n in lens])
    return out


def chance_recovery(model, planted_library, planted_rules, planted_alphas, planted_weights, data,
                    threshold: float = 0.67, n_draws: int = 20, seed: int = 0) -> dict:
    """The chance level of :func:`recovery_report`: precision and recall of random models with the
    fitted model's shape (same types, same number and lengths of rules, same proportions and
    weights, rules drawn uniformly from its library), averaged over ``n_draws`` draws."""
    from .model import LogicType

    class _Fake:
        fitted_ = True

    shapes = [[len(r) for r in t.rules] for t in model.types_]
    prec, rec = [], []
    for d in range(n_draws):
        fake = _Fake()
        fake.library_, fake.alphas_ = model.library_, model.alphas_
        fake.types_ = [LogicType(rs, t.weights) for rs, t in
                       zip(random_types(model.library_, shapes, seed + d), model.types_)]
        rep = recovery_report(fake, planted_library, planted_rules, planted_alphas, planted_weights,
                              data, threshold)
        prec.append(rep.precision)
        rec.append(rep.recall)
    return {"precision": float(np.mean(prec)), "recall": float(np.mean(rec)),
            "precision max": float(np.max(prec)), "recall max": float(np.max(rec)), "draws": n_draws}


LIBRARIES = ("quantile", "grid")


def recovery_run(n_obs: int, seed: int = 0, library: str = "quantile", n_bins: int = 4,
                 test_size: float = 0.3, threshold: float = 0.67, n_draws: int = 20, **logic_kw) -> dict:
    """One recovery experiment on off-grid planted hotel searches (chapter 01,
    ``01-consider-then-choose``): generate ``n_obs`` searches (``make_hotel_search(...,
    continuous=True)``), split, fit :class:`LogicLogit` on the training part with the predicate
    ``library`` — ``"quantile"``: :meth:`PredicateLibrary.from_data` on the training data with
    ``n_bins`` (what a modeller can build); ``"grid"``: the generator's own thresholds (which a
    modeller cannot know) — and score it on the held-out searches with :func:`recovery_report`
    and :func:`chance_recovery`. ``logic_kw`` go to :class:`LogicLogit`. Returns a dict with
    ``report``, ``chance``, ``model``, ``train``, ``test``, ``truth``, ``planted_library``."""
    from .data import make_hotel_search, train_test_split
    from .model import LogicLogit
    from .predicates import PredicateLibrary

    if library not in LIBRARIES:
        raise ValueError(f"unknown library {library!r}; valid: {', '.join(LIBRARIES)}")
    data, glib, truth = make_hotel_search(n_obs, seed=seed, continuous=True)
    train, test = train_test_split(data, test_size, seed=seed)
    lib = PredicateLibrary.from_data(train, n_bins) if library == "quantile" else glib
    model = LogicLogit(library=lib, **logic_kw).fit(train)
    planted = (truth["rules"], [t.alpha for t in truth["types"]], [t.weights for t in truth["types"]])
    return {"report": recovery_report(model, glib, *planted, test, threshold),
            "chance": chance_recovery(model, glib, *planted, test, threshold, n_draws, seed),
            "model": model, "train": train, "test": test, "truth": truth, "planted_library": glib}


def recovery_row(run: dict, **labels) -> dict:
    """One table row of a :func:`recovery_run`: ``labels``, the report's summary and the chance
    level's precision and recall."""
    return {**labels, **run["report"].summary(), "chance precision": run["chance"]["precision"],
            "chance recall": run["chance"]["recall"], "chance recall max": run["chance"]["recall max"]}
