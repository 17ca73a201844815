"""Chapter 04: exact DP against brute-force enumeration, the version space against its definition,
the algorithms on instances whose answer is known, and clear errors for bad input."""

from itertools import product

import numpy as np
import pytest

import iclr25.mle_model_based_rl as mb
from iclr25.profiles import ProfileError


def _random_mdp(S=3, A=2, H=3, seed=0, sparse=True):
    rng = np.random.default_rng(seed)
    P = rng.random((S, A, S)) ** 3
    if sparse:
        P[rng.random((S, A, S)) < 0.3] = 0.0
        P[:, :, 0] += 1e-3  # keep every row non-empty
    P /= P.sum(-1, keepdims=True)
    r = rng.random((S, A)) / H
    return P, r


def _enumerate(P, r, pi, H, s0):
    """Exact distribution of the return by enumerating every trajectory (tiny MDPs only)."""
    S, A, _ = P.shape
    probs = mb.as_probs(pi, A)
    out = []  # (probability, return)
    for acts in product(range(A), repeat=H):
        for nxt in product(range(S), repeat=H):
            p, g, s = 1.0, 0.0, s0
            for h in range(H):
                p *= probs[h, s, acts[h]] * P[s, acts[h], nxt[h]]
                g += r[s, acts[h]]
                s = nxt[h]
                if p == 0:
                    break
            if p > 0:
                out.append((p, g))
    p, g = np.array(out).T
    return p, g


def test_value_iteration_backends_agree_and_match_brute_force():
    S, A, H = 3, 2, 3
    Ps = np.stack([_random_mdp(S, A, H, seed=k)[0] for k in range(5)])
    r = _random_mdp(S, A, H, seed=0)[1]
    Vb, pib = mb.value_iteration(Ps, r, H, backend="batched")
    Vl, pil = mb.value_iteration(Ps, r, H, backend="loop")
    Vn, pin = mb.value_iteration(Ps, r, H, backend="numba")
    np.testing.assert_allclose(Vb, Vl, atol=1e-14)
    np.testing.assert_allclose(Vn, Vl, atol=1e-14)
    np.testing.assert_array_equal(pib, pil)
    np.testing.assert_array_equal(pin, pil)
    Va, _ = mb.value_iteration(Ps, r, H)   # auto
    np.testing.assert_allclose(Va, Vl, atol=1e-14)
    # brute force: the best of all A^(H*S) deterministic Markov policies, from every start state
    for m in range(len(Ps)):
        best = np.full(S, -np.inf)
        for flat in product(range(A), repeat=H * S):
            pi = np.array(flat).reshape(H, S)
            best = np.maximum(best, mb.evaluate(Ps[m], r, pi, H)[0, 0])
        np.testing.assert_allclose(Vb[m, 0], best, atol=1e-12)
        np.testing.assert_allclose(mb.evaluate(Ps[m], r, pib[m], H)[0, 0], Vb[m, 0], atol=1e-12)


def test_backends_agree_on_larger_random_models():
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.full(7, 0.3), size=(40, 7, 3))
    r = rng.random((7, 3)) / 12
    out = {b: mb.value_iteration(P, r, 12, backend=b) for b in ("numba", "batched", "loop")}
    for b in ("numba", "batched"):
        np.testing.assert_allclose(out[b][0], out["loop"][0], atol=1e-13, err_msg=b)
        np.testing.assert_array_equal(out[b][1], out["loop"][1], err_msg=b)



@pytest.mark.parametrize("backend", ["numba", "batched", "loop"])
def test_every_backend_rejects_bad_transitions(backend):
    # the numba path validates P inside its kernel; it must refuse what check_transitions refuses
    P = np.full((2, 3, 2, 3), 1 / 3)
    r = np.zeros((3, 2))
    rows = ([-1e-6, 0.5, 0.5 + 1e-6],         # a negative entry (the row sums to 1)
            [1 / 3 + 1e-4, 1 / 3, 1 / 3],       # a row off by 1e-4
            [np.nan, 0.5, 0.5])
    for row in rows:
        Q = P.copy()
        Q[1, 2, 1] = row
        with pytest.raises(ValueError, match="probability vectors"):
            mb.value_iteration(Q, r, 4, backend=backend)
    many = np.broadcast_to(P[:1], (40, 3, 2, 3)).copy()    # one bad row in one model of many
    many[37, 1, 0] = [0.5, 0.5, 0.5]
    with pytest.raises(ValueError, match="probability vectors"):
        mb.value_iteration(many, r, 4, backend=backend)
    ok = P.copy()
    ok[0, 0, 0] += np.array([5e-7, 0.0, 0.0])   # within np.allclose's tolerance: accepted
    assert mb.value_iteration(ok, r, 4, backend=backend)[0].shape == (2, 5, 3)


