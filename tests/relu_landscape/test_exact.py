"""Chapter 18 (issue 60): the paper's initialisation to the bit, the exact certificate against the
float one and against hand constructions, and the statistics of notebook 01."""

from fractions import Fraction

import numpy as np
import pytest

import iclr25.relu_landscape as rl
from iclr25.relu_landscape.landscape import _min_directional


def test_torch_generator_is_the_official_draw():
    torch = pytest.importorskip("torch")
    X, Y = rl.five_point()
    ours = rl.init_net(2, 50, 1, init_scale=50.0 ** -3, seed=12, generator="torch")
    # the official model: two bias-free layers, then the global seed, then input and output
    # weights N(0, 1) in float32, each scaled by 50^-3
    first, second = torch.nn.Linear(2, 50, bias=False), torch.nn.Linear(50, 1, bias=False)
    torch.manual_seed(12)
    first.weight.data.normal_(0)
    first.weight.data = first.weight.data * 50.0 ** -3
    second.weight.data.normal_(0)
    second.weight.data = second.weight.data * 50.0 ** -3
    assert np.array_equal(ours.W, first.weight.data.double().numpy())
    assert np.array_equal(ours.H, second.weight.data.double().numpy().T)
    assert np.array_equal(ours.W.astype(np.float32).astype(np.float64), ours.W)  # float32 values
    # a 2-D output layer is drawn as k x m and transposed
    two = rl.init_net(2, 5, 2, init_scale=1.0, seed=3, generator="torch")
    torch.manual_seed(3)
    W = torch.empty(5, 2).normal_(0)
    H = torch.empty(2, 5).normal_(0)
    assert np.array_equal(two.W, W.double().numpy()) and np.array_equal(two.H, H.double().numpy().T)
    with pytest.raises(ValueError, match="valid: numpy, torch"):
        rl.init_net(2, 3, 1, init_scale=0.1, generator="jax")
    cfg = rl.fig3("smoke", seed=12, generator="torch")
    assert np.array_equal(rl.init_net(2, cfg.width, 1, init_scale=cfg.init_scale, seed=12,
                                      generator=cfg.generator).W, ours.W)


def _same(a: rl.Certificate, b: rl.Certificate):
    assert a.verdict == b.verdict
    assert list(a.labels) == list(b.labels)
    assert a.escape == b.escape
    assert a.stationarity_gap == pytest.approx(b.stationarity_gap, rel=1e-6, abs=1e-14)
    if a.loss_drop is not None:
        assert b.loss_drop == pytest.approx(a.loss_drop, rel=1e-9)


def test_exact_certificate_equals_the_fast_path_on_the_fig3_run():
    traj, X, Y = rl.run(rl.fig3("smoke"), show_progress=False)
    for p in rl.find_plateaus(traj)[:-1] + [None]:
        net = traj.net if p is None else traj.at_step(p.mid)
        fast, ref = rl.certify(net, X, Y), rl.certify_exact(net, X, Y)
        _same(fast, ref)
        assert rl.float_decided(net, X, Y).decided
    assert ref.is_local_min  # the final point


@pytest.mark.parametrize("case", ["origin", "teacher", "random", "leaky", "two_out", "three_d"])
def test_exact_certificate_equals_the_fast_path(case):
    rng = np.random.default_rng(1)
    if case == "origin":
        X, Y = rl.five_point()
        net = rl.ShallowNet(np.zeros((3, 2)), np.zeros((3, 1)))
    elif case == "teacher":
        X = np.c_[rng.uniform(-1, 1, 8), np.ones(8)]
        net = rl.ShallowNet(np.array([[1.0, 0.2], [-0.5, -2.0]]), np.array([[0.7], [1.0]]))
        Y = net.forward(X)
    elif case == "random":
        X, Y = rl.five_point()
        net = rl.init_net(2, 4, 1, init_scale=0.5, seed=4)
    elif case == "leaky":
        X, Y = rl.five_point()
        net = rl.train_gd(rl.init_net(2, 6, 1, init_scale=1e-3, seed=0, rho_neg=0.2), X, Y, lr=5e-3,
                          n_steps=20_000, log_every=20_000, show_progress=False).net
    elif case == "two_out":
        X, Y = rl.two_d_two_out()
        net = rl.ShallowNet(np.zeros((2, 2)), np.zeros((2, 2)))
    else:
        X, Y = rl.three_d_seven_point()
        net = rl.ShallowNet(np.zeros((2, 3)), np.zeros((2, 1)))
    _same(rl.certify(net, X, Y), rl.certify_exact(net, X, Y))


def _parked(traj, X, Y, delta):
    """The Fig. 3 minimum plus a tiny neuron next to the hyperplane of x_1 = (-1, 1), ``delta``
    (relative) inside the dead cone (delta < 0: outside, on the positive side of x_1)."""
    base = rl.certify_exact(traj.net, X, Y).net_ideal
    u = np.array([-1.0, -1.0]) / np.sqrt(2)
    perp = np.array([1.0, -1.0]) / np.sqrt(2)
    w = 1e-5 * (u + delta * perp)
    return rl.ShallowNet(np.vstack([base.W, w]), np.vstack([base.H, [[1e-8]]]))


@pytest.fixture(scope="module")
def fig3_run():
    return rl.run(rl.fig3("smoke"), show_progress=False)


