"""Chapter 18: the GD kernels agree, sectors are exact, and the certificate agrees with brute force."""

import numpy as np
import pytest

import iclr25.relu_landscape as rl
from iclr25.relu_landscape.train import Trajectory


@pytest.fixture(scope="module")
def fig3_run():
    traj, X, Y = rl.run(rl.fig3("smoke"), show_progress=False)
    return traj, X, Y


def _numeric_grad(net, X, Y, eps=1e-6):
    gW, gH = np.zeros_like(net.W), np.zeros_like(net.H)
    for A, G in ((net.W, gW), (net.H, gH)):
        for idx in np.ndindex(A.shape):
            old = A[idx]
            A[idx] = old + eps; lp = net.loss(X, Y)
            A[idx] = old - eps; lm = net.loss(X, Y)
            A[idx] = old
            G[idx] = (lp - lm) / (2 * eps)
    return gW, gH


@pytest.mark.parametrize("rho_neg", [0.0, 0.2])
def test_gradients_match_finite_differences(rho_neg):
    X, Y = rl.two_d_two_out()
    net = rl.init_net(2, 6, 2, init_scale=0.5, seed=1, rho_neg=rho_neg)
    gW, gH = net.grads(X, Y)
    nW, nH = _numeric_grad(net, X, Y)
    np.testing.assert_allclose(gW, nW, atol=1e-7)
    np.testing.assert_allclose(gH, nH, atol=1e-7)


@pytest.mark.parametrize("data", ["five_point", "two_d_two_out"])
def test_backends_agree(data):
    X, Y = rl.load(data)
    net = rl.init_net(X.shape[1], 20, Y.shape[1], init_scale=0.1, seed=3, rho_neg=0.1)
    runs = {b: rl.train_gd(net, X, Y, lr=5e-3, n_steps=3000, log_every=500, backend=b,
                           show_progress=False) for b in rl.BACKENDS}
    ref = runs["numpy"]
    assert ref.steps.tolist() == list(range(0, 3001, 500))
    for b, tr in runs.items():
        np.testing.assert_allclose(tr.loss, ref.loss, rtol=1e-10, err_msg=b)
        np.testing.assert_allclose(tr.net.W, ref.net.W, rtol=1e-9, atol=1e-12, err_msg=b)
        np.testing.assert_allclose(tr.W, ref.W, rtol=1e-9, atol=1e-12, err_msg=b)
    assert ref.loss[-1] < ref.loss[0]


def test_one_gd_step_is_the_gradient_step():
    X, Y = rl.five_point()
    net = rl.init_net(2, 7, 1, init_scale=0.3, seed=0)
    tr = rl.train_gd(net, X, Y, lr=0.1, n_steps=1, log_every=1, show_progress=False)
    gW, gH = net.grads(X, Y)
    np.testing.assert_allclose(tr.net.W, net.W - 0.1 * gW, atol=1e-14)
    np.testing.assert_allclose(tr.net.H, net.H - 0.1 * gH, atol=1e-14)


def test_bad_arguments_are_clear_errors():
    X, Y = rl.five_point()
    net = rl.init_net(2, 3, 1, init_scale=0.1)
    with pytest.raises(ValueError, match="valid: numba, numpy, torch"):
        rl.train_gd(net, X, Y, lr=1e-3, n_steps=1, backend="jax")
    with pytest.raises(KeyError, match="valid: five_point"):
        rl.load("six_point")
    with pytest.raises(ValueError, match="does not fit"):
        rl.train_gd(net, *rl.two_d_two_out(), lr=1e-3, n_steps=1)
    with pytest.raises(ValueError, match="linear"):
        rl.ShallowNet(np.zeros((1, 2)), np.zeros((1, 1)), 1.0, 1.0)


@pytest.mark.parametrize("data", ["five_point", "three_d_seven_point"])
def test_sectors_are_exact(data):
    X, _ = rl.load(data)
    secs = rl.sectors(X)
    assert {s.signs for s in secs} == rl.sectors_bruteforce(X, n_samples=400_000)
    for s in secs:  # each interior point lies strictly inside its sector
        assert np.all(np.sign(X @ s.u) == np.array(s.signs))


def test_sector_count_of_a_central_line_arrangement():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 2))
    assert len(rl.sectors(X)) == 12  # six generic lines through the origin: 2N sectors


def test_d_vectors_give_the_correlation_function():
    X, Y = rl.five_point()
    net = rl.init_net(2, 4, 1, init_scale=0.3, seed=2, rho_neg=0.3)
    R = net.residuals(X, Y)
    for s in rl.sectors(X):
        D = rl.d_vectors(X, R, np.array([s.signs]), net.rho_pos, net.rho_neg)[0]
        w = 0.7 * s.u
        np.testing.assert_allclose(rl.correlation(net, X, R, w[None])[0], D.T @ w, atol=1e-12)