@pytest.mark.parametrize("stochastic_policy", [False, True])
def test_value_and_variance_match_trajectory_enumeration(stochastic_policy):
    S, A, H = 3, 2, 3
    P, r = _random_mdp(S, A, H, seed=3)
    rng = np.random.default_rng(1)
    if stochastic_policy:
        pi = rng.random((H, S, A))
        pi /= pi.sum(-1, keepdims=True)
    else:
        pi = rng.integers(0, A, size=(H, S))
    for s0 in range(S):
        p, g = _enumerate(P, r, pi, H, s0)
        assert p.sum() == pytest.approx(1.0)
        mean, var = mb.return_moments(P, r, pi, H)
        assert mean[0, s0] == pytest.approx((p * g).sum(), abs=1e-12)
        assert var[0, s0] == pytest.approx((p * g ** 2).sum() - (p * g).sum() ** 2, abs=1e-12)
        assert mb.evaluate(P, r, pi, H)[0, 0, s0] == pytest.approx((p * g).sum(), abs=1e-12)


def test_occupancy_matches_enumeration_and_sums_to_one():
    S, A, H = 3, 2, 3
    P, _ = _random_mdp(S, A, H, seed=5)
    pi = np.random.default_rng(0).integers(0, A, size=(H, S))
    d = mb.occupancy(P, pi, H, 0)
    np.testing.assert_allclose(d.sum((1, 2)), 1.0)
    # h = 1 by hand
    d1 = np.zeros((S, A))
    for s1 in range(S):
        d1[s1, pi[1, s1]] = P[0, pi[0, 0], s1]
    np.testing.assert_allclose(d[1], d1, atol=1e-15)


def test_gamble_chain_closed_forms():
    H, L = 16, 2
    for q, rho in [(0.3, 0.4), (0.8, 0.4), (1.0, 0.9), (0.0, 0.1)]:
        mdp = mb.gamble_chain(q, slip=0.0, rho=rho, lock=(1, 0), L=L, H=H)
        V, pi = mdp.optimal()
        steps_left = (H - L - 1) / H  # reach the gamble at h = L, the goal or exit at h = L + 1
        assert V[0, 0] == pytest.approx(max(q, rho) * steps_left)
        assert pi[0, 0] == 1 and pi[1, 1] == 0     # follows the lock
        gamble = pi.copy()
        gamble[:, L] = 0
        # the gamble's return is Bernoulli(q) x steps_left: variance q(1-q) steps_left^2
        assert mdp.return_variance(gamble) == pytest.approx(q * (1 - q) * steps_left ** 2)
    det = mb.gamble_chain(1.0, slip=0.0, rho=0.5, H=H)
    assert det.return_variance(det.optimal()[1]) == pytest.approx(0.0, abs=1e-15)


def test_rollout_frequencies_match_the_model():
    mdp = mb.gamble_chain(0.3, slip=0.2, rho=0.4, H=8)
    pi = mdp.optimal()[1]
    pi[:, 2] = 0  # always gamble
    states, actions = mdp.rollout(pi, 20000, rng=0)
    assert states.shape == (20000, 9) and actions.shape == (20000, 8)
    counts = mb.counts_from(states, actions, mdp.S, mdp.A)
    freq = counts[2, 0] / counts[2, 0].sum()
    np.testing.assert_allclose(freq, mdp.P[2, 0], atol=0.015)
    slip = counts[0, 0] / counts[0, 0].sum()
    np.testing.assert_allclose(slip, mdp.P[0, 0], atol=0.015)
    per_ep = mb.counts_from(states, actions, mdp.S, mdp.A, per_episode=True)
    np.testing.assert_array_equal(per_ep.sum(0), counts)
    assert per_ep.sum((1, 2, 3)).tolist() == [8.0] * 20000


def test_loglik_and_version_space_match_definitions():
    cls = mb.gamble_chain_class(mb.q_grid(11), slip_grid=(0.0, 0.2), rho=0.4, H=8)
    assert cls.M == 4 * 2 * 11
    true = cls.index(lock=(0, 1), slip=0.2, q=0.6)
    states, actions = mb.rollout(cls.P[true], cls.optimal()[1][true], 8, 0, 30, rng=1)
    counts = mb.counts_from(states, actions, cls.S, cls.A)
    ll = cls.loglik(counts)
    # direct sum over transitions
    for m in [true, 0, 5, cls.M - 1]:
        with np.errstate(divide="ignore"):
            direct = sum(np.log(cls.P[m, s, a, t]) for ep in range(30) for s, a, t in
                         zip(states[ep, :-1], actions[ep], states[ep, 1:]))
        assert ll[m] == pytest.approx(direct) if np.isfinite(direct) else ll[m] == -np.inf
    assert np.isfinite(ll[true])
    beta = cls.beta(0.1)
    vs = cls.version_space(counts, beta)
    np.testing.assert_array_equal(vs, ll >= ll.max() - beta)
    assert vs[cls.mle(counts)] and vs[true]
    assert (cls.version_space(counts, 0.5) <= vs).all()   # smaller beta, smaller set
    batched = cls.loglik(np.stack([counts, 2 * counts]))
    np.testing.assert_allclose(batched[1][np.isfinite(ll)], 2 * ll[np.isfinite(ll)])


