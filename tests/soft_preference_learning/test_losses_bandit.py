"""Chapter 17: the SPL loss, the closed-form optimum and the exact bandit, against closed forms
and brute force."""

import itertools
import math

import numpy as np
import pytest
import torch

import iclr25.soft_preference_learning as spl
from iclr25.profiles import ProfileError
from iclr25.soft_preference_learning import configs


def _rand(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, generator=g, dtype=torch.float64) * 4 for _ in range(4)]


@pytest.mark.parametrize("beta", [0.01, 0.1, 1.0, 3.0])
def test_spl_at_alpha_equal_beta_is_sigmoid_dpo(beta):
    lw, ll, rw, rl = _rand()
    ours = spl.spl_loss(lw, ll, rw, rl, alpha=beta, beta=beta)
    ref = spl.dpo_loss_reference(lw, ll, rw, rl, beta)
    # and the formula written out by hand, in numpy
    z = beta * ((lw - rw) - (ll - rl)).numpy()
    by_hand = np.mean(np.log1p(np.exp(-z)))
    assert abs(float(ours) - float(ref)) < 1e-6
    assert abs(float(ours) - by_hand) < 1e-6
    assert abs(float(spl.dpo_loss(lw, ll, rw, rl, beta)) - by_hand) < 1e-6


def test_spl_loss_formula_and_weights():
    lw, ll, rw, rl = _rand(8, seed=1)
    a, b = 0.7, 0.2
    m = a * (lw - ll) - b * (rw - rl)
    per = -torch.log(torch.sigmoid(m))
    assert torch.allclose(spl.spl_loss(lw, ll, rw, rl, a, b, reduction="none"), per)
    w = torch.arange(1.0, 9.0, dtype=torch.float64)
    # weights = repeating each pair w times
    rep = [t.repeat_interleave(w.long()) for t in (lw, ll, rw, rl)]
    assert abs(float(spl.spl_loss(lw, ll, rw, rl, a, b, weight=w))
               - float(spl.spl_loss(*rep, a, b))) < 1e-12


def test_spl_loss_bad_input():
    lw, ll, rw, rl = _rand(4)
    with pytest.raises(ValueError, match="alpha"):
        spl.spl_loss(lw, ll, rw, rl, alpha=0.0, beta=0.1)
    with pytest.raises(ValueError, match="beta"):
        spl.spl_loss(lw, ll, rw, rl, alpha=1.0, beta=-1)
    with pytest.raises(ValueError, match="one shape"):
        spl.spl_loss(lw, ll[:2], rw, rl, 1.0, 0.1)
    with pytest.raises(ValueError, match="valid"):
        spl.spl_loss(lw, ll, rw, rl, 1.0, 0.1, reduction="max")


def _objective(pi, r, pi_ref, alpha, beta):
    return (pi * r).sum() - alpha * (pi * np.log(pi)).sum() + beta * (pi * np.log(pi_ref)).sum()


@pytest.mark.parametrize("alpha,beta", [(0.1, 0.1), (1.0, 0.1), (0.5, 0.0), (2.0, 1.0)])
def test_closed_form_maximises_the_spl_objective(alpha, beta):
    rng = np.random.default_rng(0)
    p, pi_ref = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
    r = np.log(p)
    star = spl.closed_form_policy(pi_ref, p, alpha, beta)
    best = _objective(star, r, pi_ref, alpha, beta)
    # brute force: a fine grid over the simplex never beats the closed form
    grid = np.linspace(0.01, 0.97, 25)
    for a, b, c in itertools.product(grid, grid, grid):
        if a + b + c < 0.99:
            q = np.array([a, b, c, 1 - a - b - c])
            assert _objective(q, r, pi_ref, alpha, beta) <= best + 1e-12
    # and it is the formula
    w = pi_ref ** (beta / alpha) * p ** (1 / alpha)
    assert np.allclose(star, w / w.sum())


def _expected_comparisons(p, scale=10**9):
    K = len(p)
    wins = np.zeros((K, K), dtype=np.int64)
    for i, j in itertools.permutations(range(K), 2):
        wins[i, j] = round(scale * p[i] / (p[i] + p[j]))
    return spl.Comparisons(wins)