def test_certificate_at_the_origin_is_a_saddle_and_brute_force_agrees():
    X, Y = rl.five_point()
    net = rl.ShallowNet(np.zeros((3, 2)), np.zeros((3, 1)))
    cert = rl.certify(net, X, Y)
    assert cert.verdict == "saddle" and len(cert.escape) == 3
    assert cert.loss_drop < 0
    # the certified direction: loss change is an exact quadratic, negative for every small step
    dW, dH = cert.direction
    for eps in (1e-3, 1e-2, 1e-1):
        moved = rl.ShallowNet(dW * eps, dH * eps)
        assert moved.loss(X, Y) < net.loss(X, Y)
    # brute force: random perturbations find descent too (amplitude fixed: parameters are all 0)
    pert = rl.perturbation_test(net, X, Y, n=2000, amplitude=1e-2)
    assert pert.n_descents > 0


def test_final_point_of_fig3_is_a_local_minimum_and_brute_force_agrees(fig3_run):
    traj, X, Y = fig3_run
    assert abs(traj.loss[-1] - 0.027886) < 1e-4
    cert = rl.certify(traj.net, X, Y)
    assert cert.is_local_min and cert.escape == [] and cert.stationarity_gap < 1e-8
    pert = rl.perturbation_test(traj.net, X, Y, n=3000, exclude=cert.labels == "dead")
    assert pert.min_change > 0
    # intermediate plateaus are saddles with a verified descent direction
    plateaus = rl.find_plateaus(traj)
    assert len(plateaus) >= 2
    for p in plateaus[:-1]:
        c = rl.certify(traj.at_step(p.mid), X, Y)
        assert c.verdict == "saddle" and c.loss_drop < 0


def test_a_global_minimum_is_certified_and_a_random_point_is_not_stationary():
    rng = np.random.default_rng(1)
    X = np.c_[rng.uniform(-1, 1, 8), np.ones(8)]
    teacher = rl.ShallowNet(np.array([[1.0, 0.2], [-0.5, -2.0]]), np.array([[0.7], [1.0]]))
    Y = teacher.forward(X)  # the second neuron is dead on this data
    cert = rl.certify(teacher, X, Y)
    assert cert.verdict == "local minimum" and list(cert.labels) == ["alive", "dead"]
    assert rl.perturbation_test(teacher, X, Y, n=500).min_change >= 0
    random_net = rl.init_net(2, 3, 1, init_scale=0.5, seed=4)
    assert rl.certify(random_net, X, Y).verdict == "not stationary"


def test_leaky_relu_certificate_agrees_with_brute_force():
    X, Y = rl.five_point()
    net = rl.init_net(2, 10, 1, init_scale=1e-4, seed=0, rho_neg=0.2)
    tr = rl.train_gd(net, X, Y, lr=5e-3, n_steps=400_000, log_every=5000, show_progress=False)
    cert = rl.certify(tr.net, X, Y)
    pert = rl.perturbation_test(tr.net, X, Y, n=2000)
    assert cert.verdict in ("local minimum", "saddle")
    if cert.is_local_min:
        assert pert.min_change >= -1e-12
    else:
        assert cert.loss_drop < 0


def test_embeddings_keep_the_function_and_change_the_certificate(fig3_run):
    traj, X, Y = fig3_run
    net = rl.certify(traj.net, X, Y).net_ideal
    j = int(np.argmax(np.abs(net.H[:, 0])))
    split = rl.split_neuron(net, j, 0.3)
    added = rl.add_zero_neuron(net)
    for wide in (split, added):
        assert wide.width == net.width + 1
        np.testing.assert_allclose(wide.forward(X), net.forward(X), atol=1e-14)
    assert rl.certify(split, X, Y).is_local_min
    c = rl.certify(added, X, Y)
    assert c.verdict == "saddle" and c.escape == [net.width] and c.loss_drop < 0
    with pytest.raises(ValueError):
        rl.split_neuron(net, j, 1.5)


def test_find_plateaus_on_a_staircase():
    steps = np.arange(0, 100_001, 1000)
    loss = np.where(steps < 30_000, 1.0, np.where(steps < 35_000, 0.5, 0.25))
    loss = loss.astype(float)
    tr = Trajectory(steps, loss, np.zeros((len(steps), 1, 2)), np.zeros((len(steps), 1, 1)), None, 1e-3)
    ps = rl.find_plateaus(tr, min_len=10_000)
    assert [(p.start, p.end) for p in ps] == [(0, 29_000), (35_000, 100_000)]


def test_balancedness_is_conserved_by_small_step_gd():
    X, Y = rl.five_point()
    net = rl.init_net(2, 8, 1, init_scale=0.2, seed=5)
    tr = rl.train_gd(net, X, Y, lr=1e-4, n_steps=20_000, log_every=1000, show_progress=False)
    b = rl.balancedness(tr.W, tr.H)
    assert np.abs(b - b[0]).max() < 1e-4 * np.abs(b[0]).max() + 1e-8


