"""The replicates and controls that chapter 05's registered claims are judged from.

Each function turns a run (the kept facts, their queries' KN sets and attributions, the model)
into the replicates of one statistic of ``book/claims/05-query-localization.yaml``: per
paraphrase pair, per prompt or per fact, in a fixed order, with the matching control (a
cross-fact or random control measured in the same run, or a baseline). The registry, not the
notebook, turns them into a verdict; nothing here thresholds or judges.

Layout. A run's queries are fact-major: query ``a`` of fact ``i`` is prompt ``i * n_q + a``, and
query ``a`` of every fact uses template ``a`` of its relation. A *partner* of a fact is a
different fact of the same relation: its query under the same template differs from the fact's
own query only in the subject, which is what the cross-fact controls compare with (issue 56).

- KL (notebook 01): :func:`pair_jaccards`, :func:`cross_fact_pair_jaccards`,
  :func:`pseudo_fact_cs` (the cross-fact CS distribution whose 95th percentile is the
  consistency threshold ``tau``), :func:`kii_indicators`, :func:`completeness_ratio`,
  :func:`estimator_agreement`;
- QL (notebook 02): :func:`partners`, :func:`heldout_sets`, :func:`suppression_effects`,
  :func:`synapse_effects`;
- editing (notebook 03): :func:`edit_scores`;
- entries resampled by fact: :func:`by_fact` turns per-prompt (or per-pair) replicates into
  per-fact means, so that the registry's bootstrap resamples facts, not the correlated
  paraphrases of one fact.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import torch

__all__ = ["pair_index", "pair_jaccards", "cross_fact_pair_jaccards", "pseudo_fact_cs",
           "cross_fact_threshold", "kii_indicators", "class_contrast", "completeness_ratio", "estimator_agreement",
           "partners", "top_k_from", "heldout_sets", "SUPPRESSION_SETS", "suppression_effects",
           "FILLER_WORDS", "synapse_columns", "synapse_effects", "edit_scores", "classes", "by_fact"]


def _check_layout(sets: Sequence, n_q: int, relations: Sequence[str] | None = None) -> int:
    if n_q < 2:
        raise ValueError(f"n_q must be >= 2 (queries per fact), got {n_q}")
    if len(sets) % n_q:
        raise ValueError(f"{len(sets)} sets do not split into facts of n_q = {n_q} queries")
    n_f = len(sets) // n_q
    if relations is not None and len(relations) != n_f:
        raise ValueError(f"{len(relations)} relations for {n_f} facts: one relation per fact")
    return n_f


def _jac(a: frozenset, b: frozenset) -> float:
    u = len(a | b)
    return 1.0 if u == 0 else len(a & b) / u


def pair_index(n_q: int) -> list[tuple[int, int]]:
    """The paraphrase pairs ``(a, b)``, ``a < b``, of one fact, in the order the per-pair arrays
    use (``itertools.combinations``)."""
    return list(combinations(range(n_q), 2))


def pair_jaccards(sets: Sequence[frozenset], n_q: int) -> np.ndarray:
    """``(n_facts, n_pairs)``: per fact, the Jaccard index of each pair of its queries' KN sets
    (the consistency score CS of a fact is the row mean; chapter 05)."""
    n_f = _check_layout(sets, n_q)
    return np.array([[_jac(sets[i * n_q + a], sets[i * n_q + b]) for a, b in pair_index(n_q)]
                     for i in range(n_f)], dtype=float).reshape(n_f, -1)


def partners(relations: Sequence[str], n_q: int, seed: int = 0) -> np.ndarray:
    """``(n_facts, n_q)`` fact ids: for query ``a`` of fact ``i``, a different fact of the same
    relation drawn at random (seeded), whose query ``a`` has the same template (the cross-fact
    control's partner). A relation with a single fact has no partner: an error names it."""
    rels = list(relations)
    by_rel: dict[str, list[int]] = {}
    for i, r in enumerate(rels):
        by_rel.setdefault(r, []).append(i)
    alone = sorted(r for r, v in by_rel.items() if len(v) < 2)
    if alone:
        raise ValueError(f"relation(s) {', '.join(alone)} have a single fact: a cross-fact control "
                         "needs two facts of the same relation (raise max_facts or drop the relation)")
    rng = np.random.default_rng(seed)
    out = np.zeros((len(rels), n_q), dtype=int)
    for i, r in enumerate(rels):
        others = [j for j in by_rel[r] if j != i]
        out[i] = rng.choice(others, size=n_q, replace=True)
    return out


def cross_fact_pair_jaccards(sets: Sequence[frozenset], relations: Sequence[str], n_q: int,
                             seed: int = 0) -> np.ndarray:
    """``(n_facts, n_pairs)``, paired with :func:`pair_jaccards`: for pair ``(a, b)`` of fact
    ``i``, the Jaccard index of query ``a``'s KN set and the KN set of a *different* fact of the
    same relation asked with template ``b`` (the paraphrase replaced by another fact's query under
    the same template; partner drawn per pair, seeded)."""
    n_f = _check_layout(sets, n_q, relations)
    pairs = pair_index(n_q)
    part = partners(relations, len(pairs), seed)           # one partner per (fact, pair)
    return np.array([[_jac(sets[i * n_q + a], sets[int(part[i, k]) * n_q + b])
                      for k, (a, b) in enumerate(pairs)] for i in range(n_f)], dtype=float)


def pseudo_fact_cs(sets: Sequence[frozenset], relations: Sequence[str], n_q: int, n: int = 200,
                   seed: int = 0) -> np.ndarray:
    """The cross-fact CS distribution: ``n`` pseudo-facts, each made of the queries of ``n_q``
    *different* facts of one relation, fact ``k`` asked with template ``k`` (so the pseudo-fact
    has the templates of a real fact and no common fact); its CS is the mean pairwise Jaccard of
    those ``n_q`` KN sets. The relation of a pseudo-fact is that of a fact drawn at random (so
    relations weigh as in the run); relations with fewer than ``n_q`` facts are skipped."""
    rels = list(relations)
    _check_layout(sets, n_q, rels)
    if n < 1:
        raise ValueError(f"n must be >= 1 pseudo-facts, got {n}")
    by_rel: dict[str, list[int]] = {}
    for i, r in enumerate(rels):
        by_rel.setdefault(r, []).append(i)
    pool = [i for i, r in enumerate(rels) if len(by_rel[r]) >= n_q]
    if not pool:
        raise ValueError(f"no relation has n_q = {n_q} facts: a pseudo-fact needs {n_q} different "
                         "facts of one relation")
    rng = np.random.default_rng(seed)
    out = np.empty(n)
    for t in range(n):
        r = rels[int(rng.choice(pool))]
        facts = rng.choice(by_rel[r], size=n_q, replace=False)
        qs = [sets[int(f) * n_q + k] for k, f in enumerate(facts)]
        out[t] = np.mean([_jac(a, b) for a, b in combinations(qs, 2)])
    return out


def cross_fact_threshold(pseudo_cs, q: float = 0.95) -> float:
    """``tau``: the ``q`` quantile (linear interpolation) of the cross-fact CS distribution
    (:func:`pseudo_fact_cs`): a fact whose paraphrases overlap no more than this is
    indistinguishable from unrelated facts."""
    x = np.asarray(pseudo_cs, dtype=float)
    if x.size == 0 or not np.isfinite(x).all():
        raise ValueError("cross_fact_threshold needs finite CS values")
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    return float(np.quantile(x, q))


def kii_indicators(cs, threshold: float, *, inclusive: bool = False) -> np.ndarray:
    """Per fact, 1.0 where the fact is inconsistent knowledge (K_II): ``CS < threshold``
    (``CS <= threshold`` with ``inclusive``, as for the cross-fact ``tau``), else 0.0."""
    cs = np.asarray(cs, dtype=float)
    return (cs <= threshold if inclusive else cs < threshold).astype(float)


def classes(cs, tau: float) -> np.ndarray:
    """Per fact, ``"K_II"`` where ``CS <= tau`` (inconsistent: its paraphrases share no more
    neurons than unrelated facts do) else ``"K_I"``."""
    return np.where(kii_indicators(cs, tau, inclusive=True) > 0, "K_II", "K_I")


def by_fact(per_fact: int, *values) -> list[np.ndarray]:
    """Per-fact means of fact-major arrays (``per_fact`` entries per fact: its ``n_q`` prompts,
    or its paraphrase pairs), over the entries where every array is finite: one list entry per
    array, facts in order, a fact without such an entry left out of all of them (so arrays stay
    paired). Hand these to the registry for an entry "resampled by fact": its bootstrap then
    draws facts, the unit whose paraphrases share one model state, instead of treating a fact's
    ``per_fact`` correlated values as independent (which narrows the interval)."""
    if not isinstance(per_fact, (int, np.integer)) or per_fact < 1:
        raise ValueError(f"per_fact must be a positive integer, got {per_fact!r}")
    if not values:
        raise ValueError("no arrays to average")
    arrs = [np.asarray(v, dtype=float).ravel() for v in values]
    n = arrs[0].size
    if n == 0 or n % per_fact or any(a.size != n for a in arrs):
        raise ValueError(f"arrays of sizes {[a.size for a in arrs]} are not facts x {per_fact}")
    ok = np.logical_and.reduce([np.isfinite(a) for a in arrs]).reshape(-1, per_fact)
    keep, count = ok.any(1), ok.sum(1)
    return [(np.where(ok, a.reshape(-1, per_fact), 0.0).sum(1) / np.maximum(count, 1))[keep]
            for a in arrs]


def class_contrast(values, in_class) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(ours, control, measurable)`` for an unpaired comparison of a class with the rest: the
    values where ``in_class`` (e.g. the K_II prompts or facts) and the others (K_I). When one side
    is empty the contrast cannot be measured in this run: both sides are then the values there are
    (effect 0 by construction, so the registry's rule can only call it inconclusive) and
    ``measurable`` is False, for the notebook to say so."""
    v = np.asarray(values, dtype=float).ravel()
    m = np.asarray(in_class, dtype=bool).ravel()
    if v.shape != m.shape:
        raise ValueError(f"{v.size} values but {m.size} class flags")
    if v.size == 0:
        raise ValueError("no values to contrast")
    if m.all() or not m.any():
        return v, v, False
    return v[m], v[~m], True


def completeness_ratio(attr) -> np.ndarray:
    """Per prompt, the IG completeness gap relative to the output change:
    ``sum_l |sum_i Attr_li - (P - P_l0)| / sum_l |P - P_l0|`` (per-layer path: one gap per layer,
    ``P_l0`` the probability with layer ``l``'s units zeroed; joint path: the single gap). 0 for
    exact integrals."""
    if attr.prob_zero is None:
        raise ValueError("grad_x_act has no completeness identity; use joint or per_layer")
    P = attr.scores.shape[0]
    err = attr.completeness_error().double().reshape(P, -1)
    span = (attr.prob.double()[:, None] - attr.prob_zero.double().reshape(P, -1)).abs()
    return (err.sum(1) / span.sum(1).clamp(min=1e-12)).numpy()


def estimator_agreement(sets_other: Sequence[frozenset], sets_ref: Sequence[frozenset], n_q: int
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Per prompt: the Jaccard index of its KN set under another estimator (``sets_other``, e.g.
    the joint path) and under the reference one (``sets_ref``, Dai et al.'s per-layer path); and
    the control, the mean Jaccard between its reference set and its paraphrases' reference sets
    (how closely two wordings of the fact agree under the reference estimator)."""
    if len(sets_other) != len(sets_ref):
        raise ValueError(f"{len(sets_other)} and {len(sets_ref)} sets: one per prompt each")
    n_f = _check_layout(sets_ref, n_q)
    ours = np.array([_jac(a, b) for a, b in zip(sets_other, sets_ref)])
    ctrl = np.array([np.mean([_jac(sets_ref[i * n_q + a], sets_ref[i * n_q + b])
                              for b in range(n_q) if b != a])
                     for i in range(n_f) for a in range(n_q)])
    return ours, ctrl


# ----------------------------------------------------------------------------- query localization


def top_k_from(scores: torch.Tensor, k: int, exclude=()) -> frozenset[int]:
    """The ``k`` highest-scoring units of one flat score vector, never one of ``exclude``."""
    s = scores.reshape(-1).double().clone()
    if len(exclude):
        s[torch.as_tensor(sorted(exclude), dtype=torch.long)] = -float("inf")
    if not 1 <= k <= int(torch.isfinite(s).sum()):
        raise ValueError(f"k must be in [1, {int(torch.isfinite(s).sum())}], got {k}")
    return frozenset(int(i) for i in torch.topk(s, k).indices)


def heldout_sets(scores: torch.Tensor, n_q: int, k: int, partner: np.ndarray, exclude=()
                 ) -> tuple[list[frozenset], list[frozenset]]:
    """Selection and evaluation on different paraphrases (leave one query out). For query ``a``
    of fact ``i``: the top-``k`` units by mean attribution over the fact's *other* queries, and
    the control, the same over the queries of ``partner[i, a]`` (a different fact of the same
    relation) under the same templates (all but ``a``). ``scores``: ``(n_prompts, ...)``."""
    flat = scores.reshape(scores.shape[0], -1).double()
    n_f = _check_layout(range(flat.shape[0]), n_q)
    own, cross = [], []
    for i in range(n_f):
        for a in range(n_q):
            rest = [b for b in range(n_q) if b != a]
            g = int(partner[i, a])
            if g == i:
                raise ValueError(f"partner of fact {i} is the fact itself")
            own.append(top_k_from(flat[[i * n_q + b for b in rest]].mean(0), k, exclude))
            cross.append(top_k_from(flat[[g * n_q + b for b in rest]].mean(0), k, exclude))
    return own, cross


#: The unit sets suppressed at each prompt by :func:`suppression_effects`.
SUPPRESSION_SETS = ("own", "neighbour", "random", "cross_fact", "heldout", "heldout_cross")


def suppression_effects(model, tokenizer, prompts: Sequence[str], targets: Sequence[int],
                        before, n_q: int, top: Sequence[frozenset], random_sets: Sequence[frozenset],
                        partner: np.ndarray, heldout: Sequence[frozenset],
                        heldout_cross: Sequence[frozenset], *, factor: float = 0.0,
                        kinds: Sequence[str] = SUPPRESSION_SETS, batch_size: int = 32) -> dict:
    """Per prompt (query ``a`` of fact ``i``), ``|Delta Prob| = |p_after - p_before| / p_before``
    of its answer when a unit set is multiplied by ``factor`` (0 suppresses) at its last
    position, for each kind in ``kinds``:

    ``own``  its own top-k set ``top[i*n_q + a]``; ``neighbour`` the mean over its paraphrases'
    top-k sets ``top[i*n_q + b]``, ``b != a``; ``random`` ``random_sets[prompt]``; ``cross_fact``
    the top-k set of ``partner[i, a]``'s query with template ``a``; ``heldout`` /
    ``heldout_cross`` the leave-one-query-out sets of :func:`heldout_sets`.

    Returns ``{kind: (n_prompts,) array}`` (signed Delta Prob under ``"signed_" + kind``)."""
    P = len(prompts)
    n_f = _check_layout(range(P), n_q)
    for name, v in (("top", top), ("random_sets", random_sets), ("heldout", heldout),
                    ("heldout_cross", heldout_cross), ("targets", targets)):
        if len(v) != P:
            raise ValueError(f"{name} has {len(v)} entries for {P} prompts")
    bad = sorted(set(kinds) - set(SUPPRESSION_SETS))
    if bad:
        raise ValueError(f"unknown kind(s) {bad}; valid: {', '.join(SUPPRESSION_SETS)}")
    from .effects import scaled_prob

    rows: list[tuple[int, str, frozenset]] = []
    for i in range(n_f):
        for a in range(n_q):
            p = i * n_q + a
            for kind in kinds:
                if kind == "own":
                    rows.append((p, kind, top[p]))
                elif kind == "neighbour":
                    rows += [(p, kind, top[i * n_q + b]) for b in range(n_q) if b != a]
                elif kind == "random":
                    rows.append((p, kind, random_sets[p]))
                elif kind == "cross_fact":
                    rows.append((p, kind, top[int(partner[i, a]) * n_q + a]))
                elif kind == "heldout":
                    rows.append((p, kind, heldout[p]))
                else:
                    rows.append((p, kind, heldout_cross[p]))
    after = scaled_prob(model, tokenizer, [prompts[p] for p, _, _ in rows],
                        [int(targets[p]) for p, _, _ in rows], [s for _, _, s in rows], factor,
                        batch_size=batch_size).double().numpy()
    b = np.asarray(before, dtype=float)
    dp = np.array([(after[r] - b[p]) / max(b[p], 1e-12) for r, (p, _, _) in enumerate(rows)])
    out = {}
    for kind in kinds:
        idx = [r for r, (_, k, _) in enumerate(rows) if k == kind]
        prompt_of = np.array([rows[r][0] for r in idx])
        vals = dp[idx]
        signed = np.array([vals[prompt_of == p].mean() for p in range(P)])
        absval = np.array([np.abs(vals[prompt_of == p]).mean() for p in range(P)])
        out[kind], out["signed_" + kind] = absval, signed
    return out


#: Tokens counted as filler words (no relation or subject content) for the synapse control
#: restricted to them; compared lower-cased, stripped of spaces and the tokenizer's space marker.
FILLER_WORDS = frozenset({"the", "of", "is", "in", "a", "an", "'s", "'", "s", ",", "whose", "are",
                          "to", "at"})


def synapse_columns(tokenizer, prompts: Sequence[str], subjects: Sequence[str], seed: int = 0
                    ) -> tuple[list, list, list]:
    """Per prompt, the key columns (token positions) scaled by the synapse test: the subject's
    tokens; the control, as many other columns drawn at random (seeded) among the tokens that are
    neither the subject, nor the first (the attention sink) nor the last; and the same restricted
    to filler words (:data:`FILLER_WORDS`; empty where the prompt has none)."""
    from .effects import subject_positions

    if len(prompts) != len(subjects):
        raise ValueError(f"{len(prompts)} prompts but {len(subjects)} subjects")
    rng = np.random.default_rng(seed)
    subj, ctrl, filler = [], [], []
    for q, s_ in zip(prompts, subjects):
        s = subject_positions(tokenizer, q, s_)
        ids = list(tokenizer(q)["input_ids"])
        rest = [p for p in range(1, len(ids) - 1) if p not in s]
        toks = tokenizer.convert_ids_to_tokens(ids)
        fill = [p for p in rest if toks[p].replace("\u0120", "").strip().lower() in FILLER_WORDS]
        subj.append(s)
        ctrl.append(sorted(rng.choice(rest, size=min(len(s), len(rest)), replace=False).tolist())
                    if rest else [])
        filler.append(sorted(rng.choice(fill, size=min(len(s), len(fill)), replace=False).tolist())
                      if fill else [])
    return subj, ctrl, filler


def synapse_effects(model, tokenizer, prompts: Sequence[str], targets: Sequence[int],
                    unit_sets: Sequence[frozenset], columns: dict, alpha: float = 0.0,
                    batch_size: int = 32) -> dict:
    """Per prompt, for each entry ``name -> per-prompt column lists`` of ``columns``: the mean
    relative change of the units ``unit_sets[p]`` at the last position,
    ``mean |x_1 - x_0| / mean |x_0|``, and ``|Delta Prob|`` of the answer, when the attention from
    the last position to those columns is multiplied by ``alpha`` in every layer and head (Eq. 5).
    A prompt with no column gives NaN. Returns ``{name: {"kn_change", "dprob"}}`` of arrays."""
    from .effects import last_position_units

    tg = torch.as_tensor(list(targets), dtype=torch.long)[:, None]
    a0, lp0 = last_position_units(model, tokenizer, prompts, unit_sets, batch_size=batch_size)
    p0 = lp0.gather(1, tg).exp().squeeze(1).double()
    out = {}
    for name, cols in columns.items():
        if len(cols) != len(prompts):
            raise ValueError(f"columns[{name!r}] has {len(cols)} entries for {len(prompts)} prompts")
        a1, lp1 = last_position_units(model, tokenizer, prompts, unit_sets, cols=cols, alpha=alpha,
                                      batch_size=batch_size)
        p1 = lp1.gather(1, tg).exp().squeeze(1).double()
        kn = np.array([float((x1 - x0).abs().mean() / x0.abs().mean().clamp(min=1e-8))
                       for x0, x1 in zip(a0, a1)])
        dp = ((p1 - p0).abs() / p0.clamp(min=1e-12)).numpy()
        empty = np.array([len(c) == 0 for c in cols])
        kn[empty], dp[empty] = np.nan, np.nan
        out[name] = {"kn_change": kn, "dprob": dp}
    return out


# ----------------------------------------------------------------------------- editing


def edit_scores(model, tokenizer, facts: Sequence, targets: Sequence[int], n_seen: int, n_other: int,
                methods: dict, *, show_progress: bool = True):
    """Erase each fact through each method's units and score it (chapter 05): ``methods`` maps a
    name to ``fact index -> unit set``. Rel on the fact's first query (the one every method is
    localised on), Gen on its held-out queries ``n_seen ..``, Loc on the first query of the
    ``n_other`` facts that follow it (cyclically). Returns a DataFrame with one row per fact and
    method: ``fact, method, Rel, Gen, Loc, Avg, neurons``."""
    import pandas as pd

    from ..progress import progress
    from .editing import clean_probs, erase_scores

    n_f = len(facts)
    if n_f < 2:
        raise ValueError("editing needs at least two facts (locality uses the others)")
    if not 1 <= n_seen < len(facts[0].queries):
        raise ValueError(f"n_seen must be in [1, {len(facts[0].queries) - 1}], got {n_seen}")
    rows = []
    it = progress(range(n_f), desc="editing") if show_progress else range(n_f)
    for i in it:
        f, tg = facts[i], int(targets[i])
        others = [(j + i + 1) % n_f for j in range(min(n_other, n_f - 1))]
        args = (f.queries[:1], f.queries[n_seen:], tg, [facts[j].queries[0] for j in others],
                [int(targets[j]) for j in others])
        before = clean_probs(model, tokenizer, *args)
        for name, pick in methods.items():
            r = erase_scores(model, tokenizer, pick(i), *args, before=before)
            rows.append({"fact": i, "method": name, "Rel": r.rel, "Gen": r.gen, "Loc": r.loc,
                         "Avg": r.avg, "neurons": r.n_units})
    return pd.DataFrame(rows)