def test_mle_random_tie_break_is_uniform_over_ties():
    cls = mb.gamble_chain_class(mb.q_grid(3), H=8)
    counts = np.zeros((cls.S, cls.A, cls.S))      # no data: every model ties
    picks = {int(cls.mle(counts, rng=k)) for k in range(200)}
    assert len(picks) > cls.M // 2
    assert cls.mle(counts) == 0


def test_optimism_on_a_deterministic_instance_stops_regretting():
    cls = mb.gamble_chain_class(mb.q_grid(11), rho=0.5, H=8)
    true = cls.index(lock=(1, 1), slip=0.0, q=1.0)
    res = mb.run_online(cls, true, 60, n_seeds=4, seed=0, show_progress=False)
    assert res.regret.shape == (4, 60) and res.covered.all()
    assert np.all(res.regret[:, -20:] == 0)        # the optimal policy found and kept
    assert np.all(res.regret >= -1e-12)
    assert np.all(res.variance[:, -1] == 0)        # deterministic: zero return variance
    assert np.all(np.diff(res.vs_size, axis=1) <= 0)


def test_greedy_can_lock_in_where_optimism_does_not():
    cls = mb.gamble_chain_class(mb.q_grid(11), rho=0.5, H=8)
    true = cls.index(lock=(0, 0), slip=0.0, q=0.7)
    opt = mb.run_online(cls, true, 150, algorithm="optimistic", n_seeds=16, seed=1, show_progress=False)
    greedy = mb.run_online(cls, true, 150, algorithm="greedy", n_seeds=16, seed=1, show_progress=False)
    assert opt.cum_regret[:, -1].mean() < greedy.cum_regret[:, -1].mean()


def test_cppo_lr_is_the_max_min_over_its_policy_set():
    H = 8
    cls = mb.gamble_chain_class(mb.q_grid(11), slip_grid=(0.0, 0.2), rho=0.4, H=H)
    true = cls.index(lock=(0, 1), slip=0.2, q=0.5)
    beh = mb.gamble_behaviour(H, 2, 0.3)
    table = mb.PolicyTable(cls, extra=[beh])
    counts = mb.collect(cls.P[true], beh, H, 0, 200, rng=0)
    beta = cls.beta(0.1)
    res = mb.cppo_lr(cls, counts, beta, table=table)
    vs = cls.version_space(counts, beta)
    # brute force over the same policy set: distinct optimal policies of plausible models + behaviour
    _, pi_all = cls.optimal()
    cands = [pi_all[m] for m in np.flatnonzero(vs)] + [beh]
    worst = [mb.evaluate(cls.P[vs], cls.r, p, H)[:, 0, 0].min() for p in cands]
    assert res.estimate == pytest.approx(max(worst))
    assert res.estimate == pytest.approx(mb.pessimistic_value(cls, counts, beta, res.policy))
    assert vs[true] and res.estimate <= cls.values_in(res.policy)[true] + 1e-12
    plug = mb.plug_in(cls, counts, table=table)
    m = cls.mle(counts)
    assert plug.estimate == pytest.approx(cls.optimal()[0][m, 0, 0])


def test_coverage_coefficient():
    H = 8
    mdp = mb.gamble_chain(0.5, rho=0.4, H=H)
    target = mdp.optimal()[1]
    assert mb.coverage(mdp.P, target, target, H, 0) == pytest.approx(1.0)
    beh = mb.gamble_behaviour(H, 2, 0.5)
    # the target follows the lock for 2 steps and gambles (3 halvings by h = 2); at h = 3 it is in
    # the goal with probability q = 1/2 and takes action 0 there, which the behaviour policy does
    # with probability 1/2 * 1/2^3 * q: the worst ratio is 16
    assert mb.coverage(mdp.P, target, beh, H, 0) == pytest.approx(16.0)
    assert mb.coverage(mdp.P, target, mb.gamble_behaviour(H, 2, 0.0), H, 0) == np.inf


