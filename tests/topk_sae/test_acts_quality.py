"""Tests of the activation cache, the spliced LM loss and the feature-quality metrics (chapter 06)."""

import numpy as np
import pytest
import torch

import iclr25.topk_sae as ts
from iclr25.topk_sae import acts as A, quality as Q


class CharTokenizer:
    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) % 50 for c in text]}


def test_collect_activations_matches_hidden_states_and_caches(tiny_llama, tmp_path):
    spec = A.ActsSpec(n_tokens=70, layer=1, ctx=8, seed=0, model="tiny")
    c = A.collect_activations(spec, model=tiny_llama, tokenizer=CharTokenizer(), folder=tmp_path)
    assert c.acts.shape == (70, 16) and c.acts.dtype == np.float16
    ids = torch.from_numpy(c.contexts[:2]).long()
    with torch.no_grad():
        hs = tiny_llama(input_ids=ids, output_hidden_states=True).hidden_states[2]
    want = hs[:, 1:].reshape(-1, 16)[:14].numpy()     # position 0 of each context dropped
    np.testing.assert_allclose(c.acts[:14].astype(np.float32), want, rtol=2e-3, atol=2e-3)
    assert (c.tokens[:7] == c.contexts[0, 1:]).all() and (c.ctx_ids[:7] == 0).all()
    again = A.collect_activations(spec, folder=tmp_path)   # read from the cache: no model needed
    np.testing.assert_array_equal(np.asarray(again.acts), np.asarray(c.acts))
    with pytest.raises(ValueError, match="valid: train, val"):
        A.ActsSpec(10, split="test")


def test_spliced_loss_identity_and_ablation(tiny_llama):
    ctxs = np.random.default_rng(0).integers(0, 50, size=(3, 10)).astype(np.int32)
    clean = A.spliced_loss(tiny_llama, ctxs, 1, mode="clean")
    ids = torch.from_numpy(ctxs).long()
    with torch.no_grad():
        logits = tiny_llama(input_ids=ids).logits[:, 1:-1]
    manual = float(torch.nn.functional.cross_entropy(logits.reshape(-1, 50), ids[:, 2:].reshape(-1)))
    assert clean == pytest.approx(manual, rel=1e-5)
    identity = lambda x: x  # an SAE that reconstructs perfectly
    assert A.spliced_loss(tiny_llama, ctxs, 1, sae=identity, mode="sae") == pytest.approx(clean, rel=1e-5)
    assert A.spliced_loss(tiny_llama, ctxs, 1, mode="zero") != pytest.approx(clean, rel=1e-3)
    # every position above the threshold is kept: zero-ablation with max_norm=0 changes nothing
    assert A.spliced_loss(tiny_llama, ctxs, 1, mode="zero", max_norm=0.0) == pytest.approx(clean, rel=1e-5)
    with pytest.raises(ValueError, match="valid: clean, sae, zero, mean"):
        A.spliced_loss(tiny_llama, ctxs, 1, mode="half")


def test_rows_and_outliers():
    X = np.ones((10, 3), dtype=np.float16)
    X[4] = 100
    thr = A.outlier_threshold(X, 8.0)
    rows = A.training_rows(X, thr)
    assert 4 not in rows and len(rows) == 9
    R = A.Rows(X, rows, scale=2.0)
    assert R.shape == (9, 3) and np.allclose(R[:], 2.0) and np.allclose(R[np.array([0, 3])], 2.0)


def test_token_properties_and_probe():
    toks = ["The", " cat", " (", "born", " 1999", ")", ",", " 7", "Dog"]
    ctx = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1])
    p = Q.token_properties(toks, ctx)
    assert p["capitalised"].tolist() == [1, 0, 0, 0, 0, 0, 0, 0, 1]
    assert p["year"].tolist() == [0, 0, 0, 0, 1, 0, 0, 0, 0]
    assert p["inside_parentheses"].tolist() == [0, 0, 0, 1, 1, 1, 0, 0, 0]
    assert p["punctuation"].tolist() == [0, 0, 1, 0, 0, 1, 1, 0, 0]
    rng = np.random.default_rng(0)
    y = rng.random(400) < 0.3
    codes = rng.random((400, 5))
    codes[:, 3] = y * 2.0 + 0.1 * rng.random(400)    # latent 3 is the property
    r = Q.probe_loss(codes, y)
    assert r["latent"] == 3 and r["loss"] < 0.1 < r["baseline"]


