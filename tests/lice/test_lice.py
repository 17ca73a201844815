"""Chapter 14 (LiCE): encodings against brute force on small cases."""

import itertools

import numpy as np
import pandas as pd
import pytest
import torch

import iclr25.lice as L
from iclr25.lice import mio


# ----------------------------------------------------------------- features
def small_frame(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({
        "a": rng.integers(0, 5, n),                       # discrete 0..4, monotone up
        "b": rng.choice(["lo", "mid", "hi"], n),          # ordinal
        "c": rng.choice(["x", "y"], n),                   # binary, immutable
        "d": rng.uniform(0, 10, n),                       # continuous
    })
    y = ((X["a"] + (X["b"] == "hi") * 2 + rng.normal(0, 1, n)) > 3).astype(int).to_numpy()
    specs = [L.Contiguous("a", bounds=(0, 4), discrete=True, monotone="increasing"),
             L.Categorical("b", values=["lo", "mid", "hi"], ordered=True),
             L.Binary("c", values=("x", "y"), mutable=False),
             L.Contiguous("d", bounds=(0, 10))]
    return X, y, specs


def test_encode_decode_roundtrip_and_mad():
    X, y, specs = small_frame()
    h = L.DataHandler(X, y, specs)
    E = h.encode(X)
    assert E.shape == (len(X), 1 + 3 + 1 + 1) and h.n_spn == 5
    back = h.decode(E)
    assert (back["a"].astype(int) == X["a"]).all() and (back["b"] == X["b"]).all()
    assert (back["c"] == X["c"]).all() and np.allclose(back["d"], X["d"])
    # MAD of the normalised discrete column and 1.48 std of a one-hot column
    a = E[:, 0]
    assert np.isclose(h.mad[0], max(np.median(np.abs(a - np.median(a))), 1e-4))
    assert np.isclose(h.mad[1], 1.48 * E[:, 1].std())
    S = h.spn_matrix(X, y)
    assert set(np.unique(S[:, 1])) <= {0, 1, 2} and (S[:, -1] == y).all()


def test_actionability_rules():
    X, y, specs = small_frame()
    h = L.DataHandler(X, y, specs, causal_inc=[("b", "a")])
    x0 = pd.DataFrame({"a": [2], "b": ["mid"], "c": ["x"], "d": [5.0]})
    cands = pd.DataFrame({"a": [1, 3, 2, 3, 2], "b": ["mid", "mid", "mid", "hi", "hi"],
                          "c": ["x", "x", "y", "x", "x"], "d": [5.0, 5.0, 5.0, 5.0, 5.0]})
    # a down (monotone), ok, c changed (immutable), b up with a up (causal ok), b up alone
    assert h.actionable(x0, cands).tolist() == [False, True, False, True, False]
    assert h.changed(x0, cands).sum(axis=1).tolist() == [1, 1, 1, 2, 1]


def test_bad_specs_give_clear_errors():
    X, y, specs = small_frame()
    with pytest.raises(ValueError, match="columns without a spec"):
        L.DataHandler(X, y, specs[:-1])
    with pytest.raises(ValueError, match="monotone must be one of"):
        L.Contiguous("a", monotone="up")
    with pytest.raises(ValueError, match="needs ordered=True"):
        L.Categorical("b", monotone="increasing")
    with pytest.raises(ValueError, match="unknown feature"):
        L.DataHandler(X, y, specs, causal_inc=[("zz", "a")])
    h = L.DataHandler(X, y, specs)
    with pytest.raises(ValueError, match="not in"):
        h.encode(X.assign(b="??"))


def test_mixed_feature_roundtrip():
    X = pd.DataFrame({"m": [-1, 3.0, 7.5, -1, 10.0]})
    h = L.DataHandler(X, np.array([0, 1, 1, 0, 1]), [L.Mixed("m", codes=[-1], bounds=(0, 10))])
    E = h.encode(X)
    assert E.shape == (5, 3) and np.allclose(E[:, 0], [0, 0.3, 0.75, 0, 1.0])
    assert h.decode(E)["m"].tolist() == [-1, 3.0, 7.5, -1, 10.0]
    assert h.spn_types() == [("cat", 2), ("cont", None), ("cat", 2)]


# ----------------------------------------------------------------- SPN
def learned(n=400, slice_=60, seed=0):
    d = L.synthetic_2d(n, seed)
    h = d.handler()
    S = h.spn_matrix(d.X, d.y)
    return h, S, L.LearnSPN(h.spn_types(), min_instances_slice=slice_, seed=seed).fit(S)


def test_spn_normalised_by_enumeration():
    """Sum over the discrete variables and integral over the continuous one of exp(LL) is 1."""
    h, S, spn = learned()
    assert spn.counts()["sum"] >= 1
    x1 = (np.arange(20000) + 0.5) / 20000  # midpoint rule on [0, 1]
    total = 0.0
    for x2 in range(10):
        for yy in (0, 1):
            P = np.c_[x1, np.full_like(x1, x2 / 9), np.full_like(x1, yy)]
            total += np.exp(spn.log_likelihood(P)).mean()
    assert abs(total - 1) < 1e-3


def test_lower_exact_upper_and_bounds():
    h, S, spn = learned()
    rng = np.random.default_rng(1)
    P = np.c_[rng.random(500), rng.integers(0, 10, 500) / 9, rng.integers(0, 2, 500)]
    lo, ex, up = spn.max_approx(P, "lower"), spn.log_likelihood(P), spn.max_approx(P, "upper")
    assert (lo <= ex + 1e-12).all() and (ex <= up + 1e-12).all() and (lo < ex).any()
    blo, bhi = spn.bounds()
    V = spn.node_values(P)
    assert (V >= blo - 1e-9).all() and (V <= bhi + 1e-9).all()
    with pytest.raises(ValueError, match="valid"):
        spn.max_approx(P, "middle")
    with pytest.raises(ValueError, match="expected 3"):
        spn.log_likelihood(P[:, :2])


def test_exact_ll_hand_built_spn():
    """A two-component mixture over one categorical variable: closed form."""
    l0 = L.Leaf(0, 0, "cat", np.log([0.8, 0.2]))
    l1 = L.Leaf(1, 0, "cat", np.log([0.1, 0.9]))
    s = L.Sum(2, [0, 1], np.log([0.3, 0.7]))
    spn = L.SPN([l0, l1, s], n_vars=1)
    X = np.array([[0.0], [1.0]])
    assert np.allclose(np.exp(spn.log_likelihood(X)), [0.3 * 0.8 + 0.7 * 0.1, 0.3 * 0.2 + 0.7 * 0.9])
    assert np.allclose(spn.max_approx(X), np.log([0.24, 0.63]))
    assert np.allclose(spn.max_approx(X, "upper"), np.log([0.48, 1.26]))


@pytest.mark.parametrize("variant", ["lower", "upper"])
def test_mio_root_equals_max_approx(variant):
    h, S, spn = learned()
    rng = np.random.default_rng(2)
    for _ in range(8):
        x = np.array([rng.random(), rng.integers(0, 10) / 9, rng.integers(0, 2)])
        v = mio.spn_value_at(spn, x, sum_approx=variant)
        assert abs(v - spn.max_approx(x[None], variant)[0]) < 1e-6


# ----------------------------------------------------------------- MLP and LiCE vs brute force
def tiny_problem(seed=0):
    X, y, specs = small_frame(300, seed)
    X["d"] = np.round(X["d"]).astype(int)  # make every feature discrete: enumerable
    specs[-1] = L.Contiguous("d", bounds=(0, 10), discrete=True)
    h = L.DataHandler(X, y, specs, causal_inc=[("b", "a")])
    mlp = L.train_mlp(h.encode(X), y, (6,), n_epochs=60, lr=1e-2, seed=seed)
    S = h.spn_matrix(X, y)
    spn = L.LearnSPN(h.spn_types(), min_instances_slice=80, max_bins=4, seed=seed).fit(S)
    return X, y, h, mlp, spn


def all_candidates(h):
    rows = itertools.product(range(5), ["lo", "mid", "hi"], ["x", "y"], range(11))
    return pd.DataFrame(list(rows), columns=["a", "b", "c", "d"])


def test_mlp_encoding_matches_torch():
    X, y, h, mlp, spn = tiny_problem()
    E = h.encode(X.iloc[:5])
    for e in E:
        m = mio.new_model(10)
        xs = [m.addVar(lb=float(v), ub=float(v)) for v in e]
        logit, (lo, hi) = mio.encode_relu_mlp(m, mio.mlp_layers(mlp), xs, e, e)
        m.setObjective(logit, "maximize")
        m.optimize()
        assert abs(m.getObjVal() - L.predict_logit(mlp, e[None])[0]) < 1e-6
        assert lo - 1e-9 <= m.getObjVal() <= hi + 1e-9


def target_and_feasible(h, mlp, x0, C, logit):
    """The class the classifier does not predict for ``x0`` and the mask of the enumerated
    candidates ``C`` (with logits ``logit``) that are valid for it (margin 1e-4) and actionable."""
    target = int(L.predict_logit(mlp, h.encode(x0))[0] <= 0)
    ok = ((logit >= 1e-4) if target == 1 else (-logit >= 1e-4)) & h.actionable(x0, C)
    return target, ok


@pytest.mark.parametrize("mode", ["mio", "threshold", "optimize"])
def test_lice_matches_brute_force(mode):
    X, y, h, mlp, spn = tiny_problem()
    C = all_candidates(h)
    EC = h.encode(C)
    logit = L.predict_logit(mlp, EC)
    lice = L.LiCE(spn, mlp, h)
    checked = 0
    for i in range(12):
        x0 = X.iloc[[i]]
        target, ok = target_and_feasible(h, mlp, x0, C, logit)
        cost = h.distance(h.encode(x0), EC)
        ll = spn.max_approx(h.spn_matrix(C, target))
        theta = float(np.median(spn.log_likelihood(h.spn_matrix(X, y))))
        if mode == "threshold":
            ok &= ll >= theta
        obj = cost - 0.1 * ll if mode == "optimize" else cost
        ex = lice.explain(x0, target, mode=mode, theta=theta, alpha=0.1, time_limit=30)
        if not ok.any():
            assert not ex.found
            continue
        assert ex.found and ex.stats["optimal"][0]
        best = obj[ok].min()
        ours = h.distance(h.encode(x0), ex.encoded)[0]
        if mode == "optimize":
            ours -= 0.1 * ex.stats["mio_ll"][0]
        assert abs(ours - best) < 1e-5, (i, ours, best)
        ev = L.evaluate(h, spn, mlp, x0, ex.counterfactuals, target)
        assert ev["valid"].all() and ev["actionable"].all()
        checked += 1
    assert checked >= 3


def test_n_counterfactuals_by_no_good_cuts():
    X, y, h, mlp, spn = tiny_problem()
    lice = L.LiCE(spn, mlp, h)
    for i in range(10):
        ex = lice.explain(X.iloc[[i]], mode="optimize", n=3, time_limit=30)
        if ex.found:
            break
    assert len(ex.counterfactuals) == 3
    assert len({tuple(r) for r in np.round(ex.encoded, 6)}) == 3
    obj = np.array(ex.stats["cost"]) - 0.1 * np.array(ex.stats["mio_ll"])
    assert np.all(np.diff(obj) >= -1e-6)  # each re-solve has a smaller feasible set


def test_explain_errors():
    X, y, h, mlp, spn = tiny_problem()
    lice = L.LiCE(spn, mlp, h)
    with pytest.raises(ValueError, match="valid"):
        lice.explain(X.iloc[[0]], mode="best")
    with pytest.raises(ValueError, match="theta"):
        lice.explain(X.iloc[[0]], mode="threshold")
    with pytest.raises(ValueError, match="one-row"):
        lice.explain(X.iloc[:2])
    with pytest.raises(ValueError, match="only mode 'mio'"):
        L.LiCE(None, mlp, h).explain(X.iloc[[0]], mode="optimize")
    # infeasible: a threshold above every attainable LL gives no counterfactual, not an error
    ex = lice.explain(X.iloc[[0]], mode="threshold", theta=1e3, time_limit=10)
    assert not ex.found and ex.stats["status"][0] == "infeasible"


def test_big_m_from_bounds_agrees_with_constant():
    h, S, spn = learned()
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = np.array([rng.random(), rng.integers(0, 10) / 9, 1])
        assert abs(mio.spn_value_at(spn, x) - mio.spn_value_at(spn, x, M_sum=100.0)) < 1e-6


# ----------------------------------------------------------------- data and baselines
def test_shipped_data():
    d = L.load_credit()
    assert d.X.shape == (1000, 20) and d.y.mean() == pytest.approx(0.7)
    a = L.load_adult()
    assert a.X.shape == (30162, 9) and 0.2 < a.y.mean() < 0.3
    assert list(a.specs[2].values)[:2] == ["Preschool", "1st-4th"]


def test_gmsc_loader(tmp_path):
    rng = np.random.default_rng(0)
    n = 50
    df = pd.DataFrame({c: rng.integers(0, 5, n) for c in L.data.GMSC_FEATURES})
    df["age"] = rng.integers(21, 80, n)
    df["MonthlyIncome"] = rng.uniform(1000, 9000, n)
    df.loc[3, "MonthlyIncome"] = np.nan
    df.insert(0, L.data.GMSC_TARGET, rng.integers(0, 2, n))
    p = tmp_path / "cs-training.csv"
    df.to_csv(p)
    d = L.load_gmsc(p)
    assert len(d.X) < n and set(d.y) <= {0, 1}
    d.handler()
    with pytest.raises(FileNotFoundError, match="Kaggle"):
        L.load_gmsc(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match="unknown data set"):
        L.load("mnist")


def test_baselines_run():
    X, y, h, mlp, spn = tiny_problem()
    x0 = X.iloc[[0]]
    target = int(L.predict_logit(mlp, h.encode(x0))[0] <= 0)
    cf, s = L.nearest_neighbour_cf(h, mlp, spn, X, x0, target)
    ev = L.evaluate(h, spn, mlp, x0, cf, target)
    assert len(cf) == 1 and ev["valid"].all()
    cf, s = L.dice_counterfactuals(h, mlp, spn, X, y, x0, target, n=3)
    assert len(cf) <= 1


def test_config_errors():
    assert L.config("cf", "smoke").n_per_fold >= 1 and L.config("cf", "smoke").n_folds >= 2
    with pytest.raises(ValueError, match="valid"):
        L.config("nope", "smoke")
    with pytest.raises(ValueError, match="valid"):
        L.config("cf", "smoke", n_factualz=3)


def test_mixed_feature_in_the_mip():
    """A mixed feature (value or special code) goes through encoding, SPN and MIP consistently."""
    rng = np.random.default_rng(0)
    n = 300
    v = rng.uniform(0, 10, n)
    code = rng.random(n) < 0.3
    m = np.where(code, -1.0, np.round(v, 1))
    X = pd.DataFrame({"m": m, "k": rng.integers(0, 4, n)})
    y = ((np.where(code, 0, v) + X["k"] + rng.normal(0, 1, n)) > 6).astype(int)
    h = L.DataHandler(X, y, [L.Mixed("m", codes=[-1.0], bounds=(0, 10)),
                             L.Contiguous("k", bounds=(0, 3), discrete=True)])
    mlp = L.train_mlp(h.encode(X), y, (4,), n_epochs=60, lr=1e-2)
    spn = L.LearnSPN(h.spn_types(), min_instances_slice=100, seed=0).fit(h.spn_matrix(X, y))
    lice = L.LiCE(spn, mlp, h)
    done = 0
    for i in range(20):
        x0 = X.iloc[[i]]
        target = int(L.predict_logit(mlp, h.encode(x0))[0] <= 0)
        ex = lice.explain(x0, target, mode="optimize", time_limit=20)
        if not ex.found:
            continue
        e = ex.encoded[0]
        assert e[1] + e[2] == pytest.approx(1) and (e[2] > 0.5 or abs(e[0]) < 1e-6)  # value 0 under a code
        ev = L.evaluate(h, spn, mlp, x0, ex.counterfactuals, target)
        assert ev["valid"].all()
        done += 1
    assert done >= 3


def test_paired_aligns_factuals_where_both_qualify():
    import pandas as pd
    from iclr25.lice import paired

    rows = pd.DataFrame({
        "method": ["A", "A", "A", "B", "B", "B"],
        "factual": [0, 1, 2, 2, 1, 0],            # B's rows in another order
        "found": [True, True, False, True, True, True],
        "optimal": [True, False, False, True, True, True],
        "nll": [1.0, 2.0, 3.0, 30.0, 20.0, 10.0]})
    a, b = paired(rows, "A", "B", "nll")
    assert a.tolist() == [1.0, 2.0] and b.tolist() == [10.0, 20.0]   # factual 2: A found none
    a, b = paired(rows, "A", "B", "nll", need="optimal")
    assert a.tolist() == [1.0] and b.tolist() == [10.0]
    with pytest.raises(ValueError, match="methods: \\['A', 'B'\\]"):
        paired(rows, "A", "C", "nll")


# ------------------------------------------------- the paper's protocol (issue 32)
def test_n_best_patterns_match_brute_force():
    """The no-good re-solves return the n best discrete patterns (categories and histogram bins),
    in order: compared against enumerating every candidate counterfactual."""
    X, y, h, mlp, spn = tiny_problem()
    C = all_candidates(h)
    EC = h.encode(C)
    logit = L.predict_logit(mlp, EC)
    lice = L.LiCE(spn, mlp, h)
    hist = [n for n in spn.nodes if isinstance(n, L.Leaf) and n.kind == "hist"]
    checked = 0
    for i in range(8):
        x0 = X.iloc[[i]]
        target, ok = target_and_feasible(h, mlp, x0, C, logit)
        S = h.spn_matrix(C, target)
        obj = h.distance(h.encode(x0), EC) - 0.1 * spn.max_approx(S)
        keys = [tuple(C.iloc[j][["b", "c"]]) + tuple(int(n.bin_index(S[j:j + 1, n.var])[0]) for n in hist)
                for j in range(len(C))]
        best = {}
        for j in np.flatnonzero(ok):
            best[keys[j]] = min(best.get(keys[j], np.inf), obj[j])
        want = sorted(best.values())[:3]
        ex = lice.explain(x0, target, mode="optimize", n=3, time_limit=60)
        assert len(ex.stats["objective"]) == len(want)
        assert all(ex.stats["optimal"])
        np.testing.assert_allclose(ex.stats["objective"], want, atol=1e-5)
        checked += 1
    assert checked >= 5


def tiny_prepared():
    X, y, specs = small_frame(300, 0)
    X["d"] = np.round(X["d"]).astype(int)
    specs[-1] = L.Contiguous("d", bounds=(0, 10), discrete=True)
    ds = L.Dataset("tiny", X, y, specs, causal_inc=[("b", "a")])
    return L.prepare(ds, hidden=(6,), n_epochs=300, min_instances_slice=80, max_bins=4, seed=0)


def test_run_methods_reports_the_most_likely_valid_of_n():
    p = tiny_prepared()
    rows = L.run_methods(p, p.test[:5], ["MIO", "LiCE (optimize)"], n_cf=2, time_limit=30)
    lice = L.LiCE(p.spn, p.mlp, p.handler)
    checked = 0
    for _, r in rows.iterrows():
        x0 = p.data.X.iloc[[r["factual"]]].reset_index(drop=True)
        target = int(L.predict_logit(p.mlp, p.handler.encode(x0))[0] <= 0)
        mode = dict(mode="mio") if r["method"] == "MIO" else dict(mode="optimize", alpha=0.1)
        ex = lice.explain(x0, target, n=2, time_limit=30, **mode)
        ev = L.evaluate(p.handler, p.spn, p.mlp, x0, ex.counterfactuals, target)
        assert r["n_cf"] == len(ev)
        if not len(ev):
            assert not r["found"] and r["selected"] == -1
            continue
        assert r["valid"]
        checked += 1
        assert r["nll"] == pytest.approx(ev.loc[ev["valid"], "nll"].min())
        cf = ex.counterfactuals.iloc[[int(r["selected"])]]
        S = p.handler.spn_matrix(cf, target)
        gap = p.spn.log_likelihood(S)[0] - p.spn.max_approx(S)[0]
        assert r["spn_gap"] == pytest.approx(gap) and gap >= -1e-12
    assert checked >= 2
    with pytest.raises(ValueError, match="n_cf"):
        L.run_methods(p, p.test[:1], ["MIO"], n_cf=0)


def test_mean_ci_closed_form_and_paired_diff():
    m, half = L.mean_ci([1.0, 2.0, 3.0, 4.0])
    assert m == 2.5 and half == pytest.approx(3.182446305 * np.std([1, 2, 3, 4], ddof=1) / 2)
    assert np.isnan(L.mean_ci([1.0])[1]) and np.isnan(L.mean_ci([])[0])
    rng = np.random.default_rng(0)
    n = 20
    base = rng.normal(30, 5, n)
    rows = pd.DataFrame({
        "method": ["MIO"] * n + ["LiCE (optimize)"] * n,
        "factual": list(range(n)) * 2, "found": True, "valid": True, "actionable": True,
        "nll": np.r_[base, base - 5 + rng.normal(0, 0.5, n)],
        "distance": np.r_[np.full(n, 4.0), np.full(n, 4.2)], "n_changed": 2, "n_cf": 10,
        "time": 1.0, "cpu": 1.0})
    d = L.paired_diff(rows, "LiCE (optimize)", "MIO", "nll")
    assert d["n"] == n and d["hi"] < 0 and d["diff"] == pytest.approx(-5, abs=0.5)
    table = L.summarise_ci(rows).set_index("method")
    assert table.loc["MIO", "distance"] == 4.0 and table.loc["MIO", "distance ±"] == pytest.approx(0)


def test_protocol_parameter_errors():
    with pytest.raises(ValueError, match="valid"):
        mio.new_model(1, separating="max")
    with pytest.raises(ValueError, match="valid"):
        L.prepare_config(L.config("cf", "smoke", dataset="mnist"))
    assert L.config("cf", "book").hidden == (20, 10) and L.config("cf", "book").n_folds * L.config("cf", "book").n_per_fold >= 20


# ------------------------------------------------- deterministic budgets (issue 32, rerun)
def _credit_small():
    d = L.load_credit()
    return L.prepare(d, hidden=(20, 10), n_epochs=20, seed=0)


def test_two_solves_with_the_same_settings_give_the_identical_result():
    """With a node budget that stops SCIP early (so the incumbent depends on the search path),
    two runs with the same settings return bit-identical counterfactuals and statistics."""
    p = _credit_small()
    lice = L.LiCE(p.spn, p.mlp, p.handler)
    x0 = p.data.X.iloc[[p.test[0]]].reset_index(drop=True)
    runs = [lice.explain(x0, mode="optimize", n=3, node_limit=20, seed=0) for _ in range(2)]
    a, b = runs
    assert a.found and not all(a.stats["optimal"])  # the node limit did bind
    np.testing.assert_array_equal(a.encoded, b.encoded)
    for k in ("objective", "nodes", "status", "optimal", "mio_ll"):
        assert a.stats[k] == b.stats[k], k
    assert sum(a.stats["nodes"]) <= 20 and not a.stats["hit_time_limit"]
    # the whole protocol: every column but the timings is identical
    rows = [L.run_methods(p, p.test[:2], ["MIO", "LiCE (optimize)"], n_cf=2, node_limit=20)
            for _ in range(2)]
    keep = [c for c in rows[0].columns if c not in ("time", "cpu", "build_time")]
    pd.testing.assert_frame_equal(rows[0][keep], rows[1][keep])
    assert not rows[0]["hit_time_limit"].any()


def test_node_limit_errors_and_safety_net():
    with pytest.raises(ValueError, match="node_limit"):
        mio.new_model(node_limit=0)
    with pytest.raises(ValueError, match="lp_iterlim"):
        mio.new_model(lp_iterlim=0)
    m = mio.new_model(node_limit=7, lp_iterlim=50)
    assert m.getParam("limits/nodes") == 7 and m.getParam("lp/iterlim") == 50
    assert m.getParam("parallel/maxnthreads") == 1
    X, y, h, mlp, spn = tiny_problem()
    ex = L.LiCE(spn, mlp, h).explain(X.iloc[[0]], mode="optimize", n=2, time_limit=1e-3)
    assert ex.stats["hit_time_limit"]


# ------------------------------------- one solve with its pool, and a shared warm start (issue 32)
def _brute_start(h, spn, mlp, X, x0, target, theta):
    """The nearest repaired training row feasible for every program, by a plain loop."""
    a0, b0, c0 = int(x0["a"].iloc[0]), x0["b"].iloc[0], x0["c"].iloc[0]
    order = ["lo", "mid", "hi"]
    best, best_d = None, np.inf
    e0 = h.encode(x0)
    for _, r in X.iterrows():
        cand = pd.DataFrame({"a": [max(int(r["a"]), a0)], "b": [r["b"]], "c": [c0], "d": [r["d"]]})
        if order.index(cand["b"][0]) > order.index(b0) and not cand["a"][0] > a0:
            continue  # causal rule b -> a
        e = h.encode(cand)
        lg = float(L.predict_logit(mlp, e)[0]) * (1 if target == 1 else -1)
        if lg < 1e-4 + 1e-3:
            continue
        if theta is not None and spn.max_approx(h.spn_matrix(cand, target))[0] < theta + 1e-3:
            continue
        d = float(h.distance(e0, e)[0])
        if d < best_d:
            best, best_d = cand, d
    return best, best_d


def test_warm_start_is_the_nearest_feasible_repaired_row():
    X, y, h, mlp, spn = tiny_problem()
    theta = float(np.median(spn.log_likelihood(h.spn_matrix(X, y))))
    checked = 0
    for i in range(6):
        x0 = X.iloc[[i]].reset_index(drop=True)
        target = int(L.predict_logit(mlp, h.encode(x0))[0] <= 0)
        for th in (None, theta):
            ws = L.warm_start(h, spn, mlp, X, x0, target, theta=th)
            want, d = _brute_start(h, spn, mlp, X, x0, target, th)
            if want is None:
                assert len(ws) == 0
                continue
            assert len(ws) == 1 and h.distance(h.encode(x0), h.encode(ws))[0] == pytest.approx(d)
            ev = L.evaluate(h, spn, mlp, x0, ws, target)
            assert ev["valid"].all() and ev["actionable"].all()
            checked += 1
    assert checked >= 6
    with pytest.raises(ValueError, match="target"):
        L.warm_start(h, spn, mlp, X, X.iloc[[0]], 2)
    with pytest.raises(ValueError, match="theta needs"):
        L.warm_start(h, None, mlp, X, X.iloc[[0]], 1, theta=0.0)


@pytest.mark.parametrize("mode", ["mio", "threshold", "optimize"])
def test_warm_start_is_feasible_for_every_program(mode):
    """SCIP keeps the shared start in all three programs, so even one node returns a solution."""
    X, y, h, mlp, spn = tiny_problem()
    theta = float(np.median(spn.log_likelihood(h.spn_matrix(X, y))))
    lice = L.LiCE(spn, mlp, h)
    used = 0
    for i in range(6):
        x0 = X.iloc[[i]].reset_index(drop=True)
        target = int(L.predict_logit(mlp, h.encode(x0))[0] <= 0)
        ws = L.warm_start(h, spn, mlp, X, x0, target, theta=theta)
        if not len(ws):
            continue
        ex = lice.explain(x0, target, mode=mode, theta=theta, n=3, node_limit=1, collect="pool", start=ws)
        assert ex.stats["start_accepted"] is True and ex.found
        assert ex.stats["objective"][0] <= ex.stats["objective"][-1]
        used += 1
    assert used >= 3


def test_pool_returns_distinct_valid_counterfactuals_best_first():
    """One solve to optimality: the first of the pool is the brute-force optimum, the rest are
    distinct valid, actionable counterfactuals in objective order."""
    X, y, h, mlp, spn = tiny_problem()
    C = all_candidates(h)
    EC = h.encode(C)
    logit = L.predict_logit(mlp, EC)
    lice = L.LiCE(spn, mlp, h)
    checked = 0
    for i in range(8):
        x0 = X.iloc[[i]]
        target, ok = target_and_feasible(h, mlp, x0, C, logit)
        obj = h.distance(h.encode(x0), EC) - 0.1 * spn.max_approx(h.spn_matrix(C, target))
        ex = lice.explain(x0, target, mode="optimize", n=5, collect="pool", time_limit=60)
        if not ok.any():
            assert not ex.found
            continue
        assert ex.stats["optimal"][0] and ex.stats["objective"][0] == pytest.approx(obj[ok].min(), abs=1e-5)
        assert len({tuple(r) for r in np.round(ex.encoded, 6)}) == len(ex.encoded)
        assert np.all(np.diff(ex.stats["objective"]) >= -1e-9)
        ev = L.evaluate(h, spn, mlp, x0, ex.counterfactuals, target)
        assert ev["valid"].all() and ev["actionable"].all()
        # each objective is the program's value at the decoded point: cost - 0.1 max-approximation
        mine = h.distance(h.encode(x0), h.encode(ex.counterfactuals)) - 0.1 * spn.max_approx(
            h.spn_matrix(ex.counterfactuals, target))
        np.testing.assert_allclose(mine, ex.stats["objective"], atol=1e-5)
        assert np.all(np.array(ex.stats["mio_ll"]) <= spn.max_approx(
            h.spn_matrix(ex.counterfactuals, target)) + 1e-6)
        checked += 1
    assert checked >= 4
    with pytest.raises(ValueError, match="collect"):
        lice.explain(X.iloc[[0]], collect="all")
    with pytest.raises(ValueError, match="start"):
        lice.explain(X.iloc[[0]], start=X.iloc[:2])


def test_run_methods_pool_warm_reports_the_most_likely_valid():
    """The pool path with the shared start: the reported counterfactual is the valid one with the
    highest exact LL among what that solve returned (brute-force choice), and every MIO-based
    method got the same start."""
    p = tiny_prepared()
    meths = ["MIO", "LiCE (optimize)", "LiCE (median)"]
    rows = L.run_methods(p, p.test[:4], meths, n_cf=4, node_limit=3, collect="pool", warm=True)
    lice = L.LiCE(p.spn, p.mlp, p.handler)
    Xtr = p.data.X.iloc[p.train].reset_index(drop=True)
    checked = 0
    for _, r in rows.iterrows():
        x0 = p.data.X.iloc[[r["factual"]]].reset_index(drop=True)
        target = int(L.predict_logit(p.mlp, p.handler.encode(x0))[0] <= 0)
        ws = L.warm_start(p.handler, p.spn, p.mlp, Xtr, x0, target, theta=p.thresholds["median"])
        kw = {"MIO": dict(mode="mio"), "LiCE (optimize)": dict(mode="optimize", alpha=0.1),
              "LiCE (median)": dict(mode="threshold", theta=p.thresholds["median"])}[r["method"]]
        ex = lice.explain(x0, target, n=4, node_limit=3, collect="pool",
                          start=ws if len(ws) else None, **kw)
        ev = L.evaluate(p.handler, p.spn, p.mlp, x0, ex.counterfactuals, target)
        assert r["n_cf"] == len(ev) and r["start_accepted"] == ex.stats["start_accepted"]
        if len(ws):
            assert r["found"] and r["start_accepted"]
        if not r["found"]:
            continue
        best = int(np.argmin(np.where(ev["valid"], ev["nll"], np.inf)))
        assert r["selected"] == best and r["nll"] == pytest.approx(ev["nll"][best])
        assert r["from_start"] == bool(len(ws) and np.allclose(ex.encoded[best], p.handler.encode(ws)[0]))
        checked += 1
    assert checked >= 6


def test_pool_with_start_and_aggressive_heuristics_is_deterministic():
    """The book protocol (one 20-node solve, shared start, aggressive heuristics) twice on a credit
    factual: identical counterfactuals and statistics; the pool holds only solutions that beat
    the start (or the best one when none does)."""
    p = _credit_small()
    lice = L.LiCE(p.spn, p.mlp, p.handler)
    x0 = p.data.X.iloc[[p.test[0]]].reset_index(drop=True)
    target = int(L.predict_logit(p.mlp, p.handler.encode(x0))[0] <= 0)
    Xtr = p.data.X.iloc[p.train].reset_index(drop=True)
    ws = L.warm_start(p.handler, p.spn, p.mlp, Xtr, x0, target, theta=p.thresholds["median"])
    assert len(ws) == 1
    runs = [lice.explain(x0, target, mode="optimize", n=10, node_limit=20, collect="pool", start=ws,
                         heuristics="aggressive") for _ in range(2)]
    a, b = runs
    assert a.found and a.stats["start_accepted"] and a.stats["nodes"][0] <= 20
    np.testing.assert_array_equal(a.encoded, b.encoded)
    for k in ("objective", "nodes", "status", "n_stored", "beat_start"):
        assert a.stats[k] == b.stats[k], k
    obj_s = p.handler.distance(p.handler.encode(x0), p.handler.encode(ws))[0] - 0.1 * p.spn.max_approx(
        p.handler.spn_matrix(ws, target))[0]
    if a.stats["beat_start"]:
        assert max(a.stats["objective"]) < obj_s and 1 <= len(a.encoded) <= min(10, a.stats["beat_start"])
    else:
        assert len(a.encoded) == 1 and a.stats["objective"][0] <= obj_s + 1e-6
    with pytest.raises(ValueError, match="heuristics"):
        mio.new_model(heuristics="max")
