"""Chapter 13: streaming statistics, census, sinks, interventions and attention variants, checked
against brute force on small inputs (tiny random Llama, tiny GPT)."""

import math

import numpy as np
import pytest
import torch

from iclr25 import lm
from iclr25 import systematic_outliers as so
from iclr25.tinygpt import TinyGPTConfig


@pytest.fixture(scope="module")
def tiny():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    tok = lm.tiny_tokenizer()
    torch.manual_seed(0)
    model = lm.tiny_llama(len(tok))
    yield model, tok
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def ids(tiny):
    g = torch.Generator().manual_seed(0)
    return torch.randint(3, len(tiny[1]), (5, 12), generator=g)


def test_streaming_stats_equal_brute_force(tiny, ids):
    model, _ = tiny
    st = so.activation_stats(model, ids, sites=("block_out", "down_in"), k=4, batch_size=2)
    with torch.no_grad(), lm.capture_residual(model) as res, lm.capture_mlp(model) as mlp:
        model(input_ids=ids)
    for site, rec in (("block_out", res), ("down_in", mlp)):
        for layer in st.layers:
            x = rec[layer]                                        # (5, T, D)
            a = x.abs().reshape(5, -1)
            s = st[site][layer]
            srt = a.sort(dim=1, descending=True).values.numpy()
            np.testing.assert_allclose(s.topk, srt[:, :4], rtol=1e-6)
            n = a.shape[1]
            np.testing.assert_allclose(s.median, np.sort(a.numpy(), 1)[:, (n - 1) // 2], rtol=1e-6)
            np.testing.assert_allclose(s.mean, a.mean(1).numpy(), rtol=1e-5)
            np.testing.assert_allclose(s.token_max, x.abs().amax(-1).numpy(), rtol=1e-6)
            # position and channel of the top value point at it
            D = x.shape[-1]
            for r in range(5):
                t, c = int(s.top_token[r, 0]), int(s.top_channel[r, 0])
                assert abs(float(x[r, t, c].abs()) - s.topk[r, 0]) < 1e-6
            # kurtosis of channel RMS (He et al. 2024), by brute force
            rms2 = x.double().pow(2).reshape(-1, D).mean(0).numpy()
            assert math.isclose(s.kurtosis, (rms2 ** 2).mean() / rms2.mean() ** 2, rel_tol=1e-9)


def test_reference_path_agrees(tiny, ids):
    model, _ = tiny
    fast = so.activation_stats(model, ids, k=3)
    ref = so.activation_stats_reference(model, ids, k=3)
    assert ref.layers == fast.layers[:-1]
    for layer in ref.layers:
        a, b = fast["block_out"][layer], ref["block_out"][layer]
        np.testing.assert_allclose(a.topk, b.topk, rtol=1e-6)
        np.testing.assert_allclose(a.median, b.median, rtol=1e-6)
        np.testing.assert_array_equal(a.top_token[:, 0], b.top_token[:, 0])
        np.testing.assert_array_equal(a.top_channel[:, 0], b.top_channel[:, 0])
    with pytest.raises(ValueError, match="after the final norm"):
        so.activation_stats_reference(model, ids, layers=[len(fast.layers) - 1])


def test_kurtosis_closed_forms():
    assert so.kurtosis(np.ones(8), 3) == pytest.approx(1.0)
    one = np.zeros(8)
    one[2] = 5.0
    assert so.kurtosis(one, 1) == pytest.approx(8.0)      # one loud channel: D


def test_bad_input_errors(tiny, ids):
    model, tok = tiny
    with pytest.raises(ValueError, match="valid sites"):
        so.activation_stats(model, ids, sites=("nope",))
    with pytest.raises(ValueError, match="integer tensor"):
        so.activation_stats(model, torch.zeros(2, 3))
    with pytest.raises(IndexError, match="out of range"):
        so.activation_stats(model, ids, layers=[99])
    with pytest.raises(ValueError, match="seq_len"):
        so.token_batch(tok, ["a b"], seq_len=50, n_seq=1)
    with pytest.raises(ValueError, match="valid: default"):
        so.make_gpt(TinyGPTConfig(16, 8, 1, 2, 16, 8), "softermax")
    with pytest.raises(ValueError, match="valid: mean, zero"):
        with so.reset_outliers(model, 0, [1], "half", 1.0):
            pass


def test_token_classes():
    assert so.token_class("Hello", 0) == "initial"
    assert so.token_class(".", 3) == "delimiter"
    assert so.token_class("\n", 3) == "delimiter"
    assert so.token_class(" the", 3) == "weak-semantic"
    assert so.token_class(" 1999", 3) == "weak-semantic"
    assert so.token_class(" Paris", 3) == "other"


def test_census_and_alignment_on_planted_outlier():
    """A hand-built ActivationStats: the census and alignment count what was planted."""
    T, D = 4, 6
    token_max = np.array([[100.0, 1, 1, 1], [1, 1, 50.0, 1]])
    ls = so.LayerStats(topk=np.array([[100.0], [50.0]]), top_token=np.array([[0], [2]]),
                       top_channel=np.array([[5], [5]]), median=np.ones(2), mean=np.ones(2),
                       token_max=token_max, channel_sumsq=np.ones(D), n_tokens=8)
    ids = torch.tensor([[7, 8, 9, 10], [7, 8, 9, 10]])

    class Tok:
        def decode(self, i):
            return {7: "A", 8: " cat", 9: ".", 10: " the"}[i[0]]

    st = so.ActivationStats({"block_out": {0: ls}}, ids=ids, k=1, layers=[0])
    c = so.outlier_tokens(st, Tok(), 0, tau=10)
    assert (c["initial"], c["delimiter"], c["weak-semantic"], c["other"], c["tokens"]) == (1, 1, 0, 0, 8)
    shares = so.max_token_census(st, Tok(), [0])
    assert shares == {"initial": 0.5, "delimiter": 0.5, "weak-semantic": 0.0, "other": 0.0}
    w = so.WeightOutliers(np.ones((1, D)), np.array([5]), np.array([0]), np.array([3.0]), np.array([9.0]))
    assert so.dim_alignment(w, st, [0]) == 1.0
    assert so.position_alignment(st, {1: np.array([0, 1])}, [0]) == 0.5


def test_weight_outliers_find_planted_entry(tiny):
    model, _ = tiny
    W = lm.decoder_layers(model)[1].mlp.down_proj.weight
    old = W.data.clone()
    try:
        W.data[3, 7] = 50.0
        w = so.weight_outliers(model)
        assert (w.top_feature[1], w.top_neuron[1], w.top_value[1]) == (3, 7, 50.0)
        A = W.detach().abs()
        assert w.feature_ratio[1, 3] == pytest.approx(float(A[3].max() / A[3].mean()), rel=1e-6)
    finally:
        W.data.copy_(old)


def test_sink_stats_brute_force(tiny, ids):
    model, _ = tiny
    sk = so.sink_stats(model, ids, min_query=2, batch_size=2)
    with lm.capture_attention(model) as att, lm.capture_heads(model) as heads, torch.no_grad():
        model(input_ids=ids)
    for layer in sk.share:
        A = att[layer]                                        # (B, H, T, T)
        np.testing.assert_allclose(sk.share[layer], A[:, :, 2:, 0].mean(-1).numpy(), rtol=1e-5)
        T = A.shape[-1]
        recv = A.sum(2).mean(1) / torch.arange(T, 0, -1)
        np.testing.assert_array_equal(sk.top_key[layer], recv.argmax(-1).numpy())
        norm = heads[layer].norm(dim=-1)                      # (B, T, H)
        for h in range(A.shape[1]):
            a = A[:, h, 2:, 0].reshape(-1).numpy()
            b = norm[:, 2:, h].reshape(-1).numpy()
            assert sk.corr_sink[layer][h] == pytest.approx(np.corrcoef(a, b)[0, 1], abs=1e-4)


def test_reset_outliers_mean_and_zero(tiny, ids):
    model, _ = tiny
    with lm.capture_residual(model, layers=[1]) as rec, torch.no_grad():
        model(input_ids=ids)
    x = rec[1][..., 2]
    thr = float(x.abs().quantile(0.8))
    hit = x.abs() > thr
    mean = so.outlier_means(model, ids, 1, [2], thr)
    assert float(mean[0]) == pytest.approx(float(x[hit].mean()), rel=1e-5)
    for mode, want in (("zero", torch.zeros(())), ("mean", mean[0])):
        with so.reset_outliers(model, 1, [2], mode, thr, means=mean) as iv, \
                lm.capture_residual(model, layers=[1]) as after, torch.no_grad():
            model(input_ids=ids)
        y = after[1]
        assert iv.counter["n"] == int(hit.sum())
        assert torch.allclose(y[..., 2][hit], want.expand(int(hit.sum())))
        assert torch.equal(y[..., 2][~hit], x[~hit])
        assert torch.equal(y[..., :2], rec[1][..., :2])


CFG = TinyGPTConfig(vocab_size=32, d_model=16, n_layers=2, n_heads=2, d_ff=32, max_len=10)


def _brute(attn, x):
    """Each variant's formula written out per head, from the module's parameters."""
    B, T, D = x.shape
    H, dh = attn.n_heads, attn.head_dim
    q, k, v = attn.qkv(x).split(D, -1)
    q, k, v = (t.view(B, T, H, dh).transpose(1, 2) for t in (q, k, v))
    mask = torch.ones(T, T).triu(1).bool()
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    P = s.masked_fill(mask, -1e30).softmax(-1)
    var = attn.variant
    if var == "sigmoid":
        y = (torch.sigmoid(s - math.log(T)) * (~mask)) @ v
    elif var == "attn_bias":
        s0 = q @ attn.k_slot.transpose(-1, -2) / math.sqrt(dh)              # (B, H, T, 1)
        full = torch.cat([s0, s.masked_fill(mask, -1e30)], -1).softmax(-1)
        y = full[..., :1] * attn.v_slot + full[..., 1:] @ v
    else:
        y = P @ v
        if var == "cabias":
            s0 = q @ attn.k_slot.transpose(-1, -2) / math.sqrt(dh)
            p0 = torch.cat([s0, s.masked_fill(mask, -1e30)], -1).softmax(-1)[..., :1]
            y = y + p0 * attn.v_slot
        if var == "ca_scale":
            y = y * (2 * torch.sigmoid(attn.scale_proj(x))).transpose(1, 2)[..., None]
    y = y.transpose(1, 2).reshape(B, T, D)
    if var == "vbias":
        y = y + attn.v_bias
    return attn.proj(y)


@pytest.mark.parametrize("variant", list(so.VARIANTS))
def test_variants_match_their_formulas(variant):
    model = so.make_gpt(CFG, variant, seed=0)
    attn = model.blocks[0].attn
    for p in attn.parameters():               # move the extra parameters off their init
        p.data.add_(0.3 * torch.randn_like(p))
    x = torch.randn(3, 7, CFG.d_model)
    with torch.no_grad():
        fast, _ = attn(x)
        slow, maps = attn(x, return_attn=True)
        want = _brute(attn, x)
    assert torch.allclose(fast, want, atol=1e-5)
    assert torch.allclose(slow, want, atol=1e-5)
    assert maps.shape == (3, CFG.n_heads, 7, 7)
    assert torch.all(maps.triu(1) == 0)
    # the model runs end to end, maps come back for every layer
    logits, all_maps = model(torch.randint(0, 32, (2, 6)), return_attn=True)
    assert logits.shape == (2, 6, 32) and len(all_maps) == 2


def test_variants_share_initial_weights():
    a, b = so.make_gpt(CFG, "default", seed=3), so.make_gpt(CFG, "ca_scale", seed=3)
    sa, sb = a.state_dict(), b.state_dict()
    for name, t in sa.items():
        assert torch.equal(t, sb[name]), name
    assert set(sb) - set(sa) == {f"blocks.{i}.attn.scale_proj.{p}" for i in range(2)
                                 for p in ("weight", "bias")}
    # S(x) = 1 at initialisation: ca_scale starts as the default model
    x = torch.randint(0, 32, (2, 6))
    with torch.no_grad():
        assert torch.equal(a(x), b(x))


def test_gpt_stats_sinks_and_compression():
    model = so.make_gpt(CFG, "default", seed=0)
    ids = torch.randint(0, 32, (4, 8))
    st = so.activation_stats(model, ids, sites=("block_out", "down_in"), k=2)
    with torch.no_grad():
        _, maps = model(ids, return_attn=True)
    sk = so.sink_stats(model, ids, min_query=2)
    np.testing.assert_allclose(sk.share[1], maps[1][:, :, 2:, 0].mean(-1).numpy(), rtol=1e-5)
    assert st["down_in"][0].token_max.shape == (4, 8)
    summ = so.outlier_summary(model, ids, min_query=2)
    assert summ["layers"] == [0, 1] and summ["max_over_median"] >= 1
    w = torch.randint(0, 32, (6, 9))
    base = so.gpt_perplexity(model, w)
    with torch.no_grad():
        logits = model(w[:, :-1])
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, 32), w[:, 1:].reshape(-1))
    assert base == pytest.approx(math.exp(float(nll)), rel=1e-5)
    pruned = so.compress(model, "prune50")
    lin = so.gpt_linears(pruned)
    assert sum(int((m.weight == 0).sum()) for m in lin) / sum(m.weight.numel() for m in lin) \
        == pytest.approx(0.5, abs=0.01)
    q = so.compress(model, "w8_tensor")
    for m in so.gpt_linears(q):
        assert m.weight.unique().numel() <= 255
    assert so.gpt_linears(model)[0].weight.unique().numel() > 255     # the original is untouched
    with pytest.raises(ValueError, match="valid: w8_tensor"):
        so.compress(model, "w4")