def test_unigram_explanations_exact():
    tokens = np.array([1, 2, 3, 1, 2, 3, 1, 2, 3])
    codes = np.zeros((9, 2))
    codes[tokens == 2, 0] = 1.0                         # latent 0 fires exactly on token 2
    codes[[0, 4], 1] = 1.0
    out = Q.unigram_explanations(codes, tokens, codes, tokens, [0])
    assert out[0]["precision"] == 1.0 and out[0]["recall"] == 1.0 and out[0]["n_tokens"] == 1


def test_effect_sparsity_closed_forms():
    one = torch.zeros(3, 50)
    one[1, 7] = 2.5                      # one logit of one position: 1 / (T V)
    assert Q.effect_sparsity(one) == pytest.approx(1 / 150)
    assert Q.effect_sparsity(one + torch.arange(3.0)[:, None]) == pytest.approx(1 / 150)  # shifts
    g = torch.randn(4, 200_000, generator=torch.Generator().manual_seed(0))
    assert Q.effect_sparsity(g) == pytest.approx(2 / np.pi, rel=0.01)   # (E|x|)^2 / E x^2
    assert np.isnan(Q.effect_sparsity(torch.ones(2, 5)))
    with pytest.raises(ValueError, match=r"\(T, V\)"):
        Q.effect_sparsity(torch.ones(5))


def test_ablation_effects_match_a_manual_edit(tiny_llama):
    sae = ts.TopKSAE(16, 24, 4, seed=0)
    with torch.no_grad():
        sae.b_enc.fill_(0.5)             # every latent active: 4 ablations
    ctx = np.random.default_rng(1).integers(0, 50, size=12)
    lat, act, diffs = Q.ablation_effects(tiny_llama, sae, ctx, 1, 5, scale=2.0, n_future=4)
    assert len(lat) == 4 and diffs.shape == (4, 4, 50) and (act > 0).all()
    ids = torch.from_numpy(ctx[:9]).long()[None]
    with torch.no_grad():
        clean = tiny_llama(input_ids=ids).logits[0, 5:9]
        h = tiny_llama(input_ids=ids, output_hidden_states=True).hidden_states[2][0, 5]
    with torch.no_grad():
        idx, vals = sae.encode(h[None] * 2.0)
    assert sorted(lat.tolist()) == sorted(idx[0].tolist())
    j = int(lat[0])
    v = float(vals[0][idx[0] == j][0])
    block = tiny_llama.model.layers[1]

    def edit(mod, args, out):           # brute force: subtract latent j's contribution by hand
        hh = out[0] if isinstance(out, tuple) else out
        hh = hh.clone()
        hh[0, 5] -= v * sae.W_dec[j].detach() / 2.0
        return (hh,) + tuple(out[1:]) if isinstance(out, tuple) else hh

    handle = block.register_forward_hook(edit)
    try:
        with torch.no_grad():
            edited = tiny_llama(input_ids=ids).logits[0, 5:9]
    finally:
        handle.remove()
    torch.testing.assert_close(diffs[0], edited - clean, rtol=1e-4, atol=1e-5)
    df = Q.ablation_sparsity(tiny_llama, sae, np.stack([ctx, ctx[::-1]]), 1, [3, 6], scale=2.0,
                             n_future=3, max_latents=2, desc=None)
    assert len(df) == 2 * 2 * 2 and df["sparsity"].between(0, 1).all()
    with pytest.raises(ValueError, match="position must be in"):
        Q.ablation_effects(tiny_llama, sae, ctx, 1, 12)


def test_ablation_skips_outlier_tokens(tiny_llama):
    sae = ts.TopKSAE(16, 24, 4, seed=0)
    ctx = np.arange(10) % 50
    lat, act, diffs = Q.ablation_effects(tiny_llama, sae, ctx, 1, 4, max_norm=0.0)
    assert len(lat) == 0 and diffs.shape[0] == 0