def test_loglog_slope_and_grids():
    K = np.array([10, 100, 1000.0])
    assert mb.loglog_slope(K, 3 * K ** -0.5) == pytest.approx(-0.5)
    g = mb.fine_q_grid()
    assert g[0] == 0 and g[-1] == 1 and np.all(np.diff(g) > 0) and (g > 0.999).sum() >= 3
    with pytest.raises(ValueError, match="at least two"):
        mb.loglog_slope([1, 2], [0, 0])


def test_clear_errors():
    with pytest.raises(ValueError, match="S, A, S"):
        mb.value_iteration(np.ones((3, 2, 4)) / 4, np.zeros((3, 2)), 3)
    with pytest.raises(ValueError, match="probability vectors"):
        mb.value_iteration(np.ones((3, 2, 3)), np.zeros((3, 2)), 3)
    with pytest.raises(ValueError, match=r"valid: auto, numba, batched, loop"):
        mb.value_iteration(np.ones((3, 2, 3)) / 3, np.zeros((3, 2)), 3, backend="gpu")
    with pytest.raises(ValueError, match="reward r must have shape"):
        mb.value_iteration(np.ones((3, 2, 3)) / 3, np.zeros((2, 3)), 3)
    with pytest.raises(ValueError, match="normalised"):
        mb.TabularMDP(np.ones((2, 1, 2)) / 2, np.ones((2, 1)), H=3)
    mb.TabularMDP(np.ones((2, 1, 2)) / 2, np.ones((2, 1)), H=3, normalised=False)
    cls = mb.gamble_chain_class(mb.q_grid(3), H=8)
    with pytest.raises(ValueError, match="valid: optimistic, greedy, eps_greedy"):
        mb.run_online(cls, 0, 5, algorithm="ucb")
    with pytest.raises(ValueError, match="counts must be"):
        cls.loglik(np.zeros((3, 3)))
    with pytest.raises(KeyError, match="parameters are"):
        cls.index(q=0.123)
    with pytest.raises(ValueError, match="delta"):
        cls.beta(1.5)
    with pytest.raises(ValueError, match="lock"):
        mb.gamble_chain(0.5, lock=(0, 2))
    with pytest.raises(ProfileError, match="valid:"):
        mb.online_config("smoke", n_episodes=3)
    with pytest.raises(ProfileError, match="valid profiles"):
        mb.offline_config("huge")


def test_infeasible_settings_get_clear_errors():
    with pytest.raises(ValueError, match="realizability"):
        mb.instance("stochastic", H=8, q_grid=[0.0, 1.0], slip_grid=(0.0, 0.2))
    with pytest.raises(ValueError, match="valid: deterministic, near-deterministic"):
        mb.instance("random", H=8, q_grid=mb.q_grid(3), slip_grid=(0.0,))
    with pytest.raises(ValueError, match="slip = 1"):
        mb.gamble_chain(0.5, slip=1.0)
    with pytest.raises(ValueError, match="K .* must be >= 1"):
        mdp = mb.gamble_chain(0.5)
        mb.collect(mdp.P, mdp.optimal()[1], mdp.H, 0, 0, rng=0)
    cls, true = mb.instance("stochastic", H=8, q_grid=mb.q_grid(21), slip_grid=(0.0, 0.2))
    assert cls.params[true] == {"lock": mb.LOCK, "slip": 0.2, "q": 0.5}


# ---- issue 35: the river lock, UCBVI-CH, the realised-gap family, the restriction check ----------

def test_river_lock_structure_and_closed_forms():
    for H in (4, 16):
        mdp = mb.river_lock(0.5, back=0.2, rho=0.3, lock=(1, 0, 1), N=3, H=H, s0=0)
        assert mdp.S == 3 and mdp.A == 2
        # swim at state 1 (lock action 0): up 0.5, back 0.2, stay 0.3; drift at state 1 goes to 0
        np.testing.assert_allclose(mdp.P[1, 0], [0.2, 0.3, 0.5])
        np.testing.assert_allclose(mdp.P[1, 1], [1.0, 0.0, 0.0])
        np.testing.assert_allclose(mdp.P[2, 1], [0.0, 0.2, 0.8])       # swim at the top holds
        drift = np.zeros((H, 3), dtype=np.int64)                         # drift at 0 is action 0
        assert mdp.value(drift) == pytest.approx(0.3)                    # rho/H for H steps
        assert mdp.return_variance(drift) == pytest.approx(0.0, abs=1e-15)
    # the same transitions at every horizon: only the reward scale changes
    a, b = mb.river_lock(H=8), mb.river_lock(H=64)
    np.testing.assert_array_equal(a.P, b.P)
    for gap in (0.05, -0.05):
        H = 16
        rho = mb.river_rho(H, gap)
        mdp = mb.river_lock(rho=rho, H=H)                                # starts in the middle
        V = mdp.optimal()[0][0, mdp.s0]
        v_swim = mb.river_lock(rho=0.0, H=H).optimal()[0][0, mdp.s0]
        drift = np.broadcast_to(1 - np.array(mb.RIVER["lock"]), (H, 3))
        assert mdp.value(drift) == pytest.approx(rho * (H - 1) / H)       # one step to reach 0
        assert mdp.value(drift) == pytest.approx(v_swim - gap)
        assert V >= max(v_swim, v_swim - gap) - 1e-12
    cls = mb.river_lock_class([0.5, 0.9], [0.0, 0.2], N=3, H=8)
    assert cls.M == 8 * 3                         # p = 0.9 with back = 0.2 is left out
    assert cls.index(lock=(1, 0, 1), p=0.5, back=0.2) >= 0


