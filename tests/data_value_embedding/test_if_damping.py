"""Chapter 02: the practitioner's influence-function baseline -- damping grid above |lambda_min|,
damping chosen on validation retraining (never on the test ground truth), Gauss-Newton Hessian."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import iclr25.data_value_embedding as dv


def test_damping_grid_lies_above_lambda_min():
    grid = dv.damping_grid(-50.0)
    assert min(grid) > 50.0
    assert grid == tuple(sorted(grid))
    for f in dv.baselines.DAMPING_FACTORS:
        assert any(abs(g - 50.0 * f) < 1e-9 for g in grid)
    assert 1.0 not in grid and 10.0 not in grid and 100.0 in grid and 1000.0 in grid
    # a PSD Hessian (Gauss-Newton): multiples of the mean eigenvalue plus the absolute values
    psd = dv.damping_grid(0.0, trace_over_p=40.0)
    assert min(psd) == pytest.approx(0.04) and 1.0 in psd and min(psd) > 0
    with pytest.raises(ValueError, match="trace_over_p"):
        dv.damping_grid(0.0)
    with pytest.raises(ValueError, match="exceed 1"):
        dv.damping_grid(-1.0, factors=(0.5, 2.0))


def _indefinite(p=12, lam_min=-3.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(p, p, generator=gen, dtype=torch.float64))
    ev = torch.linspace(lam_min, 40.0, p, dtype=torch.float64)
    return Q @ torch.diag(ev) @ Q.T, gen


def test_selection_recovers_the_damping_that_generated_the_validation_data():
    # quadratic toy: the "retrained" validation changes are exactly an IF at lambda* = 5 |lambda_min|
    H, gen = _indefinite()
    G = torch.randn(40, 12, generator=gen, dtype=torch.float64)
    g_val = torch.randn(6, 12, generator=gen, dtype=torch.float64)
    g_test = torch.randn(3, 12, generator=gen, dtype=torch.float64)
    vp = torch.arange(0, 40, 2)
    lam_star = 15.0
    loo = dv.influence_function(G[vp], g_val, H, lam_star)
    out = dv.influence_function_validated(G, g_test, H, val_points=vp, val_grads=g_val, val_loo=loo)
    assert out.lam_min == pytest.approx(-3.0)
    assert out.damping == pytest.approx(lam_star)
    assert out.damping > abs(out.lam_min) and min(out.grid) > abs(out.lam_min)
    assert out.criterion[out.damping] == pytest.approx(1.0)
    torch.testing.assert_close(out.scores, dv.influence_function(G, g_test, H, lam_star))
    torch.testing.assert_close(out.sweep[out.damping], out.scores)
    # a grid that reaches below |lambda_min| is refused: H + lambda I would be indefinite
    with pytest.raises(ValueError, match="exceed"):
        dv.influence_function_validated(G, g_test, H, val_points=vp, val_grads=g_val, val_loo=loo,
                                        grid=(1e-2, 10.0))
    with pytest.raises(ValueError, match="val_loo"):
        dv.influence_function_validated(G, g_test, H, val_points=vp, val_grads=g_val,
                                        val_loo=loo[:-1])


def _fit_logreg(X, y, mu, w=None, iters=50):
    """Minimise sum_i log(1 + exp(-y_i x_i.w)) + mu/2 |w|^2 by Newton's method."""
    w = torch.zeros(X.shape[1], dtype=X.dtype) if w is None else w.clone()
    for _ in range(iters):
        s = torch.sigmoid(-y * (X @ w))
        grad = -(X * (y * s)[:, None]).sum(0) + mu * w
        Hs = (X * (s * (1 - s))[:, None]).T @ X + mu * torch.eye(X.shape[1], dtype=X.dtype)
        w = w - torch.linalg.solve(Hs, grad)
    return w


