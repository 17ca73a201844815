"""Chapter 01: the MNL baselines that see Logic-Logit's features -- the predicate and pairwise
conjunction feature builders on a hand-made case (exact matrices), and the L2-regularised MNL fit
against a closed form, a brute-force optimiser and a brute-force validation choice of the penalty."""

import numpy as np
import pytest
from scipy.optimize import brentq, minimize

import iclr25.logic_logit as ll
from iclr25.logic_logit.baselines import _split_index

# two offer sets of three slots; the second offers only two items (slot 2 is padding)
#             x    b
X = np.array([[[0., 1.], [2., 0.], [3., 1.]],
              [[1., 0.], [3., 1.], [9., 9.]]])
MASK = np.array([[True, True, True], [True, True, False]])
LIB = ll.PredicateLibrary(("x", "b"), [ll.Predicate("x", "<=", 1.0),    # 0
                                        ll.Predicate("x", ">=", 2.0),    # 1
                                        ll.Predicate("b", "==", 1.0),    # 2
                                        ll.Predicate("x", "<=", 3.0)])   # 3 (true on every item)


def _tiny():
    return ll.ChoiceData(X, MASK, np.array([2, 0]), ("x", "b"))


def test_predicate_features_exact():
    F = ll.predicate_features(LIB, _tiny())
    expect = np.array([[[1, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 1]],
                       [[1, 0, 0, 1], [0, 1, 1, 1], [0, 0, 0, 0]]], float)
    assert F.dtype == np.float64
    np.testing.assert_array_equal(F, expect)


def test_conjunction_features_exact():
    P = ll.predicate_features(LIB, _tiny())
    assert ll.conjunction_pairs(4) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    F = ll.conjunction_features(P)
    #                 p0 p1 p2 p3 | 01 02 03 12 13 23
    expect = np.array([[[1, 0, 1, 1, 0, 1, 1, 0, 0, 1],
                        [0, 1, 0, 1, 0, 0, 0, 0, 1, 0],
                        [0, 1, 1, 1, 0, 0, 0, 1, 1, 1]],
                       [[1, 0, 0, 1, 0, 0, 1, 0, 0, 0],
                        [0, 1, 1, 1, 0, 0, 0, 1, 1, 1],
                        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]]], float)
    np.testing.assert_array_equal(F, expect)
    np.testing.assert_array_equal(ll.conjunction_features(P, [(2, 0)]), np.concatenate(
        [P, (P[..., 2] * P[..., 0])[..., None]], -1))
    assert ll.conjunction_features(P > 0, dtype=bool).dtype == bool
    with pytest.raises(ValueError, match="pair indices"):
        ll.conjunction_features(P, [(0, 4)])


def test_informative_columns_drop_constant_and_duplicate():
    F = ll.conjunction_features(ll.predicate_features(LIB, _tiny()))
    # p3 (always true) and 0&1 (never true) are constant within every offer set; 0&3 = p0,
    # 1&3 = p1, 2&3 = p2 duplicate earlier columns; 0&2 and 1&2 vary in one set each
    keep = ll.informative_columns(F, MASK)
    np.testing.assert_array_equal(keep, [0, 1, 2, 5, 7])
    np.testing.assert_array_equal(ll.informative_columns(F > 0, MASK), keep)   # bool path
    # a column that varies only through a padding slot is constant on the offered items
    G = np.zeros((2, 3, 1)); G[1, 2, 0] = 1.0
    assert ll.informative_columns(G, MASK).size == 0


def test_predicate_mnl_keeps_the_informative_columns():
    m = ll.PredicateMNL(LIB, conjunctions=True, l2_grid=(0.1,)).fit(_tiny())
    assert m.singles_ == [0, 1, 2] and m.pairs_ == [(0, 2), (1, 2)]
    assert m.feature_names_ == ["x ≤ 1", "x ≥ 2", "b = 1", "x ≤ 1 AND b = 1", "x ≥ 2 AND b = 1"]
    full = ll.conjunction_features(ll.predicate_features(LIB, _tiny()))
    np.testing.assert_array_equal(m.features(_tiny()), full[..., [0, 1, 2, 5, 7]])
    plain = ll.PredicateMNL(LIB, conjunctions=False, l2_grid=(0.1,)).fit(_tiny())
    assert plain.singles_ == [0, 1, 2] and plain.pairs_ == []
    P = plain.predict_proba(_tiny())
    np.testing.assert_allclose(P.sum(1), 1.0)
    assert P[1, 2] == 0


