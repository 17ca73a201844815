"""Chapter 01: hyperparameters chosen on validation (never on test) against brute force, the
market-share chance level against its closed form, the choice of a control on validation scores,
and the measurements handed to the registry (one per registered finding of each notebook)."""

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

import iclr25.logic_logit as ll
from iclr25 import registry
from iclr25.profiles import ProfileError


def _planted(n=300, seed=0, n_items=6):
    data, lib, _ = ll.make_hotel_search(n, n_items=n_items, seed=seed)
    return data, lib


def test_tuned_is_the_brute_force_choice_on_the_validation_split():
    data, lib = _planted(400, seed=1)
    grid = (1.0, 1e-2, 1e-5)
    tuned = ll.Tuned(lambda l2: ll.MNL(l2=l2), grid, val_fraction=0.25, seed=3, name="l2").fit(data)
    fit, val = ll.validation_split(data, 0.25, seed=3)
    assert not set(fit) & set(val) and len(fit) + len(val) == data.n_obs
    by_hand = {}
    for l2 in grid:
        m = ll.MNL(l2=l2).fit(data.subset(fit))
        by_hand[l2] = (m.nll(data.subset(val)), m.accuracy(data.subset(val)))
    best = min(grid, key=lambda h: by_hand[h][0])
    assert tuned.best_ == best
    for h in grid:
        assert tuned.val_table_[h]["nll"] == pytest.approx(by_hand[h][0])
        assert tuned.val_table_[h]["accuracy"] == pytest.approx(by_hand[h][1])
    assert tuned.val_scores_ == tuned.val_table_[best]
    refit = ll.MNL(l2=best).fit(data)                       # refit on all the training choices
    np.testing.assert_allclose(tuned.predict_proba(data), refit.predict_proba(data), atol=1e-10)
    assert tuned.coef_.shape == refit.coef_.shape           # attributes come from the refit model
    assert ll.n_parameters(tuned) == 5


def test_tuned_splits_by_group_and_rejects_bad_input():
    data, _ = _planted(200, seed=2)
    data.meta["groups"] = np.repeat(np.arange(40), 5)
    fit, val = ll.validation_split(data, 0.2, seed=0)
    g = data.meta["groups"]
    assert not set(g[fit]) & set(g[val]) and len(set(g[val])) == 8
    with pytest.raises(ValueError, match="grid must hold"):
        ll.Tuned(lambda h: ll.MNL(), ())
    with pytest.raises(ValueError, match="val_fraction"):
        ll.Tuned(lambda h: ll.MNL(), (1,), val_fraction=1.0)
    with pytest.raises(TypeError, match="callable"):
        ll.Tuned("MNL", (1,))
    with pytest.raises(TypeError, match="ChoiceModel"):
        ll.Tuned(lambda h: object(), (1,)).fit(data)
    with pytest.raises(ll.NotFittedError):
        ll.Tuned(lambda h: ll.MNL(), (1,)).predict_proba(data)
    with pytest.raises(AttributeError, match="not fitted"):
        ll.Tuned(lambda h: ll.MNL(), (1,)).coef_


def test_predicate_mnl_validation_scores_are_those_of_its_fit_on_the_fit_part():
    data, lib = _planted(400, seed=4)
    m = ll.PredicateMNL(lib, conjunctions=True, l2_grid=(1.0, 1e-2, 1e-4), val_fraction=0.2, seed=5).fit(data)
    fit, val = ll.validation_split(data, 0.2, seed=5)       # the same split Tuned(seed=5) uses
    # brute force: the same columns (chosen from the offered items of all training choices), the
    # penalised NLL of the fit part minimised by a generic optimiser, scored on the validation part
    ref = ll.PredicateMNL(lib, conjunctions=True, l2_grid=(m.l2_,), val_fraction=0).fit(data)
    fdata, vdata = data.subset(fit), data.subset(val)
    F, idx = ref.features(fdata), np.arange(fdata.n_obs)

    def objective(b):
        lp = ll.log_softmax(F @ b, fdata.mask)[idx, fdata.choice]
        S = ll.softmax(F @ b, fdata.mask)
        g = -(F[idx, fdata.choice] - np.einsum("nj,njd->nd", S, F)).mean(0) + m.l2_ * b
        return -lp.mean() + 0.5 * m.l2_ * b @ b, g

    res = minimize(objective, np.zeros(F.shape[2]), jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10})
    ref.beta_ = res.x
    assert m.val_scores_["nll"] == pytest.approx(ref.nll(vdata), abs=1e-5)
    # indicator features make ties common: the flat accuracy breaks them as predict() does
    assert m.val_scores_["accuracy"] == pytest.approx(ref.accuracy(vdata), abs=1e-12)
    assert ll.PredicateMNL(lib, l2_grid=(0.1,), val_fraction=0).fit(data).val_scores_ is None