def test_dead_cone_membership_is_decided_exactly(fig3_run):
    traj, X, Y = fig3_run
    inside = _parked(traj, X, Y, 1e-9)   # a hair inside: dead, whatever a hand margin says
    j = inside.width - 1
    assert rl.exact_signs(inside.W[j], X).max() < 0
    ref = rl.certify_exact(inside, X, Y)
    assert ref.labels[j] == "dead" and ref.is_local_min
    _same(rl.certify(inside, X, Y), ref)  # the derived margin agrees
    old = rl.certify(inside, X, Y, dead_margin=1e-6)  # the old hand-chosen margin did not
    assert old.verdict == "saddle" and old.escape == [j]
    outside = _parked(traj, X, Y, -1e-9)  # a hair outside: it sees x_1, a zero neuron next to
    k = outside.width - 1                 # a sector with d_S != 0: an escape neuron
    assert rl.exact_signs(outside.W[k], X).max() == 1
    ref = rl.certify_exact(outside, X, Y)
    assert ref.verdict == "saddle" and ref.escape == [k] and ref.loss_drop < 0
    _same(rl.certify(outside, X, Y), ref)


def test_float_decided_knows_when_a_cosine_is_below_its_rounding_bound():
    X, Y = rl.five_point()
    net = rl.init_net(2, 4, 1, init_scale=0.5, seed=4)
    assert rl.float_decided(net, X, Y).decided
    on_kink = net.copy()
    on_kink.W[0] = [-1.0, -1.0]  # w . x_1 = 0 exactly for x_1 = (-1, 1), w . x_n < 0 for the rest:
    # on the edge of the dead cone, where no float cosine can say on which side
    d = rl.float_decided(on_kink, X, Y)
    assert not d.decided and d.tightest == "dead" and d.slack <= 1
    assert rl.cos_error_bound(2) == pytest.approx(14 * 2.0 ** -53, rel=1e-12)


def test_min_directional_exact_equals_the_lps():
    rng = np.random.default_rng(0)
    for trial in range(30):
        d = 2 + trial % 2
        X = rng.standard_normal((5, d))
        c = rng.standard_normal(5)
        w = rng.standard_normal(d)
        B = sorted(rng.choice(5, size=trial % 3, replace=False).tolist())
        rho = (1.0, 0.0) if trial % 4 else (1.0, 0.3)
        exact = rl.min_directional_exact(c, X, w, B, *rho)
        assert isinstance(exact, Fraction)
        assert float(exact) == pytest.approx(_min_directional(c, X, w, np.array(B, dtype=int), *rho),
                                             abs=1e-7)
    # by hand: one kink, phi(u) = u_1 for u_1 > 0 (ReLU) and 0 below; its minimum is 0
    X = np.array([[1.0, 0.0]])
    assert rl.min_directional_exact([1.0], X, [0.0, 1.0], [0]) == 0
    assert rl.min_directional_exact([-1.0], X, [0.0, 1.0], [0]) == -1


def test_statistics_of_notebook_01():
    X, _ = rl.five_point()
    x = X[0]
    on_kink = np.array([[x[1], -x[0]]])  # orthogonal to x_1
    assert rl.hyperplane_angle(on_kink, X) == pytest.approx(0, abs=1e-12)
    assert rl.hyperplane_angle(x[None], X) > 0
    assert 0 < rl.random_hyperplane_angle(2, X, n_draws=200) < 18  # five lines: at most 18 deg away
    assert rl.random_direction_groups(1) == 1
    assert rl.random_direction_groups(5, tol_deg=180) == 1
    assert 20 < rl.random_direction_groups(30, tol_deg=2.0, n_draws=50) <= 30
    P = rl.Plateau
    ps = [P(0, 40_000, 1.0, 20_000), P(70_000, 160_000, 0.5, 100_000), P(200_000, 600_000, 0.1, 400_000)]
    assert rl.plateau_end_deviation(ps, (42_000, 152_000), 600_000) == pytest.approx(max(2 / 42, 8 / 152))
    assert rl.plateau_end_deviation(ps[1:], (42_000, 152_000), 600_000) == 1.0


def test_balance_after_escape_sees_only_grown_neurons():
    from iclr25.relu_landscape.train import Trajectory

    T = 4
    W = np.zeros((T, 2, 2))
    H = np.zeros((T, 2, 1))
    W[:, 0, 0] = [1e-3, 1e-2, 1.0, 2.0]    # neuron 0 grows, balanced (||w|| = |h|) from the start
    H[:, 0, 0] = [1e-3, 1e-2, 1.0, 2.0]
    W[:, 1, 0] = [3e-3, 3e-3, 3e-3, 3e-3]  # neuron 1 never grows and is unbalanced (ratio 3)
    H[:, 1, 0] = [1e-3, 1e-3, 1e-3, 1e-3]
    tr = Trajectory(np.arange(T), np.zeros(T), W, H, None, 1e-3)
    assert rl.balance_after_escape(tr, [0, 1]) == pytest.approx(0.0)
    assert np.isnan(rl.balance_after_escape(tr, [1]))
    W[3, 0, 0] = 2.2  # a 10% drift at the last step
    assert rl.balance_after_escape(tr, np.array([True, True])) == pytest.approx(0.1)