def test_regularised_mnl_binary_closed_form():
    # two items, one indicator on item 0, item 0 chosen 300 of 400 times: the penalised optimum
    # solves  sigmoid(b) - 3/4 + l2 b = 0
    n, l2 = 400, 0.05
    X2 = np.zeros((n, 2, 1)); X2[:, 0, 0] = 1
    data = ll.ChoiceData(X2, np.ones((n, 2), bool), np.r_[np.zeros(300, int), np.ones(100, int)], ("z",))
    lib = ll.PredicateLibrary(("z",), [ll.Predicate("z", "==", 1.0)])
    m = ll.PredicateMNL(lib, l2_grid=(l2,)).fit(data)
    b = brentq(lambda b: 1 / (1 + np.exp(-b)) - 0.75 + l2 * b, -10, 10, xtol=1e-14)
    assert m.beta_[0] == pytest.approx(b, abs=1e-6)
    assert ll.PredicateMNL(lib, l2_grid=(0.0,)).fit(data).beta_[0] == pytest.approx(np.log(3), abs=1e-5)


def _brute_objective(F, mask, choice, l2):
    def f(beta):
        val = 0.0
        for i in range(len(choice)):
            u = [F[i, j] @ beta for j in range(F.shape[1]) if mask[i, j]]
            val -= F[i, choice[i]] @ beta - np.log(np.sum(np.exp(u)))
        return val / len(choice) + 0.5 * l2 * beta @ beta
    return f


def test_regularised_mnl_matches_brute_force_optimiser():
    data, lib, _ = ll.make_hotel_search(60, n_items=(3, 5), seed=11)
    small = ll.PredicateLibrary(lib.feature_names, [lib.predicates[next(iter(lib.parse(t)))]
                                                    for t in ("price <= 100", "stars >= 4", "promo = 1")])
    m = ll.PredicateMNL(small, conjunctions=True, l2_grid=(0.02,)).fit(data)
    F = m.features(data)
    f = _brute_objective(F, data.mask, data.choice, 0.02)
    res = minimize(f, np.zeros(F.shape[2]), method="Nelder-Mead",
                   options={"xatol": 1e-9, "fatol": 1e-13, "maxiter": 40000, "maxfev": 40000})
    res = minimize(f, res.x, method="BFGS", options={"gtol": 1e-10})
    assert f(m.beta_) <= res.fun + 1e-10
    np.testing.assert_allclose(m.beta_, res.x, atol=1e-4)
    assert m.nll(data) == pytest.approx(f(m.beta_) - 0.01 * m.beta_ @ m.beta_, rel=1e-10)


def _dense_objective(F, mask, choice, l2):
    """The penalised mean NLL and its gradient on the padded design (no row sharing)."""
    n = len(choice)

    def f(beta):
        lp = ll.log_softmax(F @ beta, mask)
        S = np.exp(lp)
        g = -(F[np.arange(n), choice] - np.einsum("nj,njd->nd", S, F)).mean(0) + l2 * beta
        return -lp[np.arange(n), choice].mean() + 0.5 * l2 * beta @ beta, g
    return f


def test_l2_chosen_by_brute_force_validation():
    data, lib, _ = ll.make_hotel_search(300, n_items=(4, 8), seed=12)
    grid = (1.0, 0.1, 0.01, 0.001)
    m = ll.PredicateMNL(lib, conjunctions=False, l2_grid=grid, val_fraction=0.25, patience=None,
                        seed=3).fit(data)
    fit_idx, val_idx = _split_index(data, 0.25, 3)
    fit_part, val_part = data.subset(fit_idx), data.subset(val_idx)
    brute = {}
    for l2 in grid:   # each penalty fit from scratch on the fit part (m's columns), scored on val
        ref = ll.PredicateMNL(lib, l2_grid=(l2,))
        ref.library_, ref.singles_, ref.pairs_ = lib, m.singles_, []
        ref.feature_names_ = m.feature_names_
        F = np.zeros(fit_part.mask.shape + (len(m.singles_),))
        F[fit_part.mask] = ref._rows(fit_part)
        f = _dense_objective(F, fit_part.mask, fit_part.choice, l2)
        x = minimize(f, np.zeros(F.shape[2]), jac=True, method="BFGS", options={"gtol": 1e-10}).x
        ref.beta_, ref.fitted_ = x, True
        brute[l2] = ref.nll(val_part)
    for l2 in grid:
        assert m.val_table_[l2] == pytest.approx(brute[l2], abs=1e-5)
    assert m.l2_ == min(brute, key=brute.get)
    assert set(fit_idx).isdisjoint(val_idx) and len(fit_idx) + len(val_idx) == data.n_obs