def test_market_shares_closed_form_and_uniform():
    X = np.zeros((5, 3, 1))
    mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 1], [1, 1, 1], [0, 1, 1]], bool)
    choice = np.array([0, 0, 2, 1, 2])
    data = ll.ChoiceData(X, mask, choice, ("x",), ("a", "b", "c"))
    m = ll.MarketShare().fit(data)
    s = (np.array([2, 1, 2]) + 1.0) / (5 + 3)               # Laplace-smoothed training shares
    np.testing.assert_allclose(m.shares_, s)
    P = m.predict_proba(data)
    np.testing.assert_allclose(P[1], [s[0] / (s[0] + s[1]), s[1] / (s[0] + s[1]), 0])
    np.testing.assert_allclose(P[4], [0, s[1] / (s[1] + s[2]), s[2] / (s[1] + s[2])])
    assert ll.n_parameters(m) == 2
    u = ll.MarketShare(use_labels=False).fit(data)
    assert u.nll(data) == pytest.approx(ll.uniform_nll(data))
    unlabelled = ll.ChoiceData(X, mask, choice, ("x",))     # slots are not alternatives: uniform
    assert ll.MarketShare().fit(unlabelled).nll(data) == pytest.approx(ll.uniform_nll(data))
    with pytest.raises(ValueError, match="slots"):
        m.predict_proba(ll.ChoiceData(np.zeros((1, 2, 1)), np.ones((1, 2), bool), [0], ("x",)))


def _table(rows):
    return pd.DataFrame(rows, columns=["model", "val NLL", "val accuracy", "test NLL", "test accuracy"]
                        ).set_index("model")


def test_chosen_on_validation_is_the_brute_force_choice_and_ignores_test():
    rng = np.random.default_rng(0)
    for _ in range(50):
        names = [f"m{k}" for k in range(5)]
        val_acc = rng.choice([0.3, 0.4, 0.5], 5)             # ties in accuracy are frequent
        t = _table([(n, rng.uniform(1, 2), a, rng.uniform(1, 2), rng.uniform(0, 1))
                    for n, a in zip(names, val_acc)])
        cand = list(rng.choice(names, 3, replace=False))
        name, v = ll.chosen_on_validation(t, cand)
        assert name == t.loc[cand, "val NLL"].idxmin() and v == t.loc[name, "test NLL"]
        best = [c for c in cand if t.loc[c, "val accuracy"] == t.loc[cand, "val accuracy"].max()]
        want = min(best, key=lambda c: t.loc[c, "val NLL"])
        name, v = ll.chosen_on_validation(t, cand, "accuracy")
        assert name == want and v == t.loc[want, "test accuracy"]
        t2 = t.copy()
        t2["test NLL"], t2["test accuracy"] = rng.permutation(t2["test NLL"]), 0.0
        assert ll.chosen_on_validation(t2, cand)[0] == ll.chosen_on_validation(t, cand)[0]
    with pytest.raises(KeyError, match="not in the table"):
        ll.chosen_on_validation(t, ["nope"])
    t.loc["uniform"] = [np.nan, np.nan, 1.0, 0.1]
    with pytest.raises(ValueError, match="without validation scores"):
        ll.chosen_on_validation(t, ["uniform", "m0"])
    with pytest.raises(ValueError, match="metric"):
        ll.chosen_on_validation(t, ["m0"], "auc")


def _tiny_cfg(nb="03-real-choices", **kw):
    base = dict(n_obs=300, max_types=2, max_len=2, beam_width=3, em_iters=3, nn_steps=15, refine_iters=1,
                budgets=(1, 2), l2_tries=(1e-1, 1e-3), class_tries=(1, 2), nn_widths=(2, 3))
    return ll.config(nb, "smoke", **{**base, **kw})


