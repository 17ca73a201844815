"""Chapter 15: the generalisation bounds of ``iclr25.kan_bounds.bounds`` against hand and brute-force
computations of the same formulas, their monotonicity and scaling, and the errors bad input gets."""

import math

import numpy as np
import pytest
import torch

import iclr25.kan_bounds as kb
from iclr25.kan_bounds.bounds import SILU_MIN


def _tiny(widths=(2, 3, 1), base=True, bias=False, seed=0):
    torch.manual_seed(seed)
    m = kb.KAN(list(widths), grid_size=3, base=base, bias=bias, dtype=torch.float64)
    with torch.no_grad():
        for L in m.layers:
            L.coef.normal_()
            if L.bias is not None:
                L.bias.normal_()
    return m


def test_bspline_kappa_closed_form_and_finite_differences():
    # cubic: sup_t sum_r B_r'(t)^2 = 13/16 at mid-interval (hand computation of the four local derivatives)
    assert kb.bspline_kappa(3, 0.4) == pytest.approx(math.sqrt(13 / 16) / 0.4, rel=1e-9)
    # linear hats: derivatives +-1/h on two functions -> sqrt(2)/h
    assert kb.bspline_kappa(1, 0.5) == pytest.approx(math.sqrt(2) / 0.5, rel=1e-9)
    assert kb.bspline_kappa(0) == 0.0
    # brute force: finite differences of the full basis on a fine grid never exceed kappa
    for k in (1, 2, 3, 4):
        x = torch.linspace(-2.2, 2.2, 44001, dtype=torch.float64)[:, None]
        B = kb.bspline_basis(x, 5, k, backend="reference")[:, 0]
        d = (B[1:] - B[:-1]) / (x[1, 0] - x[0, 0])
        fd = float(d.pow(2).sum(1).sqrt().max())
        kap = kb.bspline_kappa(k, 0.4)
        assert fd <= kap * (1 + 1e-6)
        assert fd >= kap * 0.999                              # and it is attained


def test_silu_sup_brute_force():
    t = np.linspace(-30, 30, 600001)
    silu = t / (1 + np.exp(-t))
    assert silu.min() == pytest.approx(SILU_MIN, abs=1e-6)
    for m in (0.0, 0.5, 1.2784645, 2.0, 7.0):
        want = np.abs(silu[np.abs(t) <= m]).max() if m > 0 else 0.0
        assert want - 1e-12 <= kb.silu_sup(m) <= want + 2e-4    # grid step 1e-4, slope <= 1.1


def test_layer_terms_by_hand():
    m = _tiny(bias=True)
    L = m.layers[0]
    t = kb.layer_terms(L, m_in=1.5)
    C = L.coef.detach().reshape(3, -1)
    Cb = torch.cat([C, L.bias.detach()[:, None]], 1)
    assert t.a == pytest.approx(float(Cb.abs().sum()))
    assert t.row_l1 == pytest.approx(float(Cb.abs().sum(1).max()))
    assert t.spectral == pytest.approx(float(np.linalg.svd(C.numpy(), compute_uv=False)[0]))
    assert t.W == 3 * (2 * L.n_basis + 1)
    assert t.kappa == pytest.approx(math.hypot(kb.bspline_kappa(3, L.h), kb.SILU_MAX_SLOPE))
    assert t.beta == pytest.approx(max(1.0, kb.silu_sup(1.5)))
    assert t.m_out == pytest.approx(t.a * t.beta)


def _rbar_brute(terms, norms):
    """R-bar recomputed with plain loops from its definition."""
    L = len(terms)
    total = 0.0
    for l in range(L):
        rho = 1.0
        for mm in range(l + 1, L):
            rho *= (terms[mm].a if norms == "l1" else terms[mm].spectral) * terms[mm].kappa
        u = terms[l].a * terms[l].beta * rho
        total += (u * u * math.log(2 * terms[l].W)) ** (1.0 / 3.0)
    return total ** 1.5