def test_policy_values_match_evaluate():
    mdp = mb.river_lock(H=6)
    pis = np.random.default_rng(0).integers(0, 2, size=(7, 6, 3))
    got = mb.policy_values(mdp.P, mdp.r, pis, 6, mdp.s0)
    want = [mdp.value(p) for p in pis]
    np.testing.assert_allclose(got, want, atol=1e-14)


def test_ucbvi_plan_matches_a_plain_loop():
    rng = np.random.default_rng(3)
    S, A, H = 3, 2, 5
    r = rng.random((S, A)) / H
    counts = rng.integers(0, 4, size=(4, S, A, S)).astype(float)
    counts[0, 1, 0] = 0                           # an unvisited pair
    c, L = np.array([0.0, 0.1, 0.5, 2.0]), 3.0
    pi = mb.ucbvi_plan(counts, r, H, c, L)
    for i in range(4):
        n = counts[i].sum(-1)
        V = np.zeros(S)
        for h in range(H - 1, -1, -1):
            Q = np.zeros((S, A))
            for s in range(S):
                for a in range(A):
                    cap = (H - h) * r.max()
                    if n[s, a] == 0:
                        Q[s, a] = cap
                    else:
                        Q[s, a] = min(cap, r[s, a] + counts[i, s, a] @ V / n[s, a] + c[i] * np.sqrt(L / n[s, a]))
            np.testing.assert_array_equal(pi[i, h], Q.argmax(-1))
            V = Q.max(-1)


def test_ucbvi_learns_and_regret_is_exact():
    mdp = mb.river_lock(0.9, back=0.0, rho=0.1, lock=(0, 1, 0), N=3, H=8, s0=0)
    res = mb.run_ucbvi(mdp, 150, bonus_scale=[0.05, 0.2], n_seeds=3, seed=0, show_progress=False)
    assert res.regret.shape == (6, 150) and np.all(res.regret >= -1e-12)
    assert res.v_star == pytest.approx(mdp.optimal()[0][0, mdp.s0])
    assert res.regret[:, -20:].mean() < 0.2 * res.regret[:, :20].mean()   # it learns
    np.testing.assert_array_equal(res.bonus_scale, [0.05] * 3 + [0.2] * 3)


def test_horizon_sweep_and_shared_tuning():
    df = mb.horizon_sweep((4, 8), 6, p_grid=(0.3, 0.5), back_grid=(0.2,), ucb_scales=(0.1, 1.0),
                          beta_scales=(1.0,), n_seeds=2, show_progress=False)
    assert len(df) == 2 * (2 * 1 + 2 * 2)
    assert set(df["learner"]) == {"O-MBRL", "UCBVI-CH"} and (df["regret"] >= -1e-9).all()
    best = mb.tune_shared(df)
    g = df[df.learner == "UCBVI-CH"].groupby(["knob", "H"])["regret"].mean().unstack()
    assert best["UCBVI-CH"] == float(g.sum(axis=1).idxmin())      # registered: mean regret summed over H
    with pytest.raises(ValueError, match="realizability"):
        mb.horizon_sweep((4,), 2, p_grid=(0.3,), back_grid=(0.2,), show_progress=False)


def test_worst_case_gap_family():
    H = 8
    qg = mb.q_grid(11)
    beh = mb.gamble_behaviour(H, 2, 0.5)
    make = lambda g: mb.gamble_chain_class(qg, slip_grid=(0.0,), rho=0.5 - g, H=H)
    df = mb.worst_case_gap_sweep(make, dict(lock=mb.LOCK, slip=0.0, q=0.5), [0.02, 0.2], beh, (5, 50), 3,
                                 0.1, seed=0, show_progress=False)
    assert len(df) == 2 * 3 * 2 and (df["gap"] >= -1e-12).all()
    for g, sub in df.groupby("g"):
        cls = make(g)
        true = cls.index(lock=mb.LOCK, slip=0.0, q=0.5)
        vals = mb.PolicyTable(cls, extra=[beh]).values[:, true]
        v_star = cls.optimal()[0][true, 0, 0]
        for gap in sub["gap"]:                       # every realised gap is that of some candidate
            assert np.isclose(v_star - vals, gap).any()
    bad = lambda g: mb.gamble_chain_class(qg, slip_grid=(0.0, g), rho=0.4, H=H)
    with pytest.raises(ValueError, match="same transition models"):
        mb.worst_case_gap_sweep(bad, dict(lock=mb.LOCK, slip=0.0, q=0.5), [0.1, 0.2], beh, (5,), 1, 0.1,
                                show_progress=False)


