"""Chapter 17: the registered statistics against brute force and closed forms."""

import itertools

import numpy as np
import pytest

from iclr25.soft_preference_learning import evaluation as E
from iclr25.soft_preference_learning import experiments as X
from iclr25.soft_preference_learning import closed_form_policy, tv_distance


def test_matched_control_interpolates_on_the_first_crossing_and_clamps():
    # a monotone curve: exact linear interpolation
    assert E.matched_control([0.7, 0.5, 0.3], [0.9, 0.5, 0.1], 0.4) == pytest.approx(0.3)
    assert E.matched_control([0.7, 0.5, 0.3], [0.9, 0.5, 0.1], 0.7) == pytest.approx(0.9)
    # beyond the curve: the nearest point (the most representative temperature's value)
    assert E.matched_control([0.7, 0.5, 0.3], [0.9, 0.5, 0.1], 0.1) == pytest.approx(0.1)
    assert E.matched_control([0.7, 0.5, 0.3], [0.9, 0.5, 0.1], 0.9) == pytest.approx(0.9)
    # a curve that turns back: the first segment in temperature order that reaches x0
    assert E.matched_control([0.2, 0.6, 0.1], [1.0, 0.0, 0.5], 0.4) == pytest.approx(0.5)
    # brute force on a dense grid: the interpolant is the piecewise-linear curve
    x, y = np.array([0.0, 1.0, 3.0]), np.array([2.0, 0.0, 4.0])
    for x0 in np.linspace(0, 3, 13):
        assert E.matched_control(x, y, x0) == pytest.approx(np.interp(x0, x, y))
    with pytest.raises(ValueError, match="one length"):
        E.matched_control([0.1, 0.2], [1.0], 0.1)
    with pytest.raises(ValueError, match="finite"):
        E.matched_control([0.1, np.nan], [1.0, 2.0], 0.1)


def test_slope_is_the_least_squares_slope():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=7), rng.normal(size=7)
    assert E.slope(x, y) == pytest.approx(np.polyfit(x, y, 1)[0])
    assert E.slope(np.log([1.0, 0.2, 0.1]), [3.0, 2.0, 1.0]) > 0
    with pytest.raises(ValueError, match="constant"):
        E.slope([1.0, 1.0], [0.0, 1.0])


def test_pass_at_k_matches_enumeration_of_k_draws():
    for q in (0.0, 0.1, 0.5, 1.0):
        for k in (1, 2, 3):
            # brute force: every sequence of k right/wrong draws
            brute = sum(np.prod([q if d else 1 - q for d in draws])
                        for draws in itertools.product([0, 1], repeat=k) if any(draws))
            assert E.pass_at_k(q, k) == pytest.approx(brute, abs=1e-12)
    assert E.pass_at_k([1e-12], 16)[0] == pytest.approx(16e-12)   # no cancellation
    with pytest.raises(ValueError, match="probabilities"):
        E.pass_at_k([1.5], 2)
    with pytest.raises(ValueError, match="positive"):
        E.pass_at_k([0.5], 0)


def test_hard_items_halves_and_best_on_half():
    q = np.array([0.0, 0.1, 0.2, 0.9, 0.8, 0.05, 0.0, 0.5])
    med = np.median(q)
    assert E.hard_items(q).tolist() == [i for i in range(8) if 0 < q[i] < med]
    tune, test = E.split_halves(9, seed=1)
    assert len(tune) == 4 and len(test) == 5 and sorted([*tune, *test]) == list(range(9))
    assert np.array_equal(tune, E.split_halves(9, seed=1)[0])   # seeded
    s = np.array([[0.1, 0.9], [0.2, 0.8], [0.9, 0.0]])
    assert E.best_on_half(s, [0, 1]) == 1 and E.best_on_half(s, [2]) == 0
    assert E.best_on_half(s, [0, 1], higher=False) == 0