def test_angles_and_clusters():
    W = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1e-3], [-1.0, 0.0]])
    np.testing.assert_allclose(rl.neuron_angles(W), [0, 90, np.degrees(np.arctan(1e-3)), 180], atol=1e-9)
    assert rl.direction_clusters(W, tol_deg=1.0) == [[0, 2], [1], [3]]


# -- the certificate at its edges (issue 39) --------------------------------------------------------

def _escape_strength_at_origin(X, Y):
    """Brute force: the largest ||D_S|| / (||X|| ||Y||) over all sectors, residuals r = -y."""
    secs = rl.sectors_bruteforce(X, n_samples=100_000)
    D = rl.d_vectors(X, -Y, np.array(sorted(secs)))
    return np.linalg.norm(D.reshape(len(D), -1), axis=1).max() / (np.linalg.norm(X) * np.linalg.norm(Y))


def test_d_tol_flips_the_origin_exactly_at_its_escape_strength():
    X, Y = rl.five_point()
    net = rl.ShallowNet(np.zeros((2, 2)), np.zeros((2, 1)))
    strength = _escape_strength_at_origin(X, Y)
    m = rl.certificate_margins(net, X, Y)
    np.testing.assert_allclose(m["escape_max"], strength, rtol=1e-12)
    rows = rl.tolerance_sweep(net, X, Y, {"d_tol": [strength / 2, strength * 2]})
    assert [r["verdict"] for r in rows] == ["saddle", "local minimum"]
    flips = rl.verdict_flips(rows)
    assert flips == [{"tolerance": "d_tol", "below": strength / 2, "above": strength * 2,
                      "verdict_below": "saddle", "verdict_above": "local minimum"}]
    assert rl.decade_flips(net, X, Y) == []  # strength ~0.3: a decade above 1e-3 changes nothing
    with pytest.raises(ValueError, match="valid: h_tol"):
        rl.tolerance_sweep(net, X, Y, {"eps": [1.0]})


def test_a_neuron_parked_inside_the_dead_cone_flips_with_dead_margin(fig3_run):
    traj, X, Y = fig3_run
    base = rl.certify(traj.net, X, Y).net_ideal
    # a tiny neuron just inside the dead cone, next to the hyperplane of x_1 = (-1, 1), closer to it
    # than any neuron of the run (seed 0 parks one at ~7e-6)
    delta = 2e-6
    u = np.array([-1.0, -1.0]) / np.sqrt(2)
    perp = np.array([1.0, -1.0]) / np.sqrt(2)  # moves away from x_1 (into the dead cone)
    w = 1e-5 * (u + delta * perp)
    net = rl.ShallowNet(np.vstack([base.W, w]), np.vstack([base.H, [[1e-8]]]))
    cos = (X @ w) / (np.linalg.norm(w) * np.linalg.norm(X, axis=1))
    margin = rl.certificate_margins(net, X, Y)["near_dead"]
    assert margin == pytest.approx(-cos.max(), rel=1e-12)
    assert rl.certify(net, X, Y, dead_margin=margin / 3).is_local_min
    c = rl.certify(net, X, Y, dead_margin=margin * 3)
    assert c.verdict == "saddle" and c.escape == [net.width - 1] and c.loss_drop < 0
    rows = rl.certify_run(traj, X, Y, rl.find_plateaus(traj))
    assert rows[-1]["point"] == "final" and rows[-1]["verdict"] == "local minimum"
    assert all(r["verdict"] == "saddle" for r in rows[:-1]) and len(rows) >= 2


def test_cumulative_perturbations_are_a_random_walk_of_the_same_draws():
    X, Y = rl.two_d_two_out()
    net = rl.init_net(2, 3, 2, init_scale=0.5, seed=2)
    a, n = 1e-2, 7
    walk = rl.perturbation_test(net, X, Y, n=n, amplitude=a, seed=5, cumulative=True)
    fresh = rl.perturbation_test(net, X, Y, n=n, amplitude=a, seed=5)
    rng = np.random.default_rng(5)  # brute force: the same draws, added one after another
    dW = rng.uniform(-a, a, (n,) + net.W.shape)
    dH = rng.uniform(-a, a, (n,) + net.H.shape)
    base = net.loss(X, Y)
    want_walk = [rl.ShallowNet(net.W + dW[:i + 1].sum(0), net.H + dH[:i + 1].sum(0)).loss(X, Y) - base
                 for i in range(n)]
    want_fresh = [rl.ShallowNet(net.W + dW[i], net.H + dH[i]).loss(X, Y) - base for i in range(n)]
    np.testing.assert_allclose(walk.loss_changes, want_walk, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(fresh.loss_changes, want_fresh, rtol=1e-10, atol=1e-15)
    with pytest.raises(ValueError, match="amplitude must be > 0"):
        rl.perturbation_test(net, X, Y, n=2, amplitude=0.0)
