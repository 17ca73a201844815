"""Tests of iclr25.topk_sae (chapter 06) against brute force and closed forms on small inputs."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import iclr25.topk_sae as ts
from iclr25.profiles import ProfileError
from iclr25.topk_sae import configs, kernels
from iclr25.topk_sae.scaling import JointLaw, fit_joint_law


def _sae(**kw):
    sae = ts.TopKSAE(12, 40, 4, seed=3, **kw)
    with torch.no_grad():
        sae.b_enc.normal_(0, 0.3)
        sae.b_pre.normal_(0, 0.3)
    return sae


def _assert_grads_match_autograd(sae, x, dead, stats):
    """The .grad fields topk_loss_and_grads left equal autograd's through the dense reference."""
    fast = {n: p.grad.clone() for n, p in sae.named_parameters()}
    for p in sae.parameters():
        p.grad = None
    loss = ts.topk_loss_reference(sae, x, 0.8, dead)
    loss.backward()
    assert stats["loss"] == pytest.approx(float(loss), rel=1e-5)
    for name, p in sae.named_parameters():
        torch.testing.assert_close(fast[name], p.grad, rtol=1e-4, atol=1e-6)


def test_topk_code_has_k_entries_and_matches_brute_force():
    sae = _sae()
    x = torch.randn(30, 12)
    idx, vals = sae.encode(x)
    assert idx.shape == vals.shape == (30, 4)
    pre = sae.pre_acts(x).detach()
    for b in range(30):  # brute force: the 4 largest pre-activations, ReLU'd
        order = np.argsort(-pre[b].numpy())[:4]
        assert set(order.tolist()) == set(idx[b].tolist())
        assert torch.allclose(vals[b], pre[b, idx[b]].relu())
    z = sae.dense_code(x)
    assert ((z != 0).sum(1) <= 4).all()
    with torch.no_grad():
        sae.b_enc.fill_(100.0)   # all pre-activations positive: exactly k nonzeros
    assert ((sae.dense_code(x) != 0).sum(1) == 4).all()


@pytest.mark.parametrize("backend", ["torch", "reference"])
def test_kernels_agree_with_dense(backend):
    g = torch.Generator().manual_seed(0)
    n, d, B, k = 50, 7, 13, 5
    W = torch.randn(n, d, generator=g)
    idx = torch.randint(0, n, (B, k), generator=g)
    vals = torch.rand(B, k, generator=g)
    Z = torch.zeros(B, n).index_put_((torch.arange(B)[:, None].expand(B, k), idx), vals,
                                     accumulate=True)
    G = torch.randn(B, d, generator=g)
    torch.testing.assert_close(ts.sparse_decode(idx, vals, W, backend=backend), Z @ W)
    torch.testing.assert_close(ts.sampled_rowdot(idx, G, W, backend=backend), (G @ W.T).gather(1, idx))
    torch.testing.assert_close(ts.scatter_rows(idx, vals, G, n, backend=backend), Z.T @ G,
                               rtol=1e-5, atol=1e-5)
    out = torch.full((n, d), float("nan"))      # written into a buffer: overwritten, then added
    ts.scatter_rows(idx, vals, G, n, backend=backend, out=out)
    torch.testing.assert_close(out, Z.T @ G, rtol=1e-5, atol=1e-5)
    ts.scatter_rows(idx, vals, G, n, backend=backend, out=out, accumulate=True)
    torch.testing.assert_close(out, 2 * Z.T @ G, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="out must have shape"):
        ts.scatter_rows(idx, vals, G, n, backend=backend, out=torch.empty(n, d + 1))


@pytest.mark.parametrize("k", [1, 5, 16])
def test_blocked_topk_equals_torch_topk(k):
    g = torch.Generator().manual_seed(k)
    pre = torch.randn(64, 1024, generator=g)
    vals, idx = kernels.topk_rows(pre, k)
    ref_vals, ref_idx = pre.topk(k, dim=-1)
    assert torch.equal(vals, ref_vals) and torch.equal(idx, ref_idx)
    # heavy ties: the values must still be the k largest, each index distinct and pointing at them
    tied = torch.randint(0, 20, (64, 1024), generator=g).float()
    vals, idx = kernels.topk_rows(tied, k)
    assert torch.equal(vals, tied.topk(k, dim=-1).values)
    assert torch.equal(tied.gather(1, idx), vals)
    assert all(len(set(row.tolist())) == k for row in idx)
    # the block maxima miss nothing: plant the k largest entries all in one block
    planted = torch.rand(8, 1024, generator=g)
    planted[:, 64:64 + k] = 2 + torch.arange(k, dtype=torch.float32)
    assert sorted(kernels.topk_rows(planted, k)[1][0].tolist()) == list(range(64, 64 + k))


def test_blocked_topk_fallback_and_errors():
    pre = torch.randn(5, 100)             # 100 is not a multiple of the block: torch.topk
    for k in (1, 7, 100):
        assert torch.equal(kernels.topk_rows(pre, k)[0], pre.topk(k, dim=-1).values)
    with pytest.raises(ValueError, match="k must be in"):
        kernels.topk_rows(pre, 0)
    with pytest.raises(ValueError, match="batch, n"):
        kernels.topk_rows(pre[0], 3)