@pytest.mark.parametrize("norms", kb.NORMS)
def test_entropy_matches_brute_force_and_the_allocation_is_optimal(norms):
    m = _tiny((3, 4, 2, 1))
    X = torch.rand(50, 3, dtype=torch.float64) * 2 - 1
    out = kb.kan_bound(m, X, torch.zeros(50, 1), norms=norms)
    terms = out["layers"]
    assert out["complexity"] == pytest.approx(_rbar_brute(terms, norms), rel=1e-12)
    eps = np.array([0.1, 1.0, 10.0])
    logn, rbar = kb.entropy(terms, eps, norms=norms)
    P = sum(math.log(2 * t.W) for t in terms)
    np.testing.assert_allclose(logn, rbar ** 2 / eps ** 2 + P)
    # any other split of eps over the layers gives a larger (still valid) count
    s = [t.a if norms == "l1" else t.spectral for t in terms]
    rho = [math.prod(s[q] * terms[q].kappa for q in range(l + 1, len(terms))) for l in range(len(terms))]
    u2 = [(t.a * t.beta * r) ** 2 * math.log(2 * t.W) for t, r in zip(terms, rho)]
    rng = np.random.default_rng(0)
    for _ in range(20):
        alpha = rng.dirichlet(np.ones(len(terms)))
        assert sum(x / a ** 2 for x, a in zip(u2, alpha)) >= rbar ** 2 * (1 - 1e-12)


def test_dudley_against_closed_form():
    # ln N = A^2/eps^2: inf_a 4a + 12 A ln(D/a)/sqrt n at a* = 3A/sqrt n
    A, n, D = 2.0, 1000, 50.0
    val, alpha = kb.dudley(lambda e: A ** 2 / e ** 2, D, n)
    a_star = 3 * A / math.sqrt(n)
    closed = 4 * a_star + 12 * A / math.sqrt(n) * math.log(D / a_star)
    assert closed <= val <= closed * 1.01                     # upper Riemann sum: never below
    assert alpha == pytest.approx(a_star, rel=0.02)
    # a huge entropy: the trivial alpha = D wins and the value is 4 D
    assert kb.dudley(lambda e: 1e12 / e ** 2, D, n)[0] == pytest.approx(4 * D)


def test_bound_is_homogeneous_in_the_last_layer_and_monotone():
    """Scaling C_L by t scales R-bar by t (every u_l carries ||C_L|| once); larger norms or a
    smaller delta never lower the bound; more samples lower it for the same network."""
    m = _tiny((2, 3, 1), base=False)
    X = torch.rand(200, 2, dtype=torch.float64) * 2 - 1
    y = torch.zeros(200, 1, dtype=torch.float64)
    base = kb.kan_bound(m, X, y)
    for norms in kb.NORMS:
        r0 = kb.kan_bound(m, X, y, norms=norms)["complexity"]
        with torch.no_grad():
            m.layers[-1].coef.mul_(3.0)
        assert kb.kan_bound(m, X, y, norms=norms)["complexity"] == pytest.approx(3 * r0, rel=1e-10)
        with torch.no_grad():
            m.layers[-1].coef.div_(3.0)
    with torch.no_grad():
        m.layers[0].coef.mul_(2.0)
    bigger = kb.kan_bound(m, X, y)
    assert bigger["complexity"] > base["complexity"] and bigger["bound"] >= base["bound"]
    assert kb.kan_bound(m, X, y, delta=0.01)["bound"] > kb.kan_bound(m, X, y, delta=0.1)["bound"]
    X4 = X.repeat(4, 1)
    more = kb.kan_bound(m, X4, torch.zeros(800, 1, dtype=torch.float64))
    assert more["main_term"] == pytest.approx(bigger["main_term"] / 2, rel=1e-10)   # 1/sqrt(n)
    assert more["rademacher"] <= bigger["rademacher"]          # (both may sit at the trivial 4 D)


def test_zero_nodes_enter_only_through_the_log():
    m = _tiny((2, 3, 2, 1))
    X = torch.rand(100, 2, dtype=torch.float64) * 2 - 1
    y = torch.zeros(100, 1, dtype=torch.float64)
    wide = kb.add_zero_nodes(m, 1, 20)
    a, b = kb.kan_bound(m, X, y), kb.kan_bound(wide, X, y)
    for s, t in zip(a["layers"], b["layers"]):
        assert (s.a, s.kappa, s.beta) == pytest.approx((t.a, t.kappa, t.beta))
    # recompute the narrow model's R-bar with the wide model's atom counts: equal
    swapped = [kb.LayerTerms(**{**vars(s), "W": t.W}) for s, t in zip(a["layers"], b["layers"])]
    assert kb.entropy(swapped, np.array([1.0]))[1] == pytest.approx(b["complexity"], rel=1e-12)
    ratio = max(math.log(2 * t.W) / math.log(2 * s.W) for s, t in zip(a["layers"], b["layers"]))
    assert 1 < b["complexity"] / a["complexity"] <= math.sqrt(ratio) + 1e-12


