"""Chapter 02, the notebooks' measurements: scores against scipy, the closed-form Hessian against
torch.func, the recorder's projection matrix against its records, the Fig. 3 run's invariants,
the projection study without projection, the solver timing, the regime margin, influence
saturation against a hand computation, and the selection runs (masks, gradient alignment against
per-window autograd, paired candidate streams, the gain fraction)."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

import iclr25.data_value_embedding as dv
from iclr25 import tinygpt


def test_spearman_per_item_matches_scipy_with_ties():
    rng = np.random.default_rng(0)
    est = rng.normal(size=(30, 4))
    truth = rng.normal(size=(30, 4))
    est[:5, 1] = 0.7                      # ties
    truth[3:9, 2] = -1.0
    got = dv.spearman_per_item(est, truth)
    ref = [spearmanr(est[:, j], truth[:, j]).statistic for j in range(4)]
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert dv.mean_spearman(est, truth) == pytest.approx(got.mean())
    with pytest.raises(ValueError, match=r"\(n, m\)"):
        dv.spearman_per_item(est, truth[:, :3])


def test_cross_item_partner_and_score():
    y = np.array([3, 3, 5, 3, 7])
    p = dv.cross_item_partner(y)
    assert p.tolist() == [2, 2, 3, 4, 0]
    assert all(y[p] != y)
    rng = np.random.default_rng(1)
    est, truth = rng.normal(size=(20, 5)), rng.normal(size=(20, 5))
    got = dv.cross_item_spearman(est, truth, y)
    ref = [spearmanr(est[:, p[j]], truth[:, j]).statistic for j in range(5)]
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    with pytest.raises(ValueError, match="two classes"):
        dv.cross_item_partner([1, 1, 1])


def _trained_mlp(n=40, hidden=5, lr=0.3):
    Xtr, ytr, _, _ = dv.load_digits_split(n, 2, seed=2)
    model = dv.MLP(64, hidden, seed=1)
    dv.train_mlp(model, Xtr, ytr, dv.make_schedule(n, 8, 2, seed=0), lr)
    return model, Xtr, ytr


def test_closed_form_hessian_equals_autograd():
    model, X, y = _trained_mlp()
    ref = dv.hessian(model, X, y, method="autograd")
    got = dv.hessian(model, X, y)
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-10)
    GN = dv.gauss_newton_hessian(model, X, y)
    torch.testing.assert_close(dv.hessian(model, X, y, gauss_newton=GN), ref, rtol=1e-10, atol=1e-10)
    assert not torch.allclose(GN, ref)    # the cross term is not zero
    with pytest.raises(ValueError, match="unknown method"):
        dv.hessian(model, X, y, method="finite-differences")


def test_projection_matrix_reproduces_the_records():
    model, X, y = _trained_mlp()
    for proj_dim in (16, 49, 10_000):     # projected, partly projected, not projected at all
        rec = dv.GradRecorder(model, proj_dim=proj_dim, seed=3)
        with rec.step(torch.arange(len(X)), lr=0.1):
            F.cross_entropy(model(X), y).backward()
        P = rec.projection_matrix()
        assert P.shape == (rec.dim, sum(p.numel() for p in model.parameters()))
        torch.testing.assert_close(rec.records.grads[0], dv.per_sample_grads(model, X, y) @ P.T)
    assert torch.equal(P, torch.eye(P.shape[0], dtype=P.dtype))


def _tiny_fig3(**kw):
    return dv.fig3("smoke", n_train=60, n_test=6, hidden=4, batch_size=12, n_epochs=3, n_val=6,
                   n_val_removed=8, **kw)


def test_fig3_run_invariants():
    cfg = _tiny_fig3()
    run = dv.tsloo_vs_influence(cfg, lr=0.2, seed=1)
    rho = run.rho
    assert set(rho.index) == set(dv.METHODS_FIG3) and list(rho.columns) == ["last", "all"]
    for r in ("last", "all"):
        assert run.per_point[(r, "DVEmb")].shape == (cfg.n_test,)
        # the hindsight damping is the best of both grids on the ground truth: at least as good
        # as any validated choice
        assert rho.loc["IF (hindsight λ)", r] >= rho.loc["IF (practitioner)", r] - 1e-12
        assert rho.loc["IF (hindsight λ)", r] == pytest.approx(run.sweep[r].max())
    # the practitioner's Hessian is the one with the better validation criterion
    assert run.criteria[run.practitioner] == max(run.criteria.values())
    chosen = {"exact H": "IF (exact H, validated λ)", "Gauss-Newton": "IF (Gauss-Newton, validated λ)"}
    np.testing.assert_array_equal(run.per_point[("last", "IF (practitioner)")],
                                  run.per_point[("last", chosen[run.practitioner])])
    # the influence function is blind to when a point was used; DVEmb is not
    assert run.if_max_diff == 0.0 and run.dvemb_rel_diff > 0.01
    assert all(run.dampings[k] > max(-run.lam_mins[k], 0) for k in run.dampings)
    table = dv.spearman_table([run, dv.tsloo_vs_influence(cfg, lr=0.1, seed=1)])
    assert table.index.tolist() == [(0.1, 1), (0.2, 1)]
    assert table.loc[(0.2, 1), ("last", "DVEmb")] == pytest.approx(rho.loc["DVEmb", "last"])
    diffs = dv.point_differences([run])
    d = run.per_point[("all", "DVEmb")] - run.per_point[("all", "IF (practitioner)")]
    assert diffs.loc[(0.2, "all"), "mean difference"] == pytest.approx(d.mean())
    assert diffs.loc[(0.2, "all"), "DVEmb ahead"] == (d > 0).sum()


def test_projection_study_without_projection_is_exact():
    # a per-layer dimension larger than every factor projects nothing: both estimators must then
    # agree exactly with their unprojected selves
    cfg = dv.recursion("smoke", n_train=40, hidden=4, batch_size=8, n_epochs=2, n_test=4, n_val=5,
                       n_val_removed=6, proj_dims=(4, 10_000))
    out = dv.projection_robustness(cfg, seed=0)
    exact = out[out["proj_dim per layer"] == 10_000].set_index("recursion")
    assert exact["Spearman with unprojected"].tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert exact["relative error"].max() < 1e-10
    small = out[out["proj_dim per layer"] == 4].set_index("recursion")
    assert small.loc["full", "stored p~"] == 2 * 4 and small.loc["full", "relative error"] > 1e-3


def test_time_solvers_agree_and_repeat():
    t = dv.time_solvers(48, 96, repeats=2, seed=5, batch=16)
    assert t["repeat"].tolist() == [0, 1] and (t["rel. diff"] < 1e-4).all()
    assert (t["speed-up"] == t["reference s"] / t["blocked s"]).all()
    with pytest.raises(ValueError, match="repeats"):
        dv.time_solvers(48, 96, repeats=0)


def test_regime_margin_closed_form():
    T, W = 100, 4
    c = np.zeros(T)
    c[:W] = 3.0
    c[T // 4:3 * T // 4] = np.tile([1.0, -1.0], T // 4)
    c[-10:] = 2.0
    s = dv.regime_summary(c, W)
    assert s["basin_sd"] == pytest.approx(np.std(np.tile([1.0, -1.0], T // 4), ddof=1))
    assert dv.regime_margin(s) == pytest.approx(min(3.0, 2.0) / s["basin_sd"])
    c[-10:] = -0.5
    assert dv.regime_margin(dv.regime_summary(c, W)) < 0


def test_saturation_against_a_hand_computation():
    gen = torch.Generator().manual_seed(0)
    rec = dv.Records()
    T, B, p = 20, 3, 4
    lrs = [0.05 * (1 + t % 3) for t in range(T)]
    for t in range(T):
        rec.append(torch.randn(B, p, generator=gen, dtype=torch.float64), lrs[t] / B,
                   torch.arange(B) + B * t)
    ks = [5, 10, 15, 20]
    vg = {k: torch.randn(2, p, generator=gen, dtype=torch.float64) for k in ks}
    table, logr = dv.saturation(rec, lrs, vg, 4, n_bins=4)
    assert list(table.columns) == ks
    # by hand: the first bin is iterations 0..4, covered from checkpoint 5 on
    vals = {}
    for k in (5, 20):
        emb = dv.compute_dvemb(rec.truncate(k), method="reference")
        s = (emb.rows @ vg[k].mean(0)).abs() / torch.tensor(lrs)[emb.row_step]
        vals[k] = float(s[emb.row_step < 5].mean())
    assert table.loc[0, 5] == pytest.approx(vals[5]) and table.loc[0, 20] == pytest.approx(vals[20])
    assert logr == pytest.approx(math.log(vals[20] / vals[5]))
    with pytest.raises(ValueError, match="checkpoint"):
        dv.saturation(rec, lrs, {20: vg[20]}, 4, n_bins=4)


def test_selection_steps_masks():
    assert not dv.selection_steps("none", 50).any() and dv.selection_steps("all", 50).all()
    e = dv.selection_steps("early", 100)
    assert e[:4].all() and e.sum() == 4
    el = dv.selection_steps("early+late", 100)
    assert el[:4].all() and el[-16:].all() and el.sum() == 20
    assert dv.selection_steps("early", 10).sum() == 1           # at least one step
    with pytest.raises(ValueError, match="unknown arm"):
        dv.selection_steps("middle", 10)


def _tiny_lm():
    return dv.pythia_like(vocab_size=13, d_model=8, n_layers=1, n_heads=2, max_len=6, seed=0).double()


def test_gradient_alignment_equals_per_window_autograd():
    model = _tiny_lm()
    gen = torch.Generator().manual_seed(2)
    x, y = torch.randint(0, 13, (5, 6), generator=gen), torch.randint(0, 13, (5, 6), generator=gen)
    xv, yv = torch.randint(0, 13, (3, 6), generator=gen), torch.randint(0, 13, (3, 6), generator=gen)
    rec = dv.GradRecorder(model)
    got = dv.gradient_alignment(model, rec, x, y, xv, yv)
    lin = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    params = [p for m in lin for p in (m.weight, m.bias) if p is not None]

    def grads(xx, yy):
        return torch.autograd.grad(tinygpt.lm_loss(model(xx), yy), params)

    gv = grads(xv, yv)                    # gradient of the validation batch's mean loss
    ref = [sum(float((a * b).sum()) for a, b in zip(grads(x[i:i + 1], y[i:i + 1]), gv))
           for i in range(5)]
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-9)


def test_arms_see_the_same_candidates():
    stream = torch.randint(0, 13, (400,), generator=torch.Generator().manual_seed(0))
    guide = torch.randint(0, 13, (200,), generator=torch.Generator().manual_seed(1))

    def run(mask):
        model = _tiny_lm().float()
        return dv.train_with_selection(model, stream, guide, select=mask, batch_size=4, seq_len=5,
                                       lr=1e-2, warmup=1, val_batch=3, seed=7)

    T = 6
    base = run(np.zeros(T, dtype=bool))
    assert run(np.zeros(T, dtype=bool))["loss"] == base["loss"]        # deterministic
    late = run(np.arange(T) == T - 1)
    # identical up to the selecting step (same pools, same random keeps), different there
    assert late["loss"][:T - 1] == base["loss"][:T - 1]
    assert late["loss"][-1] != base["loss"][-1]
    assert len(late["alignment"]) == 1 and late["alignment"][0] >= 0


def test_validation_loss_is_the_mean_window_loss():
    model = _tiny_lm()
    stream = torch.randint(0, 13, (300,), generator=torch.Generator().manual_seed(3))
    got = dv.validation_loss(model, stream, n_windows=10, seq_len=5, seed=4, chunk=3)
    starts = torch.randint(0, 300 - 6, (10,), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ref = np.mean([float(tinygpt.lm_loss(model(stream[s:s + 5][None]), stream[s + 1:s + 6][None]))
                       for s in starts.tolist()])
    assert got == pytest.approx(ref, rel=1e-9)


def test_gain_fraction():
    f = dv.gain_fraction([2.0, 3.0], [1.5, 2.9], [1.0, 2.5])
    np.testing.assert_allclose(f, [0.5, 0.2])
    with pytest.raises(ValueError, match="undefined"):
        dv.gain_fraction([2.0], [1.0], [2.0])
    with pytest.raises(ValueError, match="one loss per replicate"):
        dv.gain_fraction([2.0, 1.0], [1.0], [2.0])
