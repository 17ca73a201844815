"""Tests of the revisited scaling-law and feature-quality code of chapter 06: the joint law with
its irreducible term, residuals, checkpointed training, the grid runner, sparse codes, probes on
sparse codes, the extended token properties and the cluster bootstrap."""

import numpy as np
import pandas as pd
import pytest
import torch

import iclr25.topk_sae as ts
from iclr25.topk_sae import configs, quality as Q
from iclr25.topk_sae.scaling import JointLaw, fit_joint_law, run_grid


def test_joint_law_with_irreducible_term_recovers_known_exponents():
    true = JointLaw(alpha=-0.5, beta_k=0.26, beta_n=-0.017, gamma=-0.042, zeta=-3.0, eta=-0.085)
    n, k = np.meshgrid([2 ** i for i in range(9, 18)], [8, 16, 32, 64, 128, 256])
    fit = fit_joint_law(n, k, true(n, k), irreducible=True)
    for name in ("beta_k", "beta_n", "gamma", "zeta", "eta"):
        assert getattr(fit, name) == pytest.approx(getattr(true, name), abs=2e-3), name
    assert fit.rmse_log < 1e-6
    # with noise, the 4-term law still recovers its own exponents to the noise level
    four = JointLaw(alpha=0.1, beta_k=-0.2, beta_n=-0.08, gamma=-0.01)
    L = four(n, k) * np.exp(np.random.default_rng(0).normal(0, 0.01, n.shape))
    f4 = fit_joint_law(n, k, L)
    assert f4.beta_n == pytest.approx(-0.08, abs=0.02) and f4.gamma == pytest.approx(-0.01, abs=0.005)
    assert f4.rmse_log == pytest.approx(0.01, rel=0.3)


def test_log_residuals_are_zero_on_the_law_and_signed():
    law = JointLaw(alpha=0.0, beta_k=-0.1, beta_n=-0.05, gamma=0.0)
    n, k = np.array([512, 1024]), np.array([8, 32])
    np.testing.assert_allclose(law.log_residuals(n, k, law(n, k)), 0, atol=1e-12)
    r = law.log_residuals(n, k, law(n, k) * np.e)          # every loss e times the law's
    np.testing.assert_allclose(r, 1.0)


def test_train_sae_checkpoints_and_errors():
    X = torch.randn(300, 8)
    seen = []
    ts.train_sae(ts.TopKSAE(8, 16, 2, auxk=0), X, n_steps=6, batch_size=64, desc=None,
                 checkpoints=(2, 6), on_checkpoint=lambda s, m: seen.append((s, m.n_latents)))
    assert seen == [(2, 16), (6, 16)]
    with pytest.raises(ValueError, match="on_checkpoint"):
        ts.train_sae(ts.TopKSAE(8, 16, 2), X, n_steps=2, batch_size=64, desc=None, checkpoints=(1,))


def test_run_grid_shapes_and_tokens():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 12)).astype(np.float32)
    cfg = configs.scaling("smoke", ns=(16, 64), ks=(2, 4), n_steps=8, batch_size=64,
                          checkpoint_fracs=(0.5, 1.0), auxk=8)
    grid, curves, saes = run_grid(X[:500], X[500:], cfg, progress_desc=False)
    assert len(grid) == 4 and set(saes) == {(16, 2), (16, 4), (64, 2), (64, 4)}
    assert grid.set_index(["n_latents", "k"]).loc[(64, 2), "tokens"] == cfg.steps_for(64) * 64
    assert len(curves) == 8 and (curves.groupby(["n_latents", "k"]).size() == 2).all()
    last = curves.groupby(["n_latents", "k"]).nmse.last().to_numpy()
    np.testing.assert_allclose(grid.set_index(["n_latents", "k"]).nmse.to_numpy(), last, rtol=1e-6)