def test_fast_gradients_with_blocked_topk_and_buffer():
    sae = ts.TopKSAE(12, 512, 4, auxk=20, seed=1)   # n = 512: the blocked top-k is used
    with torch.no_grad():
        sae.b_enc.normal_(0, 0.3)
    x = torch.randn(25, 12)
    dead = torch.arange(512) % 5 == 0
    buf = torch.full((25, 512), float("nan"))
    for p in sae.parameters():     # stale .grad buffers (NaN) are overwritten, never added to
        p.grad = torch.full_like(p, float("nan"))
    stats, idx, _ = ts.topk_loss_and_grads(sae, x, 0.8, dead, out=buf)
    assert all(torch.isfinite(p.grad).all() for p in sae.parameters())
    torch.testing.assert_close(buf, sae.pre_acts(x).detach())
    assert torch.equal(idx, sae.encode(x)[0])
    _assert_grads_match_autograd(sae, x, dead, stats)
    with pytest.raises(ValueError, match="out must be"):
        ts.topk_loss_and_grads(sae, x, 0.8, out=torch.empty(24, 512))


def test_triton_interpreter_matches_torch():
    pytest.importorskip("triton")
    code = textwrap.dedent("""
        import torch
        from iclr25.topk_sae import kernels, triton_kernels
        assert triton_kernels.available()
        g = torch.Generator().manual_seed(1)
        n, d, B, k = 40, 20, 6, 3
        W = torch.randn(n, d, generator=g); G = torch.randn(B, d, generator=g)
        idx = torch.randint(0, n, (B, k), generator=g); vals = torch.rand(B, k, generator=g)
        for f, args in [(kernels.sparse_decode, (idx, vals, W)), (kernels.sampled_rowdot, (idx, G, W))]:
            torch.testing.assert_close(f(*args, backend="triton"), f(*args, backend="torch"))
        torch.testing.assert_close(kernels.scatter_rows(idx, vals, G, n, backend="triton"),
                                   kernels.scatter_rows(idx, vals, G, n, backend="torch"))
        import iclr25.topk_sae as ts          # a whole training step on Triton's kernels
        x, dead = torch.randn(9, d, generator=g), torch.arange(n) % 4 == 0
        grads = {}
        for be in ("triton", "torch"):
            sae = ts.TopKSAE(d, n, 3, auxk=5, multi_topk=True, seed=2)
            stats, _, _ = ts.topk_loss_and_grads(sae, x, 0.5, dead, backend=be)
            grads[be] = [p.grad.clone() for p in sae.parameters()] + [torch.tensor(stats["loss"])]
        for a, b in zip(grads["triton"], grads["torch"]):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        print("OK")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]


@pytest.mark.parametrize("multi", [False, True])
@pytest.mark.parametrize("with_dead", [False, True])
def test_fast_gradients_equal_autograd(multi, with_dead):
    sae = _sae(auxk=6, multi_topk=multi)
    x = torch.randn(25, 12)
    dead = (torch.arange(40) % 3 == 0) if with_dead else None
    stats, idx, vals = ts.topk_loss_and_grads(sae, x, 0.8, dead)
    _assert_grads_match_autograd(sae, x, dead, stats)


def test_decoder_projection_and_normalisation():
    sae = _sae()
    sae.W_dec.grad = torch.randn_like(sae.W_dec)
    sae.project_decoder_grad_()
    assert (sae.W_dec.grad * sae.W_dec).sum(1).abs().max() < 1e-5
    with torch.no_grad():
        sae.W_dec.mul_(3.0)
    sae.normalize_decoder_()
    torch.testing.assert_close(sae.W_dec.norm(dim=1), torch.ones(40))


def test_tied_init_and_geometric_median():
    sae = ts.TopKSAE(5, 9, 2, init="tied")
    torch.testing.assert_close(sae.W_enc, sae.W_dec)
    assert not torch.allclose(ts.TopKSAE(5, 9, 2, init="random").W_enc, sae.W_dec)
    x = torch.tensor([[0.0], [1.0], [2.0], [10.0], [11.0]])   # 1-D: the median
    assert float(ts.geometric_median(x)[0]) == pytest.approx(2.0, abs=1e-3)
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 3, generator=g, dtype=torch.float64)
    m = ts.geometric_median(X).double()
    cost = lambda y: (X - y).norm(dim=1).sum()
    for _ in range(50):   # no nearby point is better
        assert cost(m) <= cost(m + 1e-2 * torch.randn(3, generator=g, dtype=torch.float64)) + 1e-9


def test_training_reduces_loss_and_tracks_dead_latents():
    data = ts.superposition_data(2048, 16, 32, mean_active=3, seed=0)
    sae = ts.TopKSAE(16, 64, 3, auxk=16, seed=0)
    before = ts.evaluate(sae, data.X)["nmse"]
    log = ts.train_sae(sae, data.X, n_steps=60, batch_size=256, lr=3e-3, dead_tokens=512,
                       desc=None)
    after = ts.evaluate(sae, data.X)
    assert after["nmse"] < 0.6 * before
    assert after["l0"] <= 3
    since = log.tokens_since_fired
    assert since.shape == (64,) and int(since.max()) <= 60 * 256
    assert log.dead_fraction[-1] == pytest.approx(float((since >= 512).float().mean()))


def test_relu_sae_and_shrinkage_closed_form():
    sae = ts.ReLUSAE(4, 4, 0.1)
    with torch.no_grad():
        sae.W_dec.copy_(torch.eye(4)); sae.W_enc.copy_(0.5 * torch.eye(4))
        sae.b_pre.zero_(); sae.b_enc.zero_()
    x = torch.rand(10, 4) + 0.1
    assert ts.shrinkage(sae, x) == pytest.approx(1.0, rel=1e-5)   # code is half size: alpha = 2
    orig, refined = ts.refine_on_support(sae, x, n_iter=500)
    np.testing.assert_allclose(refined, 2 * orig, rtol=1e-3)


def test_evaluate_nmse_closed_form():
    x = torch.randn(64, 6)
    assert ts.nmse(x.mean(0).expand_as(x), x) == pytest.approx(1.0)
    assert ts.nmse(x, x) == 0.0


def test_superposition_and_feature_recovery():
    data = ts.superposition_data(4000, 8, 20, mean_active=2.0, seed=1)
    assert data.X.shape == (4000, 8) and data.features.shape == (20, 8)
    assert data.mean_l0 == pytest.approx(2.0, rel=0.1)
    perm = torch.randperm(20)
    rec = ts.feature_recovery(data.features[perm], data.features)
    assert rec["mcc"] == pytest.approx(1.0) and rec["mmcs"] == pytest.approx(1.0)
    rec = ts.feature_recovery(-data.features, data.features)
    assert rec["mmcs"] < 0.9


def test_save_load_round_trip(tmp_path):
    sae = _sae(multi_topk=True)
    ts.save(sae, tmp_path / "sae")
    back = ts.load(tmp_path / "sae")
    x = torch.randn(5, 12)
    torch.testing.assert_close(back(x), sae(x))
    assert back.multi_topk and back.k == 4
    with pytest.raises(FileNotFoundError, match="sae_weights.safetensors"):
        ts.load(tmp_path / "nothing")


def test_saelens_loads_our_folder(tmp_path):
    sae_lens = pytest.importorskip("sae_lens")
    sae = _sae()
    ts.save(sae, tmp_path / "sae")
    theirs = sae_lens.SAE.load_from_disk(str(tmp_path / "sae"), device="cpu")
    x = torch.randn(6, 12)
    torch.testing.assert_close(theirs.decode(theirs.encode(x)), sae(x), rtol=1e-4, atol=1e-5)


def test_joint_law_recovers_coefficients():
    law = JointLaw(alpha=0.5, beta_k=0.26, beta_n=-0.017, gamma=-0.042)
    n, k = np.meshgrid([256, 512, 1024, 2048], [8, 16, 32, 64])
    fit = fit_joint_law(n, k, law(n, k))
    assert fit.beta_k == pytest.approx(0.26, abs=1e-8)
    assert fit.gamma == pytest.approx(-0.042, abs=1e-8)
    assert fit.n_exponent(32) == pytest.approx(-0.017 - 0.042 * np.log(32))
    with pytest.raises(ValueError, match="two distinct"):
        fit_joint_law([1, 1, 1, 1], [1, 2, 3, 4], [1, 1, 1, 1])


def test_bad_input_errors():
    with pytest.raises(ValueError, match=r"k must be in \[1, n_latents=10\]"):
        ts.TopKSAE(4, 10, 11)
    with pytest.raises(ValueError, match="valid: torch, triton, reference"):
        ts.TopKSAE(4, 10, 2, backend="cuda")
    with pytest.raises(ValueError, match="valid: tied, random"):
        ts.TopKSAE(4, 10, 2, init="zeros")
    with pytest.raises(ValueError, match=r"shape \(batch, d_model=4\)"):
        ts.TopKSAE(4, 10, 2).encode(torch.randn(3, 5))
    with pytest.raises(ValueError, match="latent indices must lie"):
        ts.sparse_decode(torch.tensor([[12]]), torch.tensor([[1.0]]), torch.randn(10, 4))
    with pytest.raises(ProfileError, match="valid:"):
        configs.synthetic("smoke", n_stepz=3)
    with pytest.raises(ProfileError, match="valid profiles"):
        configs.scaling("huge")
    with pytest.raises(TypeError, match="train_relu_sae"):
        ts.train_sae(ts.ReLUSAE(4, 8, 0.1), torch.randn(10, 4), n_steps=1)


def test_configs_every_profile():
    for make in (configs.synthetic, configs.dead_latents, configs.scaling, configs.quality):
        for p in ("smoke", "book", "paper"):
            make(p)
    cfg = configs.scaling("book", ns=(512, 2048, 4608), n_steps=100)
    # lr x steps is the same for every n: steps grow as sqrt(n / smallest n)
    assert [cfg.steps_for(n) for n in cfg.ns] == [100, 200, 300]