def test_selection_finds_the_regulariser_of_a_logistic_regression():
    # L2-regularised logistic regression retrained without each point (exact LOO at the optimum):
    # with the Hessian of the *data* loss only, the right damping is the regulariser mu
    rng = np.random.default_rng(0)
    n, d, mu = 60, 6, 3.0
    X = torch.tensor(rng.normal(size=(n, d)) * np.array([3.0, 2.0, 1.0, 0.5, 0.3, 0.1]))
    w0 = torch.tensor(rng.normal(size=d))
    y = torch.where(torch.rand(n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
                    < torch.sigmoid(X @ w0), 1.0, -1.0).double()
    Xv = torch.tensor(rng.normal(size=(8, d)) * np.array([3.0, 2.0, 1.0, 0.5, 0.3, 0.1]))
    yv = torch.where(torch.tensor(rng.random(8)) < torch.sigmoid(Xv @ w0), 1.0, -1.0).double()
    w = _fit_logreg(X, y, mu)

    def loss(w_, Xs, ys):
        return F.softplus(-ys * (Xs @ w_))

    def grads(w_, Xs, ys):
        return -(Xs * (ys * torch.sigmoid(-ys * (Xs @ w_)))[:, None])

    s = torch.sigmoid(-y * (X @ w))
    H_data = (X * (s * (1 - s))[:, None]).T @ X
    vp = torch.arange(0, n, 2)
    loo = torch.stack([loss(_fit_logreg(X[torch.arange(n) != i], y[torch.arange(n) != i], mu, w), Xv, yv)
                       - loss(w, Xv, yv) for i in vp.tolist()])
    out = dv.influence_function_validated(grads(w, X, y), grads(w, Xv, yv), H_data, val_points=vp,
                                          val_grads=grads(w, Xv, yv), val_loo=loo,
                                          grid=(mu / 30, mu, 30 * mu))
    assert out.damping == mu
    assert out.criterion[mu] > 0.95


def _tiny_run(n_train=40, n_val=6, hidden=5, n_epochs=2):
    Xtr, ytr, Xv, yv = dv.load_digits_split(n_train, n_val, seed=1)
    sched = dv.make_schedule(n_train, 8, n_epochs, seed=2)
    model = dv.MLP(64, hidden, seed=3)
    m0 = copy.deepcopy(model)
    dv.train_mlp(model, Xtr, ytr, sched, 0.5)
    return Xtr, ytr, Xv, yv, sched, model, m0


def test_validated_if_on_an_mlp_is_above_lambda_min_and_ignores_the_test_truth():
    Xtr, ytr, Xv, yv, sched, model, m0 = _tiny_run()
    G = dv.per_sample_grads(model, Xtr, ytr)
    gv = dv.per_sample_grads(model, Xv, yv)
    H = dv.hessian(model, Xtr, ytr)
    vp = torch.arange(0, 40, 4)
    loo = dv.tsloo_exact(m0, Xtr, ytr, sched, 0.5, vp, Xv, yv, removal="all", show_progress=False)
    a = dv.influence_function_validated(G, gv[:2], H, val_points=vp, val_grads=gv, val_loo=loo)
    lam_min = float(torch.linalg.eigvalsh(H)[0])
    assert a.lam_min == pytest.approx(lam_min)
    assert a.damping > abs(min(lam_min, 0.0))
    assert torch.linalg.eigvalsh(H + a.damping * torch.eye(len(H), dtype=H.dtype))[0] > 0
    torch.testing.assert_close(a.scores, dv.influence_function(G, gv[:2], H, a.damping))
    # the choice depends on the validation data only: other test points, same damping
    b = dv.influence_function_validated(G, -3 * gv[2:], H, val_points=vp, val_grads=gv, val_loo=loo)
    assert b.damping == a.damping and b.criterion == a.criterion


def test_gauss_newton_hessian_is_the_hessian_of_the_linearised_network():
    from torch.func import hessian as fhess, jvp

    Xtr, ytr, _, _, _, model, _ = _tiny_run(n_train=24, hidden=3, n_epochs=1)
    GN = dv.gauss_newton_hessian(model, Xtr, ytr, chunk=10)
    theta, logits = dv.mlp._theta_logits(model)

    def linearised_loss(th):
        f0, df = jvp(lambda t: logits(t, Xtr), (theta,), (th - theta,))
        return F.cross_entropy(f0 + df, ytr, reduction="sum")

    torch.testing.assert_close(GN, fhess(linearised_loss)(theta), rtol=1e-8, atol=1e-10)
    assert float(torch.linalg.eigvalsh(GN)[0]) > -1e-8 * float(GN.diagonal().max())
    # the ReLU network's true Hessian differs from it (and may be indefinite)
    assert not torch.allclose(GN, dv.hessian(model, Xtr, ytr))