def test_configs_profiles():
    for fn in (so.configs.census, so.configs.lifecycle, so.configs.variants, so.configs.compression):
        for p in ("smoke", "book", "paper"):
            assert fn(p).seed == 0
    with pytest.raises(ValueError, match="valid profiles"):
        so.configs.census("huge")
    with pytest.raises(ValueError, match="valid"):
        so.configs.census("smoke", nope=1)


def test_spike_and_middle_layers_closed_form():
    assert so.spike_layer(np.array([1.0, 2.0, 100.0, 120.0])) == 2
    assert so.middle_layers(30) == list(range(10, 20))
    assert so.middle_layers(18) == list(range(6, 12))
    with pytest.raises(ValueError, match="at least two"):
        so.spike_layer(np.array([1.0]))
    with pytest.raises(ValueError, match="at least 3"):
        so.middle_layers(2)


def test_model_census_matches_its_parts():
    """model_census on a 4-layer tiny Llama equals the notebook's step-by-step computation."""
    tok = lm.tiny_tokenizer()
    torch.manual_seed(1)
    model = lm.tiny_llama(len(tok), n_layers=4)
    ids = torch.randint(3, len(tok), (4, 10), generator=torch.Generator().manual_seed(1))
    c = so.model_census(model, tok, ids, k=2, tau=3.0, min_query=2)
    st = so.activation_stats(model, ids, k=2)
    top1 = st.table("block_out")["top1"].to_numpy()
    assert c.emerge == so.spike_layer(top1) and c.n_layers == 4
    assert sum(c.at_max.values()) == pytest.approx(1.0)
    assert c.at_max == so.max_token_census(st, tok, so.middle_layers(4))
    sk = so.sink_stats(model, ids, min_query=2)
    assert c.position_alignment == so.position_alignment(st, sk.top_key, so.middle_layers(4))
    H = model.config.num_attention_heads
    assert c.n_heads == (4 - c.emerge - 1) * H
    assert c.gain_ratio is None                      # Llama: the MLP output is added directly
    assert c.top_weight_feature == so.weight_outliers(model).top_feature[c.emerge]