def test_option_calibration_by_hand():
    P = np.array([[0.7, 0.2, 0.1], [0.25, 0.25, 0.5]])
    out = E.option_calibration(P, [0, 1])
    assert out["confidence"].tolist() == [0.7, 0.5]
    assert out["right"].tolist() == [1.0, 0.0]
    assert out["overconfidence"] == pytest.approx([-0.3, 0.5])
    assert out["brier"] == pytest.approx([0.09 + 0.04 + 0.01, 0.0625 + 0.5625 + 0.25])
    with pytest.raises(ValueError, match="distribution"):
        E.option_calibration([[0.5, 0.6]], [0])
    with pytest.raises(ValueError, match="index"):
        E.option_calibration([[0.5, 0.5]], [2])
    assert E.top_gap([[0.6, 0.4]], [[0.5, 0.5]]) == pytest.approx([0.1])


def _fake_run(seed, ref_k, p, beta=0.1):
    rng = np.random.default_rng(seed)
    methods = {}
    for name, alpha in (("DPO", beta), ("SPL alpha=0.5", 0.5), ("SPL alpha=1", 1.0)):
        cf = closed_form_policy(ref_k, p, alpha, beta)
        pi = cf + rng.normal(0, 0.01, len(p))
        pi = np.abs(pi) / np.abs(pi).sum()
        methods[name] = {"alpha": alpha, "pi": pi, "valid": 0.9 - 0.2 * np.log(alpha / beta),
                         "closed_form": cf, "hist": {}}
    pi = methods["DPO"]["pi"]
    dists = np.stack([pi ** (1 / T) / (pi ** (1 / T)).sum() for T in (1.0, 2.0, 5.0)])
    return {"seed": seed, "methods": methods, "dpo_T": (dists, np.array([0.9, 0.5, 0.1]))}


def test_lm_bandit_measurements_by_hand():
    p = np.array([0.5, 0.3, 0.2])
    ref_k = np.array([0.2, 0.3, 0.5])
    runs = [_fake_run(s, ref_k, p) for s in range(3)]
    M = X.lm_bandit_measurements(runs, p, ref_valid=0.54, beta=0.1)
    assert all(len(v) == 3 for v in M.values())
    r = runs[1]
    spl, dpo = r["methods"]["SPL alpha=1"], r["methods"]["DPO"]
    assert M["tv_p_spl"][1] == pytest.approx(tv_distance(spl["pi"], p))
    assert M["tv_p_dpo"][1] == pytest.approx(tv_distance(dpo["pi"], p))
    assert M["dpo_majority"][1] == pytest.approx(dpo["pi"][0])
    assert M["max_tv_own_closed_form"][1] == pytest.approx(
        max(tv_distance(v["pi"], v["closed_form"]) for v in r["methods"].values()))
    tv_T = [tv_distance(d, p) for d in r["dpo_T"][0]]
    assert M["valid_dpo_T_matched"][1] == pytest.approx(
        E.matched_control(tv_T, r["dpo_T"][1], tv_distance(spl["pi"], p)))
    # valid = 0.9 - 0.2 log(alpha/beta) = 0.9 + 0.2 log(beta/alpha): slope 0.2 exactly
    assert M["validity_slope"] == pytest.approx([0.2] * 3)
    assert M["valid_ref"].tolist() == [0.54] * 3
    with pytest.raises(ValueError, match="no runs"):
        X.lm_bandit_measurements([], p, 0.5, 0.1)