def test_sparse_codes_match_dense():
    sae = ts.TopKSAE(10, 40, 3, seed=1)
    X = torch.randn(50, 10)
    sc = Q.sparse_codes(sae, X.numpy(), batch_size=16)
    dense = sae.dense_code(X).detach().numpy()
    np.testing.assert_allclose(sc.toarray(), dense, rtol=1e-6, atol=1e-7)
    for j in (0, 7, 39):
        np.testing.assert_allclose(sc.column(j), dense[:, j], rtol=1e-6, atol=1e-7)
    w = np.random.default_rng(0).normal(size=50)
    np.testing.assert_allclose(sc.column_sums(w), w @ dense, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sc.column_sums(power=2), (dense ** 2).sum(0), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        Q.SparseCodes(np.array([[7]]), np.array([[1.0]]), 5)


@pytest.mark.parametrize("groups", [None, "ctx"])
def test_probe_on_sparse_codes_equals_dense(groups):
    rng = np.random.default_rng(0)
    N, n, k = 400, 30, 4
    idx = np.stack([rng.choice(n, k, replace=False) for _ in range(N)])
    vals = rng.random((N, k)).astype(np.float32)
    y = rng.random(N) < 0.3
    idx[y, 0], vals[y, 0] = 5, 2.0                          # latent 5 fires on the property
    sc = Q.SparseCodes(idx, vals, n)
    g = np.repeat(np.arange(40), 10) if groups else None
    a, b = Q.probe_loss(sc, y, groups=g), Q.probe_loss(sc.toarray(), y, groups=g)
    assert a["latent"] == b["latent"] == 5
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-6) and a["baseline"] == pytest.approx(b["baseline"])
    assert a["loss"] < 0.5 * a["baseline"]


def test_group_split_keeps_groups_whole():
    tr, te = Q._split(100, np.repeat(np.arange(10), 10), seed=0)
    g = np.repeat(np.arange(10), 10)
    assert not set(g[tr]) & set(g[te]) and len(tr) + len(te) == 100


def test_token_properties_extended_and_topics():
    toks = ["The", " war", " ended", " in", " May", " 1945", ".", " After", " the", " treaty", ",",
            " NATO", " grew", "ing"]
    ctx = np.zeros(len(toks), dtype=int)
    p = Q.token_properties(toks, ctx)
    assert len(p) >= 20
    on = lambda name: [toks[i] for i in np.nonzero(p[name])[0]]
    assert on("month") == [" May"] and on("year") == [" 1945"] and on("all_caps") == [" NATO"]
    assert on("sentence_start") == [" After"] and on("after_article") == [" war", " treaty"]
    assert on("suffix_ed") == [" ended"] and on("comma") == [","] and on("period") == ["."]
    assert on("proper_noun") == [" May", " NATO"] and on("word_continuation") == ["ing"]
    assert on("after_number") == ["."] and on("stopword") == ["The", " in", " the"]
    tp = Q.topic_properties(["Arts", "Arts", "People"])
    assert tp["topic: Arts"].tolist() == [True, True, False] and len(tp) == 2


def test_cluster_bootstrap_interval():
    rng = np.random.default_rng(0)
    vals = rng.normal(1.0, 1.0, 4000)
    m, lo, hi = Q.cluster_bootstrap(vals, np.arange(4000), seed=0)
    assert lo < 1.0 < hi and hi - lo == pytest.approx(2 * 1.96 / np.sqrt(4000), rel=0.15)
    # clustered data: one shared offset per cluster widens the interval
    c = np.repeat(np.arange(20), 200)
    v2 = rng.normal(0, 0.1, 4000) + rng.normal(0, 1, 20)[c]
    _, lo2, hi2 = Q.cluster_bootstrap(v2, c)
    assert hi2 - lo2 > 10 * (2 * 1.96 * 0.1 / np.sqrt(4000))
    d, dlo, dhi = Q.cluster_bootstrap_diff(vals + 0.5, np.arange(4000) % 50, vals, np.arange(4000) % 50)
    assert d == pytest.approx(0.5) and dlo <= 0.5 <= dhi
    with pytest.raises(ValueError, match="level"):
        Q.cluster_bootstrap(vals, c[:1].repeat(4000), level=1.5)