def test_real_data_run_scores_test_once_and_chooses_on_validation():
    """The defect of the first revision: Logic-Logit's budget was chosen on test NLL. Here every
    choice must be the same whatever the test split holds."""
    data, _ = _planted(420, seed=3)
    data.item_names = None
    cfg = _tiny_cfg()
    run = ll.real_data_run(data, cfg, seed=0)
    t = run["table"]
    assert {"uniform", "market shares", *ll.REAL_BASELINES, "Logic-Logit"} == set(t.index)
    m = run["fitted"]["Logic-Logit"]
    assert m.best_ == min(m.val_table_, key=lambda r: m.val_table_[r]["nll"])
    assert t.loc["Logic-Logit", "chosen"] == f"R={m.best_}"
    assert t.loc["Logic-Logit", "test NLL"] == pytest.approx(m.nll(run["test"]))
    assert t.loc["uniform", "test NLL"] == pytest.approx(ll.uniform_nll(run["test"]))
    # refit on other test data: every validation-side number and choice is unchanged
    scrambled = run["test"].subset(np.arange(run["test"].n_obs)[::-1][:50])
    t2, _ = ll.score_models({"Logic-Logit": ll.logic_logit(cfg, run["library"], 0)}, run["train"], scrambled)
    assert t2.loc["Logic-Logit", "chosen"] == t.loc["Logic-Logit", "chosen"]
    assert t2.loc["Logic-Logit", "val NLL"] == pytest.approx(t.loc["Logic-Logit", "val NLL"])
    meas = ll.real_data_measurements([run, run], "swissmetro")
    ours, ctrl = meas["swissmetro-nll-best-of-all"]
    assert ours == [t.loc["Logic-Logit", "test NLL"]] * 2
    assert ctrl == [ll.chosen_on_validation(t, ll.REAL_BASELINES)[1]] * 2
    assert meas["swissmetro-nll-vs-market-shares"][1] == [t.loc["market shares", "test NLL"]] * 2
    mt = ll.measurement_table(meas, [0, 1])
    assert mt.loc["swissmetro-nll-vs-raw-mnl", "control, 1"] == t.loc["MNL (raw features)", "test NLL"]


def _registered(notebook):
    entries = registry.load("01-logic-logit")
    return {k for k, e in entries.items() if e.notebook == notebook and e.kind == "finding"
            and e.profile == "book"}


def test_every_registered_book_finding_gets_a_measurement():
    fake_table = _table([(n, 1.0, 0.5, 1.0, 0.5) for n in
                         ("MNL (raw features)", *ll.PREDICATE_MNLS, "LC-MNL (EM)", "LC-MNL (Frank-Wolfe)",
                          "LC-MNL (Frank-Wolfe, predicates)", "neural utility (MLP)", "market shares",
                          "oracle (planted)", "Logic-Logit")])

    class _Rep:
        recall, precision = 0.75, 0.5

    run = {"table": fake_table, "report": _Rep(), "report_grid": _Rep(), "gaps": np.array([0.3, 0.1]),
           "chance": {"recall max": 0.25, "precision max": 0.1}}
    assert set(ll.consider_then_choose_measurements([run])) == _registered("01-consider-then-choose")
    solver = ll.solver_measurements([run])
    assert set(solver) == _registered("02-inside-the-solver")
    assert solver["fw-gap-shrinks"] == ([pytest.approx(-0.2)], None)
    real03 = {**ll.real_data_measurements([run], "swissmetro"), **ll.real_data_measurements([run], "yogurt")}
    assert set(real03) == _registered("03-real-choices")
    real04 = {**ll.real_data_measurements([run], "modecanada"), **ll.real_data_measurements([run], "tafeng")}
    assert set(real04) == _registered("04-mode-and-basket-choices")


def test_consider_then_choose_run_pairs_the_models_on_one_replicate():
    cfg = _tiny_cfg("01-consider-then-choose", n_obs=500, n_draws=3)
    run = ll.consider_then_choose_run(cfg, seed=1)
    t = run["table"]
    assert t.loc["oracle (planted)", "test NLL"] == pytest.approx(run["oracle"].nll(run["split"].test))
    assert run["report"].n_learned == sum(len(x.rules) for x in run["fitted"]["Logic-Logit"].types_)
    meas = ll.consider_then_choose_measurements([run])
    assert meas["planted-rule-recall-vs-chance"] == ([run["report"].recall], [run["chance"]["recall max"]])
    assert meas["planted-rule-recall-generator-grid"] == ([run["report_grid"].recall], None)
    again = ll.planted_split(500, seed=1, test_size=cfg.test_size, n_bins=cfg.n_bins)
    np.testing.assert_array_equal(again.test.choice, run["split"].test.choice)   # fresh data per seed
    other = ll.planted_split(500, seed=2, test_size=cfg.test_size, n_bins=cfg.n_bins)
    assert not np.array_equal(other.train.X, run["split"].train.X)


def test_frank_wolfe_gaps_and_config_tries():
    hist = [{"phase": "init", "gap": 0.4}, {"phase": "frank-wolfe", "gap": 0.2},
            {"phase": "frank-wolfe", "gap": np.nan}, {"phase": "refine", "gap": 5.0}]
    np.testing.assert_allclose(ll.frank_wolfe_gaps(hist), [0.4, 0.2])
    cfg = ll.config("03-real-choices", "book")
    assert cfg.replicates == (0, 1, 2) and len(cfg.budgets) == len(cfg.l2_tries) == len(cfg.class_tries)
    assert ll.config("01-consider-then-choose", "book", seed=3).replicates == (3, 4, 5, 6, 7)
    with pytest.raises(ValueError, match="same number of tries"):
        ll.config("03-real-choices", "book", budgets=(1, 2))
    with pytest.raises(ProfileError, match="max_rules"):
        ll.config("03-real-choices", "book", max_rules=2)