def test_post_mlp_gain_on_a_gemma_block():
    """Gemma 3 scales the normalised MLP output by 1 + weight: the ratio reads that gain."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    cfg = Gemma3TextConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                           num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                           head_dim=8, max_position_embeddings=64)
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(cfg).eval()
    norm = lm.decoder_layers(model)[1].post_feedforward_layernorm
    with torch.no_grad():
        norm.weight.zero_()
        norm.weight[5] = 99.0                         # gain 100 on dim 5, 1 elsewhere
    assert so.post_mlp_gain(model, 1, 5) == pytest.approx(100.0)
    assert so.post_mlp_gain(model, 1, 4) == pytest.approx(1.0)
    assert so.post_mlp_gain(lm.tiny_llama(64), 0, 0) is None


# ------------------------------------------------------------------ issue 50: the registry's measures
from iclr25.systematic_outliers import measures as M  # noqa: E402


def test_gaussian_closed_forms_against_monte_carlo():
    assert M.expected_max_abs_normal(1) == pytest.approx(math.sqrt(2 / math.pi), rel=1e-6)
    assert M.gaussian_log10_max_over_median(1) == pytest.approx(
        math.log10(math.sqrt(2 / math.pi) / 0.6744897501960817), rel=1e-6)
    rng = np.random.default_rng(0)
    for n in (10, 3000):
        mc = np.abs(rng.standard_normal((4000, n))).max(1).mean()
        assert M.expected_max_abs_normal(n) == pytest.approx(mc, rel=0.01)
    # 128 x 576 entries: a Gaussian tensor's max is ~6.6x its median (log10 ~0.82)
    assert 0.78 < M.gaussian_log10_max_over_median(128 * 576) < 0.86
    assert M.gaussian_log10_max_over_mean(10) == pytest.approx(
        math.log10(M.expected_max_abs_normal(10) / math.sqrt(2 / math.pi)))
    with pytest.raises(ValueError, match="positive"):
        M.expected_max_abs_normal(0)


def test_census_replicates_brute_force(tiny, ids):
    model, tok = tiny
    st = so.activation_stats(model, ids, k=2)
    layers = [0, 1]
    with torch.no_grad(), lm.capture_residual(model) as res:
        model(input_ids=ids)
    a = {l: res[l].abs().reshape(ids.shape[0], -1).numpy() for l in layers}
    mom = np.median([[np.log10(a[l][s].max() / np.sort(a[l][s])[(a[l].shape[1] - 1) // 2])
                      for s in range(ids.shape[0])] for l in layers], axis=0)
    np.testing.assert_allclose(M.per_seq_log10_max_over_median(st, layers), mom, rtol=1e-5)
    cls = so.classify_ids(tok, ids)
    want = ("initial", "delimiter")
    on = M.per_seq_max_on_classes(st, tok, layers, want)
    for s in range(ids.shape[0]):
        pos = [int(res[l][s].abs().amax(-1).argmax()) for l in layers]
        assert on[s] == pytest.approx(np.mean([cls[s][p] in want for p in pos]))
    rate = M.per_seq_class_rate(st, tok, want)
    np.testing.assert_allclose(rate, [np.mean([c in want for c in row]) for row in cls])
    assert np.all(rate >= 1 / ids.shape[1])           # the initial token always counts
    # outlier tokens with a small tau: counted by brute force
    tau = 1.5
    ours, ctrl, kept = M.per_seq_outlier_tokens_on_classes(st, tok, layers, tau=tau,
                                                           wanted=("initial", "other"))
    for i, s in enumerate(kept):
        occ = [(p, l) for l in layers for p in range(ids.shape[1])
               if float(res[l][s, p].abs().max()) > tau * float(res[l][s].abs().mean())]
        assert ours[i] == pytest.approx(np.mean([cls[s][p] in ("initial", "other") for p, _ in occ]))
    assert len(ctrl) == len(ours)


def test_uniform_sink_and_marginal_chance():
    assert M.uniform_causal_sink(5, 4) == pytest.approx(1 / 5)
    assert M.uniform_causal_sink(6, 4) == pytest.approx((1 / 5 + 1 / 6) / 2)
    with pytest.raises(ValueError, match="min_query"):
        M.uniform_causal_sink(4, 4)
    assert M.marginal_agreement_chance([0, 0, 1, 1], [0, 0, 0, 1]) == pytest.approx(0.5)
    assert M.marginal_agreement_chance([0, 0], [1, 2]) == 0.0
    # against the agreement rate of independently shuffled pairs
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 4, 500), rng.choice([0, 0, 0, 1, 2], 500)
    mc = np.mean([np.mean(rng.permutation(a) == b) for _ in range(2000)])
    assert M.marginal_agreement_chance(a, b) == pytest.approx(mc, abs=0.005)


def test_position_alignment_and_head_correlations(tiny, ids):
    model, _ = tiny
    st = so.activation_stats(model, ids, k=1)
    sk = so.sink_stats(model, ids, min_query=2)
    ours, chance = M.per_seq_position_alignment(st, sk.top_key, [0])
    act, att = st["block_out"][0].top_token[:, 0], sk.top_key[1]
    np.testing.assert_allclose(ours, (act == att).astype(float))
    assert chance == pytest.approx(M.marginal_agreement_chance(act, att))
    # the overall rate of the replicates is the old position_alignment
    assert ours.mean() == pytest.approx(so.position_alignment(st, sk.top_key, [0]))
    c, p = M.head_correlations(sk, [0, 1])
    assert c.shape == p.shape and np.all(np.isfinite(c))
    np.testing.assert_allclose(M.per_seq_sink_attention(sk, [0, 1]),
                               (sk.share[0].mean(1) + sk.share[1].mean(1)) / 2)


def test_sink_share_on_key_1_brute_force(tiny, ids):
    model, _ = tiny
    sk = so.sink_stats(model, ids, min_query=3)
    with torch.no_grad():
        model.set_attn_implementation("eager")
        A = model(input_ids=ids, output_attentions=True, use_cache=False).attentions
    for l in sk.share1:
        np.testing.assert_allclose(sk.share1[l], A[l][:, :, 3:, 1].mean(-1).numpy(), rtol=1e-5)
        np.testing.assert_allclose(sk.share[l], A[l][:, :, 3:, 0].mean(-1).numpy(), rtol=1e-5)


def test_lifecycle_replicates_closed_form():
    x0 = np.ones((4, 3, 5))                         # (layers, sequences, dims)
    x0[:, :, 2] = [[1.0], [1000.0], [2000.0], [100.0]]   # dim 2: written by layer 1, removed
    x0[:, :, 4] = [[1.0], [2.0], [4.0], [8.0]]           # an ordinary growing dim
    g, ctrl = M.first_token_growth(x0, 1, 2)
    np.testing.assert_allclose(g, 3.0)
    np.testing.assert_allclose(ctrl, 0.0)           # median over dims 0, 1, 3, 4
    r, rc = M.first_token_last_over_peak(x0, 2)
    np.testing.assert_allclose(r, math.log10(100 / 2000))
    np.testing.assert_allclose(rc, 0.0)
    with pytest.raises(ValueError, match="layer"):
        M.first_token_growth(x0, 0, 2)
    share = {0: np.full((3, 2), 0.1), 1: np.full((3, 2), 0.3), 2: np.full((3, 2), 0.5)}
    np.testing.assert_allclose(M.per_seq_attention_change(share, [0], [1, 2]), 0.3)


def test_per_text_log_ppl_brute_force(tiny, ids):
    model, _ = tiny
    got = M.per_text_log_ppl(model, ids, batch_size=2)
    with torch.no_grad():
        for s in range(ids.shape[0]):
            logits = model(input_ids=ids[s:s + 1]).logits[0].double()
            lp = torch.log_softmax(logits[:-1], -1)
            want = -lp[torch.arange(ids.shape[1] - 1), ids[s, 1:]].mean()
            assert got[s] == pytest.approx(float(want), rel=1e-5)


class _Mod:
    num_key_value_groups = 1
    layer_idx = 0


def test_knockout_attention_formulas():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 3, generator=g) for _ in range(3))
    w = torch.softmax((q @ k.transpose(2, 3) * 0.5).masked_fill(
        torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf")), -1)
    plain = (w @ v).transpose(1, 2)
    M._KNOCKOUT_STATE.update(mode=None, layers=frozenset({0}))
    y, _ = M._knockout_attention(_Mod(), q, k, v, None, 0.5)
    torch.testing.assert_close(y, plain)
    for mode in ("scale", "bias"):
        M._KNOCKOUT_STATE.update(mode=mode, layers=frozenset({0}))
        y, _ = M._knockout_attention(_Mod(), q, k, v, None, 0.5)
        for h in range(2):
            for t in range(1, 5):
                a = w[0, h, t]
                rest = sum(a[j] * v[0, h, j] for j in range(1, t + 1))
                want = rest if mode == "bias" else a[0] * v[0, h, 0] + rest / (1 - a[0])
                torch.testing.assert_close(y[0, t, h], want, rtol=1e-5, atol=1e-6)
    M._KNOCKOUT_STATE.update(mode=None, layers=frozenset())


def test_sink_knockout_on_a_model(tiny, ids):
    model, _ = tiny
    n = len(lm.decoder_layers(model))
    base = M.per_text_log_ppl(model, ids)
    impl = model.config._attn_implementation
    with M.sink_knockout(model, None, range(n)):
        np.testing.assert_allclose(M.per_text_log_ppl(model, ids), base, rtol=1e-5)
    with M.sink_knockout(model, "bias", range(n)):
        assert not np.allclose(M.per_text_log_ppl(model, ids), base)
    assert model.config._attn_implementation == impl
    np.testing.assert_allclose(M.per_text_log_ppl(model, ids), base, rtol=1e-6)
    with pytest.raises(ValueError, match="knockout"):
        with M.sink_knockout(model, "nope", [0]):
            pass


def test_fake_quant_and_kept_sites():
    x = torch.tensor([[[1.0, -2.0], [0.5, 100.0]]])          # (1, 2, 2); 100 an outlier
    q = M.fake_quant_per_tensor(x, bits=8)
    step = 100.0 / 127
    torch.testing.assert_close(q, (x / step).round() * step)
    keep = torch.tensor([[[False, False], [False, True]]])
    q2 = M.fake_quant_per_tensor(x, keep, bits=8)
    step2 = 2.0 / 127
    assert float(q2[0, 1, 1]) == 100.0                         # kept as it is
    torch.testing.assert_close(q2[0, 0], (x[0, 0] / step2).round() * step2)
    assert M.outlier_token_mask(x, tau=1.5).tolist() == [[False, True]]


def test_quantize_activations_counts_same_sites(tiny, ids):
    model, _ = tiny
    counts = {}
    for keep in ("none", "outliers", "random"):
        with M.quantize_activations(model, keep=keep, dim=0, tau=2.0) as c:
            M.per_text_log_ppl(model, ids)
        counts[keep] = c["kept"]
    assert counts["none"] == 0 and counts["outliers"] == counts["random"]
    with pytest.raises(ValueError, match="keep"):
        with M.quantize_activations(model, keep="all"):
            pass


def test_steps_to_loss():
    h = {"step": list(range(30)), "loss": [3.0] * 10 + [1.0] * 20}
    # the 10-step running mean first reaches <= 2 at the window ending at step 14 (5 x 3, 5 x 1)
    assert M.steps_to_loss(h, 2.0) == 14
    assert M.steps_to_loss(h, 0.5) == 31                        # never: n_steps + 1
    with pytest.raises(ValueError, match="at least"):
        M.steps_to_loss({"step": [0], "loss": [1.0]}, 1.0)


def test_no_bias_gpt_keeps_shared_weights():
    cfg = TinyGPTConfig(vocab_size=20, d_model=8, n_layers=2, n_heads=2, d_ff=16, max_len=8)
    a = so.make_gpt(cfg, "ca_scale", seed=3)
    b = so.make_gpt(cfg, "ca_scale", seed=3, bias=False)
    assert not any(n.endswith("bias") for n, _ in b.named_parameters())
    wa = dict(a.named_parameters())
    for n, p in b.named_parameters():
        torch.testing.assert_close(p, wa[n])
    x = torch.randint(0, 20, (2, 8))
    assert b(x).shape == (2, 8, 20)
    assert so.configs.variants("book").bias is False


def test_layer_writes_dim_and_weight_ratio(tiny):
    model, _ = tiny
    np.testing.assert_array_equal(M.layer_writes_dim([3, 1, 3], 3), [1.0, 0.0, 1.0])
    r, shape = M.per_layer_log10_weight_ratio(model)
    w = so.weight_outliers(model)
    np.testing.assert_allclose(r, np.log10(w.top_over_mean), rtol=1e-5)
    assert shape == tuple(lm.decoder_layers(model)[0].mlp.down_proj.weight.shape)