def test_restriction_check_against_brute_force():
    pols = mb.all_deterministic_policies(2, 3, 2)
    assert pols.shape == (64, 2, 3) and len(np.unique(pols.reshape(64, -1), axis=0)) == 64
    with pytest.raises(ValueError, match="too many"):
        mb.all_deterministic_policies(5, 5, 2)
    cls = mb.gamble_chain_class(mb.q_grid(5), slip_grid=(0.0,), rho=0.4, L=1, H=3)
    true = cls.index(lock=(0,), slip=0.0, q=0.75)
    beh = mb.gamble_behaviour(3, 1, 0.5)
    rc = mb.restriction_check(cls, true, beh, (3, 30), 3, cls.beta(0.1), seed=0)
    assert (rc["maxmin_all"] >= rc["maxmin_restricted"] - 1e-12).all()
    # the all-policy max-min by a direct loop, for the first data set: no policy beats it, and the
    # restricted set's choice is attained exactly
    counts = mb.collect(cls.P[true], beh, 3, 0, 3, np.random.default_rng(0))
    vs = cls.version_space(counts, cls.beta(0.1))
    pols = mb.all_deterministic_policies(3, 5, 2)
    some = pols[np.random.default_rng(1).choice(len(pols), 200, replace=False)]
    direct = max(mb.evaluate(cls.P[vs], cls.r, p, 3)[:, 0, 0].min() for p in some)
    assert direct <= rc["maxmin_all"].iloc[0] + 1e-12
    res = mb.cppo_lr(cls, counts, cls.beta(0.1), table=mb.PolicyTable(cls, extra=[beh]))
    assert res.estimate == pytest.approx(rc["maxmin_restricted"].iloc[0])
    # the all-policy max-min is attained: the exit-everywhere policy is worth rho * 1/3 in every model
    assert rc["maxmin_all"].iloc[0] >= 0.4 / 3 - 1e-12


def test_horizon_bad_inputs():
    with pytest.raises(ValueError, match="p \\+ back"):
        mb.river_lock(0.9, back=0.2)
    with pytest.raises(ValueError, match="lock must be"):
        mb.river_lock(lock=(0, 1))
    with pytest.raises(ValueError, match="rho must lie"):
        mb.river_rho(8, 0.9)
    with pytest.raises(ValueError, match="bonus_scale"):
        mb.run_ucbvi(mb.river_lock(H=4), 3, bonus_scale=-1.0)
    with pytest.raises(ValueError, match="counts must be"):
        mb.ucbvi_plan(np.zeros((2, 3, 2)), np.zeros((3, 2)), 3, 1.0, 1.0)


# --------------------------------------------------------------------------------------------
# issue 55 / the registry: UCBVI-BF, the river variants, tuning to an interior value, VI-LCB, and
# the replicates each registered statistic is computed from


def test_ucbvi_bernstein_plan_matches_a_plain_loop():
    rng = np.random.default_rng(4)
    S, A, H = 3, 2, 5
    r = rng.random((S, A)) / H
    counts = rng.integers(0, 4, size=(3, S, A, S)).astype(float)
    counts[1, 2, 1] = 0
    c, L = np.array([0.0, 0.05, 0.5]), 2.5
    pi = mb.ucbvi_plan(counts, r, H, c, L, bonus="bernstein")
    for i in range(3):
        n = counts[i].sum(-1)
        V = np.zeros(S)
        for h in range(H - 1, -1, -1):
            Q = np.zeros((S, A))
            for s, a in product(range(S), range(A)):
                cap = (H - h) * r.max()
                if n[s, a] == 0:
                    Q[s, a] = cap
                    continue
                p = counts[i, s, a] / n[s, a]
                var = p @ V ** 2 - (p @ V) ** 2
                b = c[i] * (np.sqrt(2 * L * max(var, 0) / n[s, a]) + 7 * (H - h - 1) * r.max() * L / (3 * n[s, a]))
                Q[s, a] = min(cap, r[s, a] + p @ V + b)
            np.testing.assert_array_equal(pi[i, h], Q.argmax(-1))
            V = Q.max(-1)
    with pytest.raises(ValueError, match="unknown bonus"):
        mb.ucbvi_plan(counts, r, H, 1.0, L, bonus="azuma")