def test_story_measurements_average_over_prompts_then_match_quality():
    rows = []
    for seed in (0, 1):
        for pr, bump in (("a", 0.0), ("b", 0.2)):
            rows.append(dict(seed=seed, method="SPL", T=1.0, prompt=pr, spread=0.5 + bump,
                             distinct2=0.8, quality=0.7 + bump / 2))
            for T, q, sp in ((1.0, 0.9, 0.3), (1.6, 0.7, 0.5), (2.0, 0.5, 0.7)):
                rows.append(dict(seed=seed, method="DPO", T=T, prompt=pr, spread=sp + bump,
                                 distinct2=sp, quality=q + bump / 2))
    M = X.story_measurements(rows)
    assert M["spl_spread"] == pytest.approx([0.6, 0.6])
    assert M["spl_quality"] == pytest.approx([0.75, 0.75])
    assert M["dpo_spread"] == pytest.approx([0.4, 0.4]) and M["dpo_quality"] == pytest.approx([0.95, 0.95])
    # DPO's curve (quality 0.95, 0.75, 0.55; spread 0.4, 0.6, 0.8): at SPL's quality 0.75 -> 0.6
    assert M["dpo_T_spread_matched"] == pytest.approx([0.6, 0.6])
    assert M["dpo_T_distinct2_matched"] == pytest.approx([0.5, 0.5])
    with pytest.raises(ValueError, match="no rows"):
        X.story_measurements([])


def test_cloze_items_split_and_bad_input():
    from iclr25.soft_preference_learning import calibration as C

    train, test = C.cloze_items(3, 4, seed=0)
    assert len(train) == 3 and len(test) == 4
    for prompt, opts, right in train + test:
        assert len(opts) == 4 and 0 <= right < 4 and isinstance(prompt, str)
    assert not {p for p, _, _ in train} & {p for p, _, _ in test}
    with pytest.raises(ValueError, match="cloze items"):
        C.cloze_items(5000, 5000)


def test_tabular_temperature_tuning_by_brute_force():
    from iclr25.soft_preference_learning import calibration as C
    from iclr25.soft_preference_learning import temperature_scale

    rng = np.random.default_rng(0)
    pi, freq = rng.dirichlet(np.ones(4) * 0.3, size=30), rng.dirichlet(np.ones(4), size=30)
    idx = np.arange(0, 30, 2)
    grid = (1.0, 2.0, 4.0, 8.0)

    def brute(T):   # mean over idx of |pi_T(top) - freq(top)|, one question at a time
        errs = []
        for m in idx:
            r = pi[m] ** (1 / T) / (pi[m] ** (1 / T)).sum()
            errs.append(abs(r.max() - freq[m, r.argmax()]))
        return np.mean(errs)

    assert C.tune_temperature(pi, freq, idx, grid) == grid[int(np.argmin([brute(T) for T in grid]))]
    assert C.scale_rows(pi, 3.0) == pytest.approx(np.stack([temperature_scale(r, 3.0) for r in pi]))
    # ECE of the top answers, by hand: 10 equal bins of confidence, weighted |accuracy - confidence|
    conf, acc = pi.max(1), freq[np.arange(30), pi.argmax(1)]
    b = np.minimum((conf * 10).astype(int), 9)
    want = sum((b == k).mean() * abs(acc[b == k].mean() - conf[b == k].mean())
               for k in range(10) if (b == k).any())
    assert C.top_ece(pi, freq) == pytest.approx(want)


def test_tabular_run_dpo_at_alpha_over_beta_is_spl():
    from types import SimpleNamespace

    from iclr25.soft_preference_learning import calibration as C

    cfg = SimpleNamespace(seed=1, n_questions=20, n_choices=4, n_mc_comparisons=200, beta=0.1,
                          mc_alpha=1.0)
    run = C.tabular_run(cfg)
    pol = run["policies"]
    assert pol["SPL"].shape == (20, 4) and len(run["tune"]) == 10 and len(run["test"]) == 10
    # the bandit identity: DPO's fitted policy at T = alpha / beta is SPL's (fit tolerance)
    assert C.scale_rows(pol["DPO"], 10.0) == pytest.approx(pol["SPL"], abs=1e-4)
    assert run["T_tuned"] == C.tune_temperature(pol["DPO"], run["p"], run["tune"])
    assert pol["DPO tuned"] == pytest.approx(C.scale_rows(pol["DPO"], run["T_tuned"]))
    test = run["test"]
    assert run["gaps"]["SPL"] == pytest.approx(E.top_gap(pol["SPL"][test], run["p"][test]))
    assert run["ece"]["DPO"] == pytest.approx(C.top_ece(pol["DPO"][test], run["p"][test]))