@pytest.mark.parametrize("alpha,beta", [(0.2, 0.2), (1.0, 0.1), (1.0, 0.0), (0.5, 0.25)])
def test_fit_policy_reaches_the_closed_form_on_population_comparisons(alpha, beta):
    rng = np.random.default_rng(1)
    p, pi_ref = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
    pi = spl.fit_policy(_expected_comparisons(p), pi_ref, alpha, beta)
    assert spl.tv_distance(pi, spl.closed_form_policy(pi_ref, p, alpha, beta)) < 1e-5


def test_temperature_scaled_dpo_equals_spl_in_the_bandit():
    rng = np.random.default_rng(2)
    p, pi_ref = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
    dpo = spl.closed_form_policy(pi_ref, p, 0.1, 0.1)
    assert spl.tv_distance(spl.temperature_scale(dpo, 10.0),
                           spl.closed_form_policy(pi_ref, p, 1.0, 0.1)) < 1e-9


def test_sample_comparisons_follow_bradley_terry():
    p = np.array([0.5, 0.3, 0.2])
    C = spl.sample_comparisons(p, 300_000, seed=0)
    assert C.n == 300_000
    for i, j in itertools.combinations(range(3), 2):
        n_ij = C.wins[i, j] + C.wins[j, i]
        assert abs(n_ij / C.n - 1 / 3) < 0.01
        assert abs(C.wins[i, j] / n_ij - p[i] / (p[i] + p[j])) < 0.01
    assert (np.diag(C.wins) == 0).all()


def test_bandit_bad_input():
    with pytest.raises(ValueError, match="sum to 1"):
        spl.closed_form_policy([0.5, 0.6], [0.5, 0.5], 1.0, 0.1)
    with pytest.raises(ValueError, match="same length"):
        spl.closed_form_policy([0.5, 0.5], [0.2, 0.3, 0.5], 1.0, 0.1)
    with pytest.raises(ValueError, match="positive integer"):
        spl.sample_comparisons([0.5, 0.5], 0)
    with pytest.raises(ValueError, match="temperature"):
        spl.temperature_scale([0.5, 0.5], 0)


def test_metrics_against_brute_force():
    assert spl.distinct_n(["a b a b", "a b c"], 1) == 3 / 7
    assert spl.distinct_n(["a b a b", "a b c"], 2) == 3 / 5     # ab ba ab | ab bc
    assert spl.attribute_entropy(["x", "x", "y", "y"]) == pytest.approx(math.log(2))
    X = np.random.default_rng(0).normal(size=(6, 5))
    brute = np.mean([1 - X[i] @ X[j] / np.linalg.norm(X[i]) / np.linalg.norm(X[j])
                     for i in range(6) for j in range(6) if i != j])
    assert spl.embedding_spread(X) == pytest.approx(brute)
    conf = np.array([0.95, 0.9, 0.55, 0.52, 0.2])
    acc = np.array([1, 0, 1, 1, 0])
    # bins of width 0.1: [0.9,1): 0.95, 0.9 -> |0.5 - 0.925|; [0.5,0.6): |1 - 0.535|; [0.2,0.3): 0.2
    want = 2 / 5 * 0.425 + 2 / 5 * 0.465 + 1 / 5 * 0.2
    assert spl.ece(conf, acc) == pytest.approx(want)
    for n, c, N in [(5, 2, 2), (6, 1, 3), (4, 0, 2), (4, 3, 2)]:
        subsets = list(itertools.combinations(range(n), N))
        brute = np.mean([any(i < c for i in s) for s in subsets])
        assert spl.pass_at_n(n, c, N) == pytest.approx(brute)
    with pytest.raises(ValueError, match="N must be"):
        spl.pass_at_n(3, 1, 4)


def test_configs_reject_unknown_parameters():
    assert configs.closed_form("smoke").spl_beta == 0.1
    with pytest.raises(ProfileError, match="valid"):
        configs.closed_form("smoke", n_step=3)
    with pytest.raises(ProfileError, match="valid profiles"):
        configs.lm_bandit("huge")