def test_river_variants():
    pg, bg = (0.3, 0.5), (0.1, 0.2)
    fixed, t = mb.river_instance(16, 0.05, p_grid=pg, back_grid=bg)
    step, t2 = mb.river_instance(16, 0.05, p_grid=pg, back_grid=bg, variant="per-step")
    assert t == t2 and np.array_equal(fixed.P, step.P)
    np.testing.assert_allclose(step.r, 16 * fixed.r)                   # per-step reward 1, not 1/H
    for H in (8, 16, 32):
        cls, true = mb.river_instance(H, 0.05, p_grid=pg, back_grid=bg, variant="growing")
        N = 2 + H // 8
        assert cls.S == N and cls.s0 == N // 2 and cls.M == 2 ** (H // 8) * 4  # log|P| linear in H
        assert cls.params[true]["lock"] == mb.growing_lock(H) and cls.params[true]["p"] == 0.5
        v = cls.optimal()[0][true, 0, cls.s0]
        rho = cls.r[0, 1 - mb.growing_lock(H)[0]] * H
        safe = rho * mb.river_lock(rho=1.0, lock=mb.growing_lock(H), N=N, H=H, s0=N // 2).value(
            np.broadcast_to(1 - np.array(mb.growing_lock(H)), (H, N)))
        assert v > safe                                                 # swimming is optimal by the gap
    with pytest.raises(ValueError, match="divisible by 8"):
        mb.growing_lock(12)
    with pytest.raises(ValueError, match="variant"):
        mb.river_instance(8, 0.05, p_grid=pg, back_grid=bg, variant="wide")


def test_tune_interior_extends_a_grid_whose_best_is_an_end():
    calls = []
    def score(vals):
        calls.append(list(vals))
        return [(np.log(v) - np.log(0.01)) ** 2 for v in vals]
    best, scores = mb.tune_interior(score, [0.1, 1.0, 10.0])
    assert best == pytest.approx(0.1 / 9) and min(scores) < best < max(scores)   # interior, never an end
    assert calls[0] == [0.1, 1.0, 10.0] and len(calls) == 4                       # 0.033, 0.011, 0.0037
    best, _ = mb.tune_interior(lambda v: [(x - 1.0) ** 2 for x in v], [0.5, 1.0, 2.0])
    assert best == 1.0
    with pytest.raises(ValueError, match="at least 3"):
        mb.tune_interior(score, [1.0, 2.0])


def test_tune_river_choices_are_interior():
    grids = {"UCBVI-CH": (0.1, 0.3, 1.0), "O-MBRL": (0.5, 1.0, 2.0)}
    knobs, runs = mb.tune_river((4, 8), 5, grids, p_grid=(0.3, 0.5), back_grid=(0.2,), gap=0.05,
                                n_seeds=2, seed=0)
    for learner, knob in knobs.items():
        tried = sorted(runs[runs.learner == learner]["knob"].unique())
        assert tried[0] < knob < tried[-1]
        g = runs[runs.learner == learner].groupby(["knob", "H"])["regret"].mean().groupby("knob").sum()
        assert g.idxmin() == knob or np.isclose(g.min(), g.loc[knob])


def test_late_slopes_closed_form():
    k = np.arange(1, 201, dtype=float)
    cum = np.stack([np.sqrt(k), np.full_like(k, 3.0), k, np.where(k > 150, 1.0, 0.0)])
    got = mb.late_slopes(cum)
    assert got[0] == pytest.approx(0.5) and got[1] == 0.0 and got[2] == pytest.approx(1.0)
    assert got[3] == 0.0                                   # stopped growing (constant from k = 151)