def test_bound_dominates_the_gap_and_loss_range_by_hand():
    d = kb.regression("f2", 120, 400, noise=0.3, seed=0)
    torch.manual_seed(0)
    m = kb.KAN([4, 3, 1])
    kb.train(m, d, n_steps=5, lr=0.05, optimizer="sgd", batch_size=30, log_bounds=False)
    out = kb.kan_bound(m, d.X_train, d.y_train)
    with torch.no_grad():
        gap = float(((m(d.X_test) - d.y_test) ** 2).mean() - ((m(d.X_train) - d.y_train) ** 2).mean())
    assert out["bound"] >= gap
    Y = float(d.y_train.abs().max())
    assert out["loss_range"] == pytest.approx((out["m_out"] + Y) ** 2)
    assert out["lip_loss"] == pytest.approx(2 * (out["m_out"] + Y))
    assert out["confidence"] == pytest.approx(3 * out["loss_range"] * math.sqrt(math.log(40) / 240))
    with torch.no_grad():                                     # the sup bound holds on the sample
        assert float(m(d.X_train).abs().max()) <= out["m_out"]


def test_rkhs_bound_terms_and_rank_dependence():
    torch.manual_seed(0)
    X = torch.rand(60, 3) * 2 - 1
    m = kb.LowRankRKHSKAN([3, 4, 2], rank=3)
    L = m.layers[0]
    t = kb.layer_terms(L, 1.0)
    norms = L.rkhs_norms().detach()
    assert t.beta == pytest.approx(float(norms.max()))
    assert t.kappa == pytest.approx(math.sqrt(3) * float(norms.max()) / L.lengthscale)
    assert t.param_dim == 3 * L.centers.numel()
    # |g_s'| <= ||g_s||_H / ell on a fine grid (brute force)
    xs = torch.linspace(-3, 3, 20001)[:, None]
    with torch.no_grad():
        g = L.basis(xs)[:, 0]                                # (points, r)
    slope = ((g[1:] - g[:-1]) / (xs[1, 0] - xs[0, 0])).abs().amax(0)
    assert bool((slope <= norms / L.lengthscale * (1 + 1e-3)).all())
    assert float(g.abs().max()) <= float(norms.max()) * (1 + 1e-6)
    out = kb.kan_bound(m, X, loss="ce")
    assert out["loss_range"] == pytest.approx(2 * out["m_out"] + math.log(2))
    # the parametric term: entropy exceeds the Maurey-only value by r M ln(1 + ...) > 0
    eps = np.array([0.5])
    full = kb.entropy(out["layers"], eps)[0]
    fixed = [kb.LayerTerms(**{**vars(s), "param_dim": 0}) for s in out["layers"]]
    assert float(full[0]) > float(kb.entropy(fixed, eps)[0][0])


@pytest.mark.parametrize("call, match", [
    (lambda: kb.kan_bound(kb.KAN([2, 1]), torch.rand(5, 3), torch.zeros(5, 1)), r"shape \(n, 2\)"),
    (lambda: kb.kan_bound(kb.KAN([2, 1]), torch.rand(5, 2)), "needs the targets"),
    (lambda: kb.kan_bound(kb.KAN([2, 1]), torch.rand(5, 2), torch.zeros(5, 1), norms="frob"), "valid: l1, spectral"),
    (lambda: kb.kan_bound(kb.KAN([2, 1]), torch.rand(5, 2), torch.zeros(5, 1), loss="hinge"), "valid: mse, ce"),
    (lambda: kb.kan_bound(kb.KAN([2, 1]), torch.rand(5, 2), torch.zeros(5, 1), delta=1.5), r"\(0, 1\)"),
    (lambda: kb.layer_terms(torch.nn.Linear(2, 2), 1.0), "KANLayer or RKHSLayer"),
    (lambda: kb.bspline_kappa(3, 0.0), "h must be > 0"),
    (lambda: kb.dudley(lambda e: e, 0.0, 10), "D > 0"),
    (lambda: kb.silu_sup(-1), ">= 0"),
])
def test_bad_input_gets_clear_errors(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