def test_l2_path_stops_after_patience_rises():
    data, lib, _ = ll.make_hotel_search(300, n_items=(4, 8), seed=12)
    grid = (10.0, 3.0, 1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001, 1e-4, 1e-5)
    full = ll.PredicateMNL(lib, conjunctions=True, l2_grid=grid, patience=None, seed=3).fit(data)
    early = ll.PredicateMNL(lib, conjunctions=True, l2_grid=grid, patience=2, seed=3).fit(data)
    tried = list(early.val_table_)
    assert tried == sorted(grid, reverse=True)[:len(tried)]          # a prefix of the path
    for l2 in tried:
        assert early.val_table_[l2] == pytest.approx(full.val_table_[l2], rel=1e-12)
    v = list(early.val_table_.values())
    assert len(tried) < len(grid)             # stopped: the last two rose past the best so far
    assert min(v[:-2]) < v[-2] and min(v[:-2]) < v[-1]
    assert early.l2_ == min(early.val_table_, key=early.val_table_.get)


def test_validation_split_keeps_groups_apart_and_errors():
    data, lib, _ = ll.make_hotel_search(120, n_items=4, seed=13)
    groups = np.repeat(np.arange(30), 4)
    fit_idx, val_idx = _split_index(data, 0.2, 0, groups)
    assert set(groups[fit_idx]).isdisjoint(groups[val_idx])
    with pytest.raises(ValueError, match="l2_grid"):
        ll.PredicateMNL(lib, l2_grid=(-1.0,))
    with pytest.raises(ValueError, match="val_fraction"):
        ll.PredicateMNL(lib, val_fraction=1.0)
    with pytest.raises(ValueError, match="patience"):
        ll.PredicateMNL(lib, patience=0)
    with pytest.raises(ll.NotFittedError):
        ll.PredicateMNL(lib).predict_proba(data)


def test_mnl_baselines_names_and_library_from_training_data():
    models = ll.mnl_baselines(n_bins=3, seed=1)
    assert list(models) == ["MNL (raw features)", "MNL (predicates)", "MNL (predicates + pairs)"]
    data, _, _ = ll.make_hotel_search(200, n_items=5, seed=14)
    m = models["MNL (predicates)"].fit(data)
    ref = ll.PredicateLibrary.from_data(data, 3)         # what LogicLogit(n_bins=3) builds
    assert m.library_.predicates == ref.predicates
    assert m.nll(data) < np.log(5)


def test_versus_paired_gaps_and_n_parameters():
    data, lib, _ = ll.make_hotel_search(200, n_items=5, seed=15)
    a = ll.PredicateMNL(lib, conjunctions=True, l2_grid=(0.01,)).fit(data)
    b = ll.MNL().fit(data)
    vs = ll.versus(a, {"raw": b}, data)
    la, lb = np.log(a.chosen_proba(data)), np.log(b.chosen_proba(data))
    d = la - lb
    assert vs.loc["raw", "NLL gap"] == pytest.approx(b.nll(data) - a.nll(data))
    assert vs.loc["raw", "NLL gap se"] == pytest.approx(d.std(ddof=1) / np.sqrt(len(d)))
    assert vs.loc["raw", "accuracy gap"] == pytest.approx(a.accuracy(data) - b.accuracy(data))
    assert vs.loc["raw", "NLL verdict"] == ("better" if d.mean() > 2 * vs.loc["raw", "NLL gap se"] else
                                            "worse" if d.mean() < -2 * vs.loc["raw", "NLL gap se"] else "tie")
    assert ll.n_parameters(a) == len(a.feature_names_) and ll.n_parameters(b) == 5
