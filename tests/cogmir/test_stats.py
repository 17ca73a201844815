"""Wilson intervals and permutation tests against closed forms and brute force."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from iclr25.cogmir import stats


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (17, 50), (1, 1), (40, 80)])
def test_wilson_matches_scipy_and_the_defining_inequality(k, n):
    lo, hi = stats.wilson_interval(k, n)
    ref = sps.binomtest(k, n).proportion_ci(0.95, method="wilson")
    assert lo == pytest.approx(ref.low, abs=1e-12) and hi == pytest.approx(ref.high, abs=1e-12)
    # brute force: the interval is {p : |k/n - p| <= z sqrt(p(1-p)/n)}
    z = sps.norm.ppf(0.975)
    grid = np.linspace(0, 1, 200001)
    inside = np.abs(k / n - grid) <= z * np.sqrt(grid * (1 - grid) / n) + 1e-15
    assert grid[inside].min() == pytest.approx(lo, abs=1e-5)
    assert grid[inside].max() == pytest.approx(hi, abs=1e-5)


def test_wilson_coverage_is_near_nominal():
    # exact coverage by summing the binomial pmf over the k whose interval covers p
    for p, n in [(0.1, 80), (0.5, 80), (0.9, 50)]:
        cover = sum(sps.binom.pmf(k, n, p) for k in range(n + 1)
                    if stats.wilson_interval(k, n)[0] <= p <= stats.wilson_interval(k, n)[1])
        assert 0.92 < cover < 0.98


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="0 <= k <= n"):
        stats.wilson_interval(5, 3)
    with pytest.raises(ValueError, match="0/1"):
        stats.bias_rate([0, 2, 1])
    with pytest.raises(ValueError, match="same length"):
        stats.permutation_test([1, 0], [1], paired=True)


def test_two_sample_permutation_on_binary_data_is_fishers_exact_test():
    t = np.array([1, 1, 1, 0, 1, 1, 0, 1])
    c = np.array([0, 1, 0, 0, 0, 1, 0])
    res = stats.permutation_test(t, c)
    assert res.exact
    table = [[t.sum(), len(t) - t.sum()], [c.sum(), len(c) - c.sum()]]
    assert res.p_value == pytest.approx(sps.fisher_exact(table, alternative="greater")[1],
                                        abs=1e-12)


def test_two_sample_permutation_matches_enumeration_on_real_values():
    t = np.array([2.0, 3.5, 1.0, 4.0])
    c = np.array([1.5, 0.5, 2.5])
    pooled = np.concatenate([t, c])
    obs = t.mean() - c.mean()
    count = total = 0
    for idx in itertools.combinations(range(7), 4):
        rest = [i for i in range(7) if i not in idx]
        total += 1
        count += pooled[list(idx)].mean() - pooled[rest].mean() >= obs - 1e-12
    assert stats.permutation_test(t, c).p_value == pytest.approx(count / total)


def test_paired_sign_flip_on_binary_data_is_the_exact_mcnemar_test():
    rng = np.random.default_rng(1)
    t = rng.integers(0, 2, 30)
    c = (rng.random(30) < 0.3).astype(int)
    res = stats.permutation_test(t, c, paired=True)
    b = int(((t == 1) & (c == 0)).sum())     # discordant pairs for the treatment
    m = int((t != c).sum())
    assert res.exact and res.p_value == pytest.approx(sps.binom.sf(b - 1, m, 0.5), abs=1e-12)


def test_monte_carlo_p_value_is_close_to_the_exact_one():
    rng = np.random.default_rng(0)
    t = rng.normal(0.4, 1, 40)
    c = rng.normal(0.0, 1, 40)
    exact = stats.permutation_test(t, c, paired=True)          # 2^40 > exact_max -> MC
    assert not exact.exact
    ref = sps.ttest_rel(t, c, alternative="greater").pvalue
    assert abs(exact.p_value - ref) < 0.05
    assert exact.p_value > 0


def test_rate_and_identical_groups():
    r = stats.bias_rate([True, False, True, True])
    assert (r.k, r.n, r.rate) == (3, 4, 0.75) and r.contains(0.75)
    same = stats.permutation_test([1, 0, 1], [1, 0, 1], paired=True)
    assert same.p_value == 1.0 and same.difference == 0.0
    assert math.isclose(stats.mean_difference([1, 1], [0, 1]), 0.5)


def test_trend_test_rho_matches_scipy_and_exact_enumeration():
    pos = np.array([1, 2, 3, 1, 2, 3])
    val = np.array([0.9, 0.7, 0.75, 0.8, 0.6, 0.5])
    grp = np.array([0, 0, 0, 1, 1, 1])
    r = stats.trend_test(pos, val, grp)
    assert r.rho == pytest.approx(sps.spearmanr(pos, val).statistic)
    # brute force: all 3! x 3! within-story arrangements
    rhos = []
    for p0 in itertools.permutations([0.9, 0.7, 0.75]):
        for p1 in itertools.permutations([0.8, 0.6, 0.5]):
            rhos.append(sps.spearmanr(pos, list(p0) + list(p1)).statistic)
    assert r.exact and r.n_arrangements == 36
    assert r.p_value == pytest.approx(np.mean(np.array(rhos) <= r.rho + 1e-12))


def test_trend_test_monte_carlo_detects_a_decline_and_not_noise():
    rng = np.random.default_rng(0)
    pos = np.tile(np.arange(1, 6), 10)
    grp = np.repeat(np.arange(10), 5)
    falling = 1.0 - 0.1 * pos + rng.normal(0, 0.05, len(pos))
    r = stats.trend_test(pos, falling, grp, n_perm=2000, seed=1)
    assert not r.exact and r.rho < -0.8 and r.p_value < 0.01
    flat = rng.normal(0, 1, len(pos))
    assert stats.trend_test(pos, flat, grp, n_perm=2000, seed=1).p_value > 0.05
    with pytest.raises(ValueError, match="one length"):
        stats.trend_test(pos, flat[:-1], grp)