def test_block_slopes_against_a_direct_fit():
    import pandas as pd

    rng = np.random.default_rng(0)
    rows = [{"H": H, "seed": s, "regret": rng.random() * H ** (0.1 * (s // 2))}
            for H in (8, 16, 32) for s in range(6)]
    df = pd.DataFrame(rows)
    got = mb.block_slopes(df, "H", "regret", 3)
    for b in range(3):
        m = [df[(df.H == H) & (df.seed // 2 == b)]["regret"].mean() for H in (8, 16, 32)]
        assert got[b] == pytest.approx(np.polyfit(np.log([8, 16, 32]), np.log(m), 1)[0])
    fam = pd.DataFrame([{"K": K, "seed": s, "g": g, "gap": rng.random() / K}
                        for K in (10, 100) for s in range(4) for g in (0.1, 0.2)])
    w = mb.worst_block_slopes(fam, "K", 2)
    for b in range(2):
        m = [fam[(fam.K == K) & (fam.seed // 2 == b)].groupby("g")["gap"].mean().max() for K in (10, 100)]
        assert w[b] == pytest.approx(np.log(m[1] / m[0]) / np.log(10))
    with pytest.raises(ValueError, match="equal blocks"):
        mb.block_slopes(df, "H", "regret", 4)


def test_version_space_sizes_against_direct_counts():
    cls = mb.gamble_chain_class(mb.q_grid(5), slip_grid=(0.0, 0.2), rho=0.4, H=6)
    true = cls.index(lock=mb.LOCK, slip=0.2, q=0.5)
    beh = mb.gamble_behaviour(6, 2, 0.5)
    got = mb.version_space_sizes(cls, true, beh, (1, 4), 3, cls.beta(0.1), 7)
    rng = np.random.default_rng(7)
    for i, n in enumerate((1, 4)):
        st, ac = mb.rollout(cls.P[true], beh, 6, 0, n * 3, rng)
        c = mb.counts_from(st, ac, cls.S, cls.A, per_episode=True).reshape(3, n, cls.S, cls.A, cls.S).sum(1)
        vs = cls.version_space(c, cls.beta(0.1))
        np.testing.assert_array_equal(got["size"][i], vs.sum(-1))
        np.testing.assert_array_equal(got["covered"][i], vs[:, true])


def test_vi_lcb_matches_a_plain_loop_and_width_closed_form():
    rng = np.random.default_rng(5)
    S, A, H = 3, 2, 4
    counts = rng.integers(0, 5, size=(S, A, S)).astype(float)
    counts[2, 0] = 0                                        # an unvisited pair
    r = rng.random((2, S, A)) / H
    w = mb.lcb_width(counts, H, r.max(), 0.1)
    n = counts.sum(-1)
    L = np.log(2 * S * A * H / 0.1)
    assert w[0, 0, 0] == pytest.approx((H - 1) * r.max() * np.sqrt(L / (2 * n[0, 0])))
    assert np.isinf(w[1, 2, 0]) and np.all(w[H - 1][n > 0] == 0)
    pi = mb.vi_lcb(counts, r, H, [0.5, 2.0])
    for b, c in enumerate([0.5, 2.0]):
        V = np.zeros(S)
        for h in range(H - 1, -1, -1):
            Q = np.zeros((S, A))
            for s, a in product(range(S), range(A)):
                if n[s, a] > 0:
                    Q[s, a] = max(0.0, r[b, s, a] + counts[s, a] @ V / n[s, a] - c * w[h, s, a])
            np.testing.assert_array_equal(pi[b, h], Q.argmax(-1))
            V = Q.max(-1)
    # random tie-breaking: all-zero values (a huge penalty) give both actions, not always the first
    big = mb.vi_lcb(counts, r[:1], H, 1e6, rng=np.random.default_rng(0))
    many = np.stack([mb.vi_lcb(counts, r[:1], H, 1e6, rng=np.random.default_rng(i)) for i in range(20)])
    assert big.shape == (1, H, S) and len(np.unique(many[:, 0, 0, 0])) == 2
    with pytest.raises(ValueError, match="scale"):
        mb.vi_lcb(counts, r, H, -1.0)


def test_policy_table_fast_values_and_family_sweep():
    from iclr25.mle_model_based_rl.offline import _unique_rows

    x = np.random.default_rng(0).integers(0, 3, (40, 4))
    u, inv = np.unique(x, axis=0, return_inverse=True)
    u2, inv2 = _unique_rows(x)
    np.testing.assert_array_equal(u, u2); np.testing.assert_array_equal(inv.ravel(), inv2)
    H = 6
    beh = mb.gamble_behaviour(H, 2, 0.5)
    make = lambda g: mb.gamble_chain_class(mb.q_grid(11), slip_grid=(0.0, 0.2), rho=0.5 - g, H=H)
    cls = make(0.1)
    tab = mb.PolicyTable(cls, extra=[beh])
    np.testing.assert_allclose(tab.values, np.stack([cls.values_in(p) for p in tab.policies]), atol=1e-14)
    fam = mb.Family(make, dict(lock=mb.LOCK, slip=0.2, q=0.5), [0.05, 0.2], beh)
    df = fam.sweep([20, 200], 3, 0.1, seed=0, lcb_scales=[0.3, 1.0])
    assert len(df) == 2 * 3 * 2 and {"gap", "gap_lcb@0.3", "gap_lcb@1"} <= set(df)
    assert (df[["gap", "gap_lcb@0.3", "gap_lcb@1"]] >= -1e-12).all().all()
    old = mb.worst_case_gap_sweep(make, dict(lock=mb.LOCK, slip=0.2, q=0.5), [0.05, 0.2], beh, [20, 200], 3,
                                  0.1, seed=0, show_progress=False)
    np.testing.assert_allclose(old["gap"], df["gap"])            # VI-LCB does not change the data
